import { WorkflowIdReusePolicy, type SearchAttributePair } from '@temporalio/common';
import { threadWorkflowId } from './ids';
import { BatonSearchAttributes } from './search-attributes';
import { truncateBytes } from './text';
import type { ThreadWorkflowInput } from './types';

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
