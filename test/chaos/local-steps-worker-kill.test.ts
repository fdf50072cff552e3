/**
 * Crash exactness of local and batched steps, with one SIGKILL of the worker running four turns mid-step. A
 * `steps: local` root turn runs its model calls and tool runs inside its thread's workflow task, so when its worker is
 * SIGKILLed mid-turn the task times out and the next worker runs again every step since the last completed workflow
 * task; a `steps: batched` turn runs them in one local activity, which the next worker runs again from its first step.
 * Nothing may happen twice for that: a step whose reply was stored returns it without asking the model, a write finds
 * its operation id, and the `shell` command (side effects) is claimed once. Only the model call cut off by the kill is
 * asked again. Beside them, in each mode, a read-only user tool with `retries: 0` is cut off mid-run: the next worker's
 * local activity counts its attempts afresh, yet the tool is not run a second time. `baton worker` runs as a real
 * process with the tools module from `BATON_TOOLS`; the scripted model holds the third step's reply and the tool
 * hangs, so "mid-turn" is a state the test sets, not a moment it hopes for.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import type { SendMessageResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { readModelLog, requestStep, requestsPerStep as requestsOfSteps } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { afterOpening, dispatchOf, turnDispatches } from '../../testing/turn-dispatches';
import { useKillableWorkers } from '../../testing/worker-process';
import { settle, waitFor, type Settled } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-local-steps-kill-'));
const modelLog = path.join(workDir, 'model.jsonl');
/** The shell command's directory: the file it appends to holds one line per run. */
const shellDir = path.join(workDir, 'shell');
const RUNS_FILE = 'runs.txt';
const MODES = ['local', 'batched'] as const;
type Mode = (typeof MODES)[number];
for (const mode of MODES) fs.mkdirSync(path.join(shellDir, mode), { recursive: true });
const toolsFile = path.join(workDir, 'tools.mjs');
/** Each step mode's `probe` runs, one line each. */
const probesLog = (mode: Mode) => path.join(workDir, `probes-${mode}.log`);

/** `probe` is read-only and never retried; its first run in each mode hangs until its signal, a later one answers. */
const TOOLS_MODULE = `
import fs from 'node:fs';
import { z } from 'zod';
const hang = (signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, 120000);
  signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); });
});
export default [
  {
    name: 'probe',
    description: 'Reads a sensor, never retried.',
    parameters: z.object({ mode: z.string() }),
    retries: 0,
    run: async ({ mode }, ctx) => {
      const log = ${JSON.stringify(workDir)} + '/probes-' + mode + '.log';
      fs.appendFileSync(log, ctx.operationId + '\\n');
      if (fs.readFileSync(log, 'utf8').trim().split('\\n').length === 1) await hang(ctx.signal);
      return 'probed';
    },
  },
];
`;

const REPLY = 'Wrote it once, thought twice.';
/** The agent of each step mode: the same script, each its own shell directory. */
const AGENTS: Record<Mode, string> = { local: 'scribe', batched: 'batch-scribe' };
const PROBERS: Record<Mode, string> = { local: 'prober-local', batched: 'prober-batched' };
/** The third model call (after the shell ran) waits for this, so worker A dies while it is in flight. */
const holdOf = (mode: Mode) => `third-step-${mode}`;
const shellDirOf = (mode: Mode) => path.join(shellDir, mode);
const script = parseScript(
  `
agents:
${MODES.map(
  (mode) => `  ${AGENTS[mode]}:
    - { call: think, args: { thought: "first" } }
    - call: shell
      args: { command: "echo ran >> ${RUNS_FILE}" }
    - { call: think, args: { thought: "second" }, hold: ${holdOf(mode)} }
    - say: "${REPLY}"
  ${PROBERS[mode]}:
    - { call: probe, args: { mode: ${mode} } }
    - say: "Probed."
`,
).join('')}`,
  'local-steps-worker-kill',
);

/**
 * Two worker start-ups, the threads' 5 s workflow task timeout that notices the dead worker and a few quick model
 * calls: well under a minute on an idle machine. Every step waits on a state (a request logged, a process exited, a
 * reply), so the budget is only a backstop against a hang: generous, so that a loaded machine does not fail it.
 */
const TEST_TIMEOUT_MS = 300_000;
/**
 * Each scenario's checks after the kill: a turn that never ends fails its own scenario, not every one after it.
 */
const SCENARIO_TIMEOUT_MS = 120_000;

// Written before the workers start: they load it.
fs.writeFileSync(toolsFile, TOOLS_MODULE);
const workers = useKillableWorkers({
  name: 'chaos-local-steps-kill',
  dir: workDir,
  agents: Object.fromEntries(
    MODES.flatMap((mode) => [
      [
        `${AGENTS[mode]}.md`,
        `---\nname: ${AGENTS[mode]}\ndescription: Thinks, writes a line with the shell, thinks again.\n` +
          `capabilities: [shell]\nsteps: ${mode}\n---\nYou write once.\n`,
      ],
      [
        `${PROBERS[mode]}.md`,
        `---\nname: ${PROBERS[mode]}\ndescription: Probes once.\ncapabilities: [probe]\nsteps: ${mode}\n---\nYou probe.\n`,
      ],
    ]),
  ),
  script,
  modelLog,
  workerEnv: { BATON_TOOLS: toolsFile },
});

/** How many requests the model received for each step of the thread, by step. */
const requestsPerStep = (threadId: string) => requestsOfSteps(modelLog, threadId);

const lines = (file: string): string[] =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];
const shellRuns = (mode: Mode): string[] => lines(path.join(shellDirOf(mode), RUNS_FILE));

/**
 * What the thread's history shows of the turn (the Web UI's view) after the thread's opening (`afterOpening`): each
 * step a local activity marker with its summary, or (batched) one marker for the whole turn; and what worker B ran
 * again.
 */
const EXPECTED: Record<Mode, { dispatches: string[]; rerun: string }> = {
  local: {
    dispatches: [
      'local:beginTurn (turn 1: scribe starts, message from human)',
      'local:callModel (model: scribe step 1)',
      'local:runToolsThenCallModel (step: scribe runs think, then model step 2)',
      'local:runToolsThenCallModel (step: scribe runs shell, then model step 3)',
      'local:runToolsThenCallModel (step: scribe runs think, then model step 4)',
    ],
    rerun: 'runs shell, then model step 3',
  },
  // The turn's first batch runs in its `beginTurn`: here, all four steps.
  batched: {
    dispatches: ['local:beginTurn (turn 1: batch-scribe starts, message from human)'],
    rerun: 'beginTurn (turn 1: batch-scribe starts',
  },
};

/** The reply a turn sent, or its error thrown. */
async function replied(outcome: Promise<Settled<SendMessageResult>>): Promise<SendMessageResult> {
  const settled = await outcome;
  if (!settled.ok) throw settled.error;
  return settled.value;
}

/** A scribe's turn as worker A left it. */
interface Scribe {
  threadId: string;
  sending: Promise<Settled<SendMessageResult>>;
  /** The dispatches of the thread's history recorded in workflow tasks worker A completed. */
  recordedBeforeKill: string[];
}

test(
  'chaos: a worker SIGKILLed mid-turn under local and batched steps is replaced; no stored step asks the model again, the shell runs once, and a probe with retries: 0 is not run again',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool, model } = workers();
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const workerA = await workers().start('worker A');
    t.diagnostic(`worker A polling after ${elapsed()}`);
    assert.match(workerA.output(), /tools probe from .*tools\.mjs/, 'the ready line names the tool');
    const threads: ThreadHandle[] = [];
    const scribes = {} as Record<Mode, Scribe>;
    const probes = {} as Record<Mode, { threadId: string; sending: Promise<Settled<SendMessageResult>> }>;
    try {
      for (const mode of MODES) {
        const threadId = uniqueThreadId(`local-kill-${mode}`);
        // The shell works in its world's working_directory, and only there.
        const world = `local-kill-${threadId}`;
        // Under a budget, whose ledger must charge each stored reply once across the kill.
        await client.world(world).set({ working_directory: shellDirOf(mode), BATON_BUDGET_TOKENS: '10000000' });
        const thread = await client.startThread({ agent: AGENTS[mode], threadId, world });
        threads.push(thread);
        scribes[mode] = { threadId, sending: settle(thread.send('Write it down.')), recordedBeforeKill: [] };

        const probeId = uniqueThreadId(`probe-${mode}`);
        const prober = await client.startThread({ agent: PROBERS[mode], threadId: probeId });
        threads.push(prober);
        probes[mode] = { threadId: probeId, sending: settle(prober.send('Probe the sensor.')) };
      }
      for (const mode of MODES) {
        const { threadId } = scribes[mode];
        await waitFor(`the third model request (${mode}), held by the scripted model`, 60_000, () =>
          (requestsPerStep(threadId)[3] ?? 0) > 0 ? true : undefined,
        );
        // The call's start mark goes to Postgres beside its request, not before it: killed before the mark committed,
        // worker A would leave no start of the call's first attempt, which the run feed's check below counts.
        await waitFor(`the third call's start mark (${mode})`, 30_000, async () => {
          const { rows } = await pool.query(
            `SELECT 1 FROM run_events WHERE thread_id = $1 AND kind = 'model_call_started' AND (data->>'step')::int = 2`,
            [threadId],
          );
          return rows.length > 0 ? true : undefined;
        });
        await waitFor(`the probe running on worker A (${mode})`, 60_000, () =>
          lines(probesLog(mode)).length === 1 ? true : undefined,
        );
      }
      assert.deepEqual(await workerA.kill(), { code: null, signal: 'SIGKILL' }, 'worker A died by the signal');
      t.diagnostic(`worker A killed during both third model calls and both probes after ${elapsed()}`);

      for (const mode of MODES) {
        const scribe = scribes[mode];
        // What worker A left: two steps' replies and both tool results stored, the shell run once, the third call cut.
        const before = await listMessages(pool, scribe.threadId);
        assert.deepEqual(
          before.map((message) => message.role),
          ['user', 'assistant', 'tool', 'assistant', 'tool'],
          `the first two steps and their tool results were stored before the kill (${mode})`,
        );
        assert.deepEqual(shellRuns(mode), ['ran'], `the shell command ran on worker A (${mode})`);
        assert.deepEqual(requestsPerStep(scribe.threadId), { 1: 1, 2: 1, 3: 1 });
        // Steps worker A had recorded in completed workflow tasks are replayed by worker B; the rest it runs again.
        scribe.recordedBeforeKill = turnDispatches(
          (await client.temporal.workflow.getHandle(`baton/${scribe.threadId}`).fetchHistory()).events ?? [],
        );
        model.release(holdOf(mode));
      }
      // Worker B runs the cut steps again in local activities of its own, whose attempt numbers start from 1 again.
      await workers().start('worker B');
      t.diagnostic(`worker B polling after ${elapsed()}`);

      for (const mode of MODES) {
        await t.test(
          `${mode} steps: no stored step asks the model again and the shell runs once`,
          { timeout: SCENARIO_TIMEOUT_MS },
          async (st) => {
            const { threadId, sending, recordedBeforeKill } = scribes[mode];
            // The turn begins and steps in its thread's workflow: its history is the thread's.
            const turnId = `baton/${threadId}`;
            const result = await replied(sending);
            st.diagnostic(`reply after ${elapsed()}`);
            assert.equal(result.status, 'completed');
            assert.equal(result.reply, REPLY);
            assert.equal(result.steps, 4);

            // The model: one request per step, but for the third, cut off by the kill and asked again by worker B. The
            // first two steps' replies were stored before the kill, so running them again asked the model nothing.
            assert.deepEqual(requestsPerStep(threadId), { 1: 1, 2: 1, 3: 2, 4: 1 });
            const third = readModelLog(modelLog).filter(
              (entry) => entry.thread === threadId && requestStep(entry) === 3,
            );
            assert.deepEqual(
              third[1]?.messages,
              third[0]?.messages,
              'the third call was asked again with the same transcript',
            );

            // The shell: claimed once, so worker B's run of its step found the result and started no command.
            assert.deepEqual(shellRuns(mode), ['ran'], 'the shell command ran exactly once');
            const { rows: claims } = await pool.query<{ tool: string; status: string }>(
              'SELECT tool, status FROM tool_runs WHERE thread_id = $1',
              [threadId],
            );
            assert.deepEqual(claims, [{ tool: 'shell', status: 'done' }]);

            // The transcript: no gap, nothing twice, each tool result right after the reply that asked for it.
            const transcript = await listMessages(pool, threadId);
            // The budget: charged each of the four stored replies once, though worker B ran steps again.
            const { rows: grants } = await pool.query<{ spent: string }>(
              `SELECT spent_tokens AS spent FROM budget_grants WHERE root_thread_id = $1 AND grant_id = ''`,
              [threadId],
            );
            const storedTokens = transcript.reduce((sum, message) => sum + (message.usage?.totalTokens ?? 0), 0);
            assert.ok(storedTokens > 0);
            assert.deepEqual(
              grants.map((grant) => Number(grant.spent)),
              [storedTokens],
              'the budget charged each stored reply once',
            );
            assert.deepEqual(
              transcript.map((message) => message.role),
              ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool', 'assistant'],
            );
            assert.deepEqual(
              transcript.map((message) => message.seq),
              transcript.map((_, index) => index + 1),
              'sequence numbers without a gap',
            );
            for (const [index, message] of transcript.entries()) {
              if (message.role !== 'tool') continue;
              const asked = transcript[index - 1]?.toolCalls ?? [];
              assert.deepEqual(
                asked.map((call) => call.id),
                [message.toolCallId],
                `result ${message.seq} follows the reply that asked for it`,
              );
              assert.doesNotMatch(message.content ?? '', /^Error:/, `result ${message.seq} is the tool's own`);
            }
            assert.deepEqual(
              transcript.flatMap((message) => message.toolCalls ?? []).map((call) => call.name),
              ['think', 'shell', 'think'],
            );
            assert.equal(transcript.at(-1)?.content, REPLY);
            // Every message written by one run of the thread, as its first turn, under the operation id of its step, once.
            const runIds = new Set(transcript.map((message) => message.operationId.split(':')[0]));
            assert.equal(runIds.size, 1, "one run of the thread's workflow wrote the transcript");
            assert.deepEqual(
              transcript.map((message) => message.operationId.split(':').slice(1).join(':')),
              ['in', 'model:0', 'tool:0:0', 'model:1', 'tool:1:0', 'model:2', 'tool:2:0', 'model:3'].map(
                (step) => `turn:1:${step}`,
              ),
            );

            // The run feed, by the turn's own step numbers: the third call started twice, once per worker, each attempt
            // its own stream (the replacement counts its attempts from 1 again; its random tag tells the streams apart).
            // The other steps started once: worker B found their replies stored before it reached the model.
            const { rows: starts } = await pool.query<{ step: number; stream: string }>(
              `SELECT (data->>'step')::int + 1 AS step, data->>'stream' AS stream
               FROM run_events WHERE thread_id = $1 AND kind = 'model_call_started' ORDER BY seq`,
              [threadId],
            );
            assert.deepEqual(
              starts.map((start) => start.step),
              [1, 2, 3, 3, 4],
              `model calls started: ${JSON.stringify(starts)}`,
            );
            assert.notEqual(starts[2]?.stream, starts[3]?.stream, 'the two attempts of the third call stream apart');

            // The thread's history (the Web UI's view): after its opening, every step a local activity marker with
            // its summary, once (the answer's model call also records the turn completed); no turn workflow and no
            // activity scheduled on the server for the turn; and the kill seen as a workflow task that timed out.
            const events = (await client.temporal.workflow.getHandle(turnId).fetchHistory()).events ?? [];
            const all = turnDispatches(events);
            assert.deepEqual(afterOpening(all, threadId), EXPECTED[mode].dispatches);
            assert.ok(
              !events.some(
                (event) =>
                  event.startChildWorkflowExecutionInitiatedEventAttributes ||
                  event.activityTaskScheduledEventAttributes,
              ),
              'no workflow was started and no activity scheduled on the server',
            );
            const timedOut = events.findIndex((event) => event.workflowTaskTimedOutEventAttributes);
            assert.ok(timedOut >= 0, 'the workflow task held by worker A timed out');
            const recordedByA = events.slice(0, timedOut).flatMap((event) => dispatchOf(event) ?? []);
            assert.deepEqual(recordedByA, recordedBeforeKill, 'worker A recorded nothing after it died');
            // What worker B ran again: the steps after those worker A recorded (local), or the batch it was in (batched:
            // the turn's beginning, which ran it).
            const rerun = mode === 'local' ? all.slice(recordedByA.length, -1) : all.slice(recordedByA.length);
            st.diagnostic(`recorded by worker A before the kill: ${recordedByA.join('; ') || 'nothing'}`);
            st.diagnostic(`run again by worker B: ${rerun.join('; ')}`);
            assert.ok(
              rerun.some((dispatch) => dispatch.includes(EXPECTED[mode].rerun)),
              'worker B ran the step cut off by the kill again',
            );
          },
        );
      }

      for (const mode of MODES) {
        await t.test(
          `${mode} steps: a read-only tool with retries: 0 cut off mid-run is not run again`,
          { timeout: SCENARIO_TIMEOUT_MS },
          async () => {
            const { threadId, sending } = probes[mode];
            assert.equal((await replied(sending)).reply, 'Probed.');
            const transcript = await listMessages(pool, threadId);
            const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
            const [probe] = transcript.flatMap((m) => (m.toolCalls ?? []).map((call) => resultOf.get(call.id)));
            assert.equal(
              probe,
              "Error: tool 'probe' did not finish in 1 attempt (the worker running the last one stopped). It was not run again.",
            );
            assert.equal(lines(probesLog(mode)).length, 1, 'the probe ran once, as its retries: 0 allow');
            const { rows } = await pool.query<{ attempts: number }>(
              'SELECT attempts FROM tool_attempts WHERE root_thread_id = $1',
              [threadId],
            );
            assert.deepEqual(rows, [{ attempts: 2 }], "worker B counted its start as the call's second");
          },
        );
      }
    } finally {
      await Promise.all(threads.map((thread) => thread.end()));
    }
  },
);
