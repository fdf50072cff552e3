import type { Pool } from 'pg';
import { withDelegationPreamble } from '../common/delegation-preamble';
import type { FinishTurnInput, OpenDelegationInput, OpenDelegationResult } from '../common/types';
import { markThread, openDelegation as openDelegationRow } from '../db/delegations';
import type { EnvStore } from '../db/env-data';
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
    // The preamble mentions env data only when the scope holds some, and lists the entries the caller pointed to.
    const manifest = await env.list(input.scope.rootThreadId);
    const contextEntries = input.contextKeys.map((key) => {
      const entry = manifest.find((candidate) => candidate.key === key);
      return { key, shortDescription: entry ? entry.shortDescription : '(not stored: this key does not exist)' };
    });
    try {
      const row = await openDelegationRow(pool, input.scope, input.operationId, {
        callee: input.callee,
        mode: input.mode,
        chain: [...input.chain, input.callee],
        callerMessageSeq: input.callerMessageSeq,
        buildMessage: (reads) =>
          // The message comes from a model's tool arguments: clean what Postgres cannot store instead of failing.
          withDelegationPreamble(storableText(input.message), {
            detail: calleeDefinition.delegation_context,
            caller: { name: caller.name, description: caller.description },
            chain: input.chain,
            callee: input.callee,
            rootMessage: reads.rootMessage,
            taskContextLimit: input.taskContextLimit,
            ...(reads.callerLatest === undefined ? {} : { callerLatest: reads.callerLatest }),
            hasEnvData: manifest.length > 0,
            contextEntries,
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

  return { openDelegation, finishTurn };
}
