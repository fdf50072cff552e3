import { WorkflowIdReusePolicy, type SearchAttributePair } from '@temporalio/common';
import { threadWorkflowId } from './ids';
import { BatonSearchAttributes } from './search-attributes';
import { truncateBytes } from './text';
import type { ThreadWorkflowInput } from './types';
import { ENV_CHANGED_SIGNAL, watcherWorkflowId, type WatcherWorkflowInput } from './watchers';

/**
 * How a root thread's `threadWorkflow` is started, by the client SDK and by a scheduled run alike: its derived
 * workflow id, Baton's search attributes, and a reuse policy that never starts an ended thread again (a thread id
 * names one conversation and its data forever).
 */
export function threadStartOptions(input: ThreadWorkflowInput, taskQueue: string) {
  const threadId = input.rootThreadId;
  return {
    workflowId: threadWorkflowId(threadId),
    taskQueue,
    args: [input] as [ThreadWorkflowInput],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    staticSummary: truncateBytes(`thread: ${input.agent}`, 200),
    typedSearchAttributes: [
      { key: BatonSearchAttributes.rootThreadId, value: threadId },
      { key: BatonSearchAttributes.threadId, value: threadId },
      { key: BatonSearchAttributes.agent, value: input.agent },
    ] as SearchAttributePair[],
  };
}

/**
 * How a root's watcher workflow is started, with its first signal (Signal-with-Start: it starts the workflow when none
 * runs, else signals the one that does). Every writer of a change that may wake it, and whoever adds it, sends this.
 */
export function watcherSignalWithStartOptions(
  watcher: { rootThreadId: string; name: string; agent: string; keys: readonly string[] },
  taskQueue: string,
) {
  const { rootThreadId } = watcher;
  return {
    workflowId: watcherWorkflowId(rootThreadId, watcher.name),
    taskQueue,
    args: [{ rootThreadId, watcher: watcher.name }] as [WatcherWorkflowInput],
    signal: ENV_CHANGED_SIGNAL,
    signalArgs: [] as [],
    staticSummary: truncateBytes(`watcher ${watcher.name} (${watcher.agent}): ${watcher.keys.join(', ')}`, 200),
    typedSearchAttributes: [
      { key: BatonSearchAttributes.rootThreadId, value: rootThreadId },
      { key: BatonSearchAttributes.threadId, value: rootThreadId },
      { key: BatonSearchAttributes.agent, value: watcher.agent },
    ] as SearchAttributePair[],
  };
}
