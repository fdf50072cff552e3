/**
 * A fork task stepping in its fork's workflow leaves it once the server suggests that workflow continue as new, so
 * many tasks' steps never push one history towards Temporal's limit: the task goes on in a `forkTaskTurnWorkflow`
 * from its last reply, and its transcript holds every step once. Run on a Temporal server of its own whose suggestion
 * comes after a few events (`limit.historyCount.suggestContinueAsNew`), where the default is 4,096.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentTurnInput } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTemporal } from '../../stack/temporal-server';
import { skipUnlessCi } from '../../testing/ci';
import { startAgentHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

/** Events after which the server suggests continuing as new: the lead's turn passes it before its fork's tasks step. */
const SUGGEST_AFTER_EVENTS = 12;
/** The task's think steps before its answer. */
const THINK_STEPS = 6;

const agents: AgentRegistry = new Map(
  [
    '---\nname: bound_lead\ndescription: Forks.\ncapabilities: [fork_join, bound_task]\n---\nYou fork.\n',
    '---\nname: bound_task\ndescription: Thinks in steps.\n---\nYou think.\n',
  ].map((text) => {
    const agent = parseAgentFile(text, 'fork-history-bound');
    return [agent.name, agent];
  }),
);

const script = parseScript(
  `
agents:
  bound_lead:
    - call: fork_join
      args: { tasks: [ { agent: bound_task, message: "Think it through." } ] }
    - say: "bound done"
  bound_task:
${Array.from(
  { length: THINK_STEPS },
  (_, i) => `    - call: think\n      args: { thought: "thought ${i + 1}" }\n`,
).join('')}    - say: "thought through"
`,
  'fork-history-bound',
);

test("fork/join: a task stepping in the fork's workflow goes on in its own once the server suggests continuing as new", async (t) => {
  const env = readTestEnv();
  if (env.temporalCli === undefined) {
    skipUnlessCi(t, 'no local Temporal CLI to start a second server with');
    return;
  }
  const server = await startTemporal({
    resolution: { kind: 'cli', path: env.temporalCli, source: 'cache', attempts: [] },
    port: 0,
    ui: false,
    extraArgs: ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_AFTER_EVENTS}`],
  });
  let harness: AgentHarness | undefined;
  try {
    harness = await startAgentHarness({
      temporalAddress: server.address,
      databaseUrl: env.databaseUrl,
      taskQueue: uniqueTaskQueue('fork-history-bound'),
      workflowBundle: { codePath: env.workflowBundlePath },
      agents,
      script,
    });
    const root = uniqueThreadId('bound');
    const thread = await harness.client.startThread({ agent: 'bound_lead', threadId: root });
    assert.equal((await thread.send('Go.')).reply, 'bound done');

    const temporal = harness.client.temporal;
    const lead = await temporal.workflow.getHandle(`baton/${root}/turn-1`).fetchHistory();
    const leadSteps = (lead.events ?? []).flatMap((event) => {
      const data = event.activityTaskScheduledEventAttributes ? event.userMetadata?.summary?.data : undefined;
      const summary = data ? (JSON.parse(Buffer.from(data).toString('utf8')) as string) : '';
      return summary.includes('bound_task (fork 1 task 1)') ? [summary] : [];
    });
    // The task took its first step in the lead's turn, and the server's suggestion (past the lead's own events by
    // then) sent it on to a workflow of its own with that step's reply.
    assert.deepEqual(leadSteps, ['model: bound_task (fork 1 task 1) step 1']);
    const task = await temporal.workflow.getHandle(`baton/${root}/bound_task-1`).fetchHistory();
    const started = task.events?.[0]?.workflowExecutionStartedEventAttributes;
    assert.equal(started?.workflowType?.name, 'forkTaskTurnWorkflow');
    const input = JSON.parse(Buffer.from(started?.input?.payloads?.[0]?.data ?? []).toString('utf8')) as AgentTurnInput;
    assert.equal(input.begun?.progress?.step, 0, 'it went on from its first reply');

    const [row] = (
      await harness.pool.query<{ workflowId: string }>(
        'SELECT workflow_id AS "workflowId" FROM fork_tasks WHERE root_thread_id = $1',
        [root],
      )
    ).rows;
    assert.equal(row?.workflowId, `baton/${root}/bound_task-1`, 'the join records where it answered');
    // Every step's reply and tool result once, in order, on both sides of the hand-over.
    const transcript = await listMessages(harness.pool, `${root}/bound_task-1`);
    assert.deepEqual(
      transcript.map((m) => m.role),
      ['user', ...Array.from({ length: THINK_STEPS }, () => ['assistant', 'tool']).flat(), 'assistant'],
    );
    assert.deepEqual(
      transcript.flatMap((m) => m.toolCalls ?? []).map((call) => call.arguments),
      Array.from({ length: THINK_STEPS }, (_, i) => JSON.stringify({ thought: `thought ${i + 1}` })),
    );
    assert.equal(transcript.at(-1)?.content, 'thought through');
    await thread.end();
  } finally {
    await harness?.close();
    await server.stop();
  }
});
