import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes set on every Baton workflow start (children do not inherit them), so the Web UI can list
 * a whole delegation tree with `BatonRootThreadId="<id>"`. The dev server registers them at start;
 * `baton setup` registers them on other servers.
 */
export const BatonSearchAttributes = {
  rootThreadId: defineSearchAttributeKey('BatonRootThreadId', SearchAttributeType.KEYWORD),
  threadId: defineSearchAttributeKey('BatonThreadId', SearchAttributeType.KEYWORD),
  parentThreadId: defineSearchAttributeKey('BatonParentThreadId', SearchAttributeType.KEYWORD),
  agent: defineSearchAttributeKey('BatonAgent', SearchAttributeType.KEYWORD),
} as const;

/** Every Baton search attribute key, in registration order. */
export const batonSearchAttributeKeys = Object.values(BatonSearchAttributes);

/**
 * Set by Temporal on every workflow a Schedule starts: the run's nominal time (jitter aside), the same for a retry
 * of that run. `scheduledRunWorkflow` derives its run's thread from it.
 */
export const TemporalScheduledStartTime = defineSearchAttributeKey(
  'TemporalScheduledStartTime',
  SearchAttributeType.DATETIME,
);
