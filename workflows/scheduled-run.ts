import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import {
  runThreadId,
  runUpdateId,
  withSchedulePreamble,
  type ScheduledRunInput,
  type ScheduledRunResult,
} from '../common/schedules';
import { BatonSearchAttributes, TemporalScheduledStartTime } from '../common/search-attributes';
import { delivery } from './activity-profiles';

/**
 * One run of a Baton schedule (the action of a Temporal Schedule): posts the schedule's message, with a
 * `[Schedule Context]` preamble, into its standing thread or into a new root thread derived from the schedule and
 * the run's scheduled time, then waits for the agent's reply. Waiting is what makes overlap `skip` skip a run while
 * the previous one is still working. A new workflow type, so no recorded history of the others changes.
 */
export async function scheduledRunWorkflow(input: ScheduledRunInput): Promise<ScheduledRunResult> {
  const info = workflowInfo();
  // Temporal sets the nominal time on every run a Schedule starts (trigger and backfill included); a run started by
  // hand names its own, else its start time stands in.
  const nominal = info.typedSearchAttributes.get(TemporalScheduledStartTime);
  const scheduledAt = (nominal ?? (input.scheduledAt ? new Date(input.scheduledAt) : info.startTime)).toISOString();
  const newThread = input.target.kind === 'new-thread';
  const threadId = input.target.kind === 'thread' ? input.target.threadId : runThreadId(input.schedule, scheduledAt);
  if (newThread) {
    // The schedule could not know the thread id in advance; now `BatonRootThreadId="<id>"` finds this run too.
    upsertSearchAttributes([
      { key: BatonSearchAttributes.rootThreadId, value: threadId },
      { key: BatonSearchAttributes.threadId, value: threadId },
    ]);
  }
  setCurrentDetails(`Posting the message of schedule ${input.schedule} to thread ${threadId}; waiting for the reply.`);
  const delivered = await delivery.deliverScheduledMessage.executeWithOptions(
    { summary: `schedule: ${input.schedule} → ${threadId}` },
    [
      {
        threadId,
        agent: input.agent,
        world: input.world ?? 'default',
        message: withSchedulePreamble(input.message, { schedule: input.schedule, scheduledAt, target: input.target }),
        createThread: newThread,
        updateId: runUpdateId(input.schedule, scheduledAt),
      },
    ],
  );
  setCurrentDetails(`Done: turn ${delivered.turn} of thread ${threadId} ${delivered.status}.`);
  return {
    schedule: input.schedule,
    threadId,
    scheduledAt,
    createdThread: delivered.createdThread,
    turn: delivered.turn,
    status: delivered.status,
    reply: delivered.reply,
  };
}
