/**
 * Counterfactual replay (docs/guides/evals.md): a root thread an experiment runs as a replay of a recorded one has
 * every call its model makes answered from the record while the calls match it, so nothing real happens: tools (side
 * effects included), MCP tools, env-data reads and writes, delegations, forks, questions and waits. The n-th call of
 * the thread matches when the record's n-th call has the same name and the same arguments (as JSON, keys in any order).
 * The first call that does not match is the divergence, kept in Postgres; then the replay's policy says what happens:
 * `stop` and `fail` end the turn there (`Eval.Diverged`), `live-read-only` runs a read-only tool live (counted) and
 * ends the turn at anything else. Only a worker started for evaluations (`createBatonWorker({ evalReplays: true })`)
 * looks; every other worker never reads the table.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Pool } from 'pg';
import { ErrorType } from '../common/errors';
import type { ThreadScope, ToolCallRequest } from '../common/types';
import { countLiveCall, findReplay, recordDivergence, type Divergence, type Replay } from '../db/evals';
import { listMessages, type TranscriptMessage } from '../db/transcripts';

/** What a replay does with one call of its thread. */
export type ReplayAnswer =
  /** The recorded result: stored as the call's result, and nothing runs. */
  | { kind: 'recorded'; content: string; ok: boolean }
  /** Past the divergence, a read-only tool under `live-read-only`: it runs as it would outside a replay. */
  | { kind: 'live' };

/** JSON text with its keys sorted at every level, or the text trimmed when it is not JSON: how arguments compare. */
export function normalizedArguments(text: string): string {
  const sorted = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sorted);
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(
        Object.keys(value)
          .sort()
          .map((key) => [key, sorted((value as Record<string, unknown>)[key])]),
      );
    }
    return value;
  };
  try {
    return JSON.stringify(sorted(JSON.parse(text)));
  } catch {
    return text.trim();
  }
}

/** The calls of a transcript in order, each with its result when one is stored. */
function callsOf(transcript: readonly TranscriptMessage[]): { call: ToolCallRequest; result?: TranscriptMessage }[] {
  const results = new Map(
    transcript.filter((message) => message.role === 'tool').map((message) => [message.toolCallId, message]),
  );
  return transcript.flatMap((message) =>
    (message.toolCalls ?? []).map((call) => {
      const result = results.get(call.id);
      return result === undefined ? { call } : { call, result };
    }),
  );
}

/** Replays for the activities of an evaluation worker. */
export function createReplayAnswers(pool: Pool) {
  /** The source and policy of each replay this worker has seen (they never change), by root thread. */
  const known = new Map<string, Replay | null>();

  async function replayOf(rootThreadId: string): Promise<Replay | undefined> {
    const cached = known.get(rootThreadId);
    if (cached !== undefined) return cached ?? undefined;
    const replay = await findReplay(pool, rootThreadId);
    // A bounded few: an evaluation worker serves one experiment's threads.
    if (known.size > 10_000) known.clear();
    known.set(rootThreadId, replay ?? null);
    return replay;
  }

  /**
   * Answers a call of a replayed thread from the record, or says it runs live; `undefined` for a thread that is no
   * replay. `readOnly` says whether the call is of a tool without side effects that the activity runs.
   * @throws ApplicationFailure `Eval.Diverged` at the first call that does not match, unless it runs live
   */
  async function answer(
    scope: ThreadScope,
    call: ToolCallRequest,
    place: { messageSeq: number; operationId: string },
    readOnly: boolean,
  ): Promise<ReplayAnswer | undefined> {
    const replay = await replayOf(scope.rootThreadId);
    if (replay === undefined) return undefined;
    const transcript = await listMessages(pool, scope.threadId);
    const before = transcript.filter((message) => message.seq < place.messageSeq);
    const reply = transcript.find((message) => message.seq === place.messageSeq);
    const index =
      callsOf(before).length +
      Math.max(
        0,
        (reply?.toolCalls ?? []).findIndex((made) => made.id === call.id),
      );
    // The replay's own thread answers from the recorded root thread: every call below it is answered, never run.
    const recorded = callsOf(await listMessages(pool, replay.sourceRootThreadId))[index];
    const matches =
      recorded?.result !== undefined &&
      recorded.call.name === call.name &&
      normalizedArguments(recorded.call.arguments) === normalizedArguments(call.arguments);
    if (matches && recorded.result !== undefined) {
      const content = recorded.result.content ?? '';
      return { kind: 'recorded', content, ok: !content.startsWith('Error: ') };
    }
    const divergence: Divergence = {
      step: transcript.filter((message) => message.role === 'assistant' && message.seq <= place.messageSeq).length,
      agent: scope.agent,
      call: index + 1,
      recorded: recorded === undefined ? null : { name: recorded.call.name, arguments: recorded.call.arguments },
      made: { name: call.name, arguments: call.arguments },
    };
    await recordDivergence(pool, scope.rootThreadId, divergence);
    if (replay.policy === 'live-read-only' && readOnly) {
      await countLiveCall(pool, scope.rootThreadId, place.operationId);
      return { kind: 'live' };
    }
    throw ApplicationFailure.create({
      type: ErrorType.EvalDiverged,
      message: `the replay diverged from thread '${replay.sourceRootThreadId}' at ${describeDivergence(divergence)}`,
      nonRetryable: true,
      details: [divergence],
    });
  }

  /** Whether a root thread is a replay: its every call is then run by the tool activity, which answers it. */
  async function isReplay(rootThreadId: string): Promise<boolean> {
    return (await replayOf(rootThreadId)) !== undefined;
  }

  return { answer, isReplay };
}

export type ReplayAnswers = ReturnType<typeof createReplayAnswers>;

/** A divergence in words: where, what the record has, what was made. */
export function describeDivergence(divergence: Divergence): string {
  const made = `${divergence.made.name}(${divergence.made.arguments})`;
  const recorded =
    divergence.recorded === null
      ? 'the record has no call there'
      : `the record has ${divergence.recorded.name}(${divergence.recorded.arguments})`;
  return `call ${divergence.call} (step ${divergence.step}, ${divergence.agent}): made ${made}, ${recorded}`;
}
