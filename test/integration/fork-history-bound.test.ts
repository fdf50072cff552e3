/**
 * A turn stepping in another turn's workflow (a fork task in its fork's, a root turn with local steps in its thread's)
 * leaves it once the server suggests that workflow continue as new, so many steps never push one history towards
 * Temporal's limit: the turn goes on in a workflow of its own from its last reply, and its transcript holds every step
 * once. Run on a Temporal server of its own whose suggestion comes after a few events
 * (`limit.historyCount.suggestContinueAsNew`), where the default is 4,096.
 */
import assert from 'node:assert/strict';
import { after, before, test, type TestContext } from 'node:test';
import type { temporal } from '@temporalio/proto';
import type { AgentTurnInput } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { skipUnlessCi } from '../../testing/ci';
import { startAgentHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startOwnTemporal } from '../../testing/test-stack';
import { eventSummary, patchesOf } from '../../testing/turn-dispatches';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { STEPS_LEAVE_LONG_HISTORIES_PATCH } from '../../workflows/thread-turns';

/**
 * Events after which the server suggests continuing as new: the lead's turn passes it before its fork's task steps, and
 * a thread once its first workflow task has been renewed.
 */
const SUGGEST_AFTER_EVENTS = 5;
/** The task's think steps before its answer. */
const THINK_STEPS = 6;
/**
 * A local step longer than 80% of a thread's 5 s workflow task timeout, so the SDK renews the task while it runs and
 * the next one starts past the suggestion.
 */
const SLOW_STEP_MS = 5_000;

const agents: AgentRegistry = new Map(
  [
    '---\nname: bound_lead\ndescription: Forks.\ncapabilities: [fork_join, bound_task]\n---\nYou fork.\n',
    '---\nname: bound_task\ndescription: Thinks in steps.\n---\nYou think.\n',
    '---\nname: bound_local\ndescription: Thinks in local steps.\nsteps: local\n---\nYou think.\n',
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
  bound_local:
    - call: think
      args: { thought: "slowly" }
      delay_ms: ${SLOW_STEP_MS}
    - call: think
      args: { thought: "again" }
    - say: "thought locally"
`,
  'fork-history-bound',
);

const env = readTestEnv();
let server: Awaited<ReturnType<typeof startOwnTemporal>> | undefined;
let harness: AgentHarness | undefined;

before(async () => {
  if (env.temporalCli === undefined) return;
  server = await startOwnTemporal(env.temporalCli, [`limit.historyCount.suggestContinueAsNew=${SUGGEST_AFTER_EVENTS}`]);
  harness = await startAgentHarness({
    temporalAddress: server.address,
    databaseUrl: env.databaseUrl,
    taskQueue: uniqueTaskQueue('fork-history-bound'),
    workflowBundle: { codePath: env.workflowBundlePath },
    agents,
    script,
  });
});

after(async () => {
  await harness?.close();
  await server?.stop();
});

/** The harness on the second server, or `undefined` (the test skipped) where no local Temporal CLI can start one. */
function boundHarness(t: TestContext): AgentHarness | undefined {
  if (harness === undefined) skipUnlessCi(t, 'no local Temporal CLI to start a second server with');
  return harness;
}

/** The summaries `history` gives its activities (`activity: true`) or its local activity markers. */
function summaries(history: temporal.api.history.v1.IHistory, activity: boolean): string[] {
  return (history.events ?? []).flatMap((event) =>
    (activity ? event.activityTaskScheduledEventAttributes : event.markerRecordedEventAttributes)
      ? (eventSummary(event) ?? [])
      : [],
  );
}

/** The input a turn workflow was started with, and its type. */
async function turnStart(h: AgentHarness, workflowId: string): Promise<{ type?: string; input: AgentTurnInput }> {
  const history = await h.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const input = JSON.parse(Buffer.from(started?.input?.payloads?.[0]?.data ?? []).toString('utf8')) as AgentTurnInput;
  return { type: started?.workflowType?.name ?? undefined, input };
}

test("fork/join: a task stepping in the fork's workflow goes on in its own once the server suggests continuing as new", async (t) => {
  const h = boundHarness(t);
  if (h === undefined) return;
  const root = uniqueThreadId('bound');
  const thread = await h.client.startThread({ agent: 'bound_lead', threadId: root });
  assert.equal((await thread.send('Go.')).reply, 'bound done');

  const lead = await h.client.temporal.workflow.getHandle(`baton/${root}/turn-1`).fetchHistory();
  // The task took its first step in the lead's turn, and the server's suggestion (past the lead's own events by then)
  // sent it on to a workflow of its own with that step's reply.
  assert.deepEqual(
    summaries(lead, true).filter((summary) => summary.includes('bound_task (fork 1 task 1)')),
    ['model: bound_task (fork 1 task 1) step 1'],
  );
  assert.ok(
    patchesOf(lead.events ?? []).includes(STEPS_LEAVE_LONG_HISTORIES_PATCH),
    "the lead's history has the patch's marker",
  );
  const taskWorkflowId = `baton/${root}/bound_task-1`;
  const { type, input } = await turnStart(h, taskWorkflowId);
  assert.equal(type, 'forkTaskTurnWorkflow');
  assert.equal(input.begun?.progress?.step, 0, 'it went on from its first reply');
  const [row] = (
    await h.pool.query<{ workflowId: string }>(
      'SELECT workflow_id AS "workflowId" FROM fork_tasks WHERE root_thread_id = $1',
      [root],
    )
  ).rows;
  assert.equal(row?.workflowId, taskWorkflowId, 'the join records where it answered');
  // Every step's reply and tool result once, in order, on both sides of the hand-over.
  const transcript = await listMessages(h.pool, `${root}/bound_task-1`);
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
});

test("a root turn with local steps leaves its thread's workflow once the server suggests the thread continue as new", async (t) => {
  const h = boundHarness(t);
  if (h === undefined) return;
  const root = uniqueThreadId('bound-local');
  const thread = await h.client.startThread({ agent: 'bound_local', threadId: root });
  assert.equal((await thread.send('Go.')).reply, 'thought locally');

  // Its slow first step ran in the thread's first task, renewed while it ran; the renewed task came past the
  // suggestion, so the turn went on in its own workflow from that step's reply.
  // The thread continues as new once the server suggests it, so its runs are looked through.
  const threadSteps: string[] = [];
  const threadPatches: string[] = [];
  for await (const run of h.client.temporal.workflow.list({ query: `WorkflowId="baton/${root}"` })) {
    const history = await h.client.temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    threadSteps.push(...summaries(history, false).filter((summary) => summary.startsWith('model:')));
    threadPatches.push(...patchesOf(history.events ?? []));
  }
  assert.ok(threadPatches.includes(STEPS_LEAVE_LONG_HISTORIES_PATCH), "the thread's history has the patch's marker");
  assert.deepEqual(threadSteps, ['model: bound_local step 1'], 'the first step ran in the thread, and only it');
  const { type, input } = await turnStart(h, `baton/${root}/turn-1`);
  assert.equal(type, 'rootTurnWorkflow');
  assert.equal(input.begun?.progress?.step, 0, 'it went on from its first reply');
  const transcript = await listMessages(h.pool, root);
  assert.deepEqual(
    transcript.map((m) => m.role),
    ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'],
  );
  assert.equal(transcript.at(-1)?.content, 'thought locally');
  await thread.end();
});
