import type { Pool } from 'pg';
import type { AgentDefinition } from '../common/agent-definition';
import { withDelegationPreamble, type ForkPosition } from '../common/delegation-preamble';
import type {
  FenceFailedTurnInput,
  FenceFailedTurnResult,
  FinishTurnInput,
  OpenDelegationInput,
  OpenDelegationResult,
} from '../common/types';
import { markThread, openDelegation as openDelegationRow, type DelegationReads } from '../db/delegations';
import { fenceFailedThread } from '../db/fences';
import type { EnvManifestEntry, EnvStore } from '../db/env-data';
import type { AgentStore } from './agent-store';
import { storableText } from '../common/text';
import { toApplicationFailure } from './failures';

export interface DelegationActivityOptions {
  pool: Pool;
  agentStore: AgentStore;
  env: EnvStore;
}

/** Activities behind delegation: opening a child thread with its preamble, and recording how turns end. */
export function createDelegationActivities({ pool, agentStore, env }: DelegationActivityOptions) {
  /**
   * Opens a delegation: numbers it, picks or creates the callee's thread and builds the message the callee receives
   * (the delegation preamble at the callee's detail level, then the caller's message). Once per operation id.
   * @throws ApplicationFailure `Agent.NotFound` (the callee is gone), `Thread.StaleEpoch`
   */
  async function openDelegation(input: OpenDelegationInput): Promise<OpenDelegationResult> {
    const caller = await agentStore.load(input.callerVersion);
    const callee = await agentStore.resolve(input.callee);
    const calleeDefinition = await agentStore.load(callee.version);
    const manifest = await env.list(input.scope.rootThreadId, {}, { threadId: input.scope.threadId });
    try {
      const row = await openDelegationRow(pool, input.scope, input.operationId, {
        callee: input.callee,
        mode: input.mode,
        chain: [...input.chain, input.callee],
        callerMessageSeq: input.callerMessageSeq,
        budget: calleeDefinition.budget,
        buildMessage: (reads) =>
          delegatedMessage(input.message, {
            caller,
            callee: calleeDefinition,
            chain: input.chain,
            reads,
            taskContextLimit: input.taskContextLimit,
            manifest,
            contextKeys: input.contextKeys,
          }),
      });
      return {
        threadId: row.threadId,
        workflowId: row.workflowId,
        epoch: row.epoch,
        message: row.message,
        ...(calleeDefinition.timeout_s === undefined ? {} : { timeoutSeconds: calleeDefinition.timeout_s }),
      };
    } catch (error) {
      throw toApplicationFailure(error);
    }
  }

  /** Records how a thread's latest turn is going (for `baton tree`). Idempotent. */
  async function finishTurn(input: FinishTurnInput): Promise<void> {
    await markThread(pool, input.threadId, input.status, input.error);
  }

  /**
   * Records that a delegated turn or fork task failed, as its caller saw it, and fences it: the epochs of its thread
   * and of every thread below it move on, so whatever their activities still try to write is refused (a turn stopped
   * by its `timeout_s` could not stop them itself), and their pending approvals and open questions are cancelled with
   * the reason. Once: a thread that has moved past the turn's epoch is left alone.
   */
  async function fenceFailedTurn(input: FenceFailedTurnInput): Promise<FenceFailedTurnResult> {
    const fencedThreads = await fenceFailedThread(pool, input.rootThreadId, input.threadId, input.epoch, input.error);
    return { fencedThreads };
  }

  return { openDelegation, finishTurn, fenceFailedTurn };
}

/** What a delegated message's preamble is built from. */
export interface DelegatedMessageContext {
  caller: AgentDefinition;
  callee: AgentDefinition;
  /** Agents from the root down to the caller. */
  chain: string[];
  /** What the delegation's transaction read: the root's message and the caller's latest. */
  reads: DelegationReads;
  taskContextLimit: number;
  /** The env data the caller sees (the preamble mentions it only when there is some). */
  manifest: readonly EnvManifestEntry[];
  /** Entries the caller pointed to; listed with their descriptions, or as missing. */
  contextKeys: readonly string[];
  /** Set for a fork task: its place among its siblings. */
  fork?: ForkPosition;
}

/**
 * The message a delegated agent receives: the delegation preamble at the callee's detail level, then the caller's
 * message. The message comes from a model's tool arguments: what Postgres cannot store is cleaned, not refused.
 */
export function delegatedMessage(message: string, context: DelegatedMessageContext): string {
  const { reads } = context;
  return withDelegationPreamble(storableText(message), {
    detail: context.callee.delegation_context,
    caller: { name: context.caller.name, description: context.caller.description },
    chain: context.chain,
    callee: context.callee.name,
    rootMessage: reads.rootMessage,
    taskContextLimit: context.taskContextLimit,
    ...(reads.callerLatest === undefined ? {} : { callerLatest: reads.callerLatest }),
    hasEnvData: context.manifest.length > 0,
    contextEntries: context.contextKeys.map((key) => ({
      key,
      shortDescription:
        context.manifest.find((entry) => entry.key === key)?.shortDescription ??
        '(not stored: this key does not exist)',
    })),
    ...(context.fork === undefined ? {} : { fork: context.fork }),
  });
}
