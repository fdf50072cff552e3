import { WorkflowIdReusePolicy, type SearchAttributePair } from '@temporalio/common';
import { threadWorkflowId } from './ids';
import { BatonSearchAttributes } from './search-attributes';
import { truncateBytes } from './text';
import type { ThreadWorkflowInput } from './types';
import {
  ENV_CHANGED_SIGNAL,
  watcherWorkflowId,
  type EnvChangedSignalInput,
  type WatcherWorkflowInput,
} from './watchers';

/**
 * A root thread's workflow task timeout, half Temporal's default. A turn whose steps are local runs them in the
 * thread's task, and the SDK renews a task held by local activities at 80% of this timeout: until then the thread
 * answers no query (`status`) and accepts no message. Renewed every 4 s rather than 8, and a dead worker's task
 * noticed after 5 s rather than 10. Each of the thread's own tasks is short work (its history is bounded by
 * continue-as-new), far below it.
 */
export const THREAD_TASK_TIMEOUT_MS = 5_000;

/**
 * How a root thread's `threadWorkflow` is started, by the client SDK and by a scheduled run alike: its derived
 * workflow id, Baton's search attributes, a reuse policy that never starts an ended thread again (a thread id names
 * one conversation and its data forever), and its workflow task timeout (`THREAD_TASK_TIMEOUT_MS`).
 */
export function threadStartOptions(input: ThreadWorkflowInput, taskQueue: string) {
  const threadId = input.rootThreadId;
  return {
    workflowId: threadWorkflowId(threadId),
    taskQueue,
    args: [input] as [ThreadWorkflowInput],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    workflowTaskTimeout: THREAD_TASK_TIMEOUT_MS,
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
 * runs, else signals the one that does). Every writer of a change that may wake it, and whoever adds it, sends this;
 * a traced writer names its span (`writer`), which the wake-up links to.
 */
export function watcherSignalWithStartOptions(
  watcher: { rootThreadId: string; name: string; agent: string; keys: readonly string[] },
  taskQueue: string,
  writer?: EnvChangedSignalInput,
) {
  const { rootThreadId } = watcher;
  return {
    workflowId: watcherWorkflowId(rootThreadId, watcher.name),
    taskQueue,
    args: [{ rootThreadId, watcher: watcher.name }] as [WatcherWorkflowInput],
    signal: ENV_CHANGED_SIGNAL,
    signalArgs: (writer?.traceparent === undefined ? [] : [writer]) as [EnvChangedSignalInput?],
    staticSummary: truncateBytes(`watcher ${watcher.name} (${watcher.agent}): ${watcher.keys.join(', ')}`, 200),
    typedSearchAttributes: [
      { key: BatonSearchAttributes.rootThreadId, value: rootThreadId },
      { key: BatonSearchAttributes.threadId, value: rootThreadId },
      { key: BatonSearchAttributes.agent, value: watcher.agent },
    ] as SearchAttributePair[],
  };
}
