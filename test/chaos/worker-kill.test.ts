/**
 * Workers SIGKILLed mid-activity, with everything that waits for a dead worker's heartbeat to time out in flight at
 * once, so the test waits out the 20 s (model calls) and 30 s (tool calls) heartbeat timeouts once for all of it. Two
 * `baton worker` processes die at the same moment, each by one SIGKILL: whether model replies are streamed is a
 * worker's setting, so a whole reply needs a worker of its own.
 *
 * - The streamed worker (`BATON_MODEL_STREAM=on`, users' tools from `BATON_TOOLS`, two MCP servers from
 *   `BATON_MCP_CONFIG`, as in production) dies with a model reply streaming (its text out, its end held), a tool with
 *   side effects and a read-only one running, and a read-only MCP call and one with side effects running.
 * - The plain worker dies with a model call waiting for its answer, a fork whose three tasks' model calls wait for
 *   theirs, and a turn waiting on its `wait` timer.
 *
 * Then each is checked as the test of its own once was: the streamed reply's readers are told the first stream is
 * abandoned and get the new one whole, stored once; a side-effect tool (a user's or an MCP server's) is never run a
 * second time and the model is told its outcome is unknown, while a read-only one runs again; the model call is
 * retried by Temporal (heartbeat timeout) and its reply stored once; every fork task's write is stored once; the wait
 * ends on its timer, once. The scripted model holds the replies, so "mid-call" is a state the test sets, not a moment
 * it hopes for.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { decodeTimeoutType } from '@temporalio/common';
import type { RunDeltaEvent, RunEvent, ThreadEvents, ThreadHandle } from '../../client';
import type { SendMessageResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { readModelLog, type ModelLogEntry } from '../../testing/harness';
import { stdioServerEntry, writeMcpConfig } from '../../testing/mcp-reference-servers';
import { validateScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { useKillableWorkers } from '../../testing/worker-process';
import { settle, waitFor, type Settled } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-worker-kill-'));
const streamedLog = path.join(workDir, 'streamed-model.jsonl');
const plainLog = path.join(workDir, 'plain-model.jsonl');

// --- The streamed worker's turns.

/** Forty words, a chunk each: the text goes out (`hold` released), then the reply's end waits (`hold_end`). */
const STREAM_REPLY = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

const toolsFile = path.join(workDir, 'tools.mjs');
const chargesLog = path.join(workDir, 'charges.log');
const ratesLog = path.join(workDir, 'rates.log');
/**
 * `charge` has side effects: it logs its run, then takes long enough to be killed mid-run. `fetch_rates` is
 * read-only: its first run hangs the same way, a later one answers at once. Both honour their signal.
 */
const TOOLS_MODULE = `
import fs from 'node:fs';
import { z } from 'zod';
const hang = (signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, 120000);
  signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); });
});
export default [
  {
    name: 'charge',
    description: 'Charges a card.',
    parameters: z.object({ cents: z.int().min(1) }),
    sideEffects: true,
    run: async ({ cents }, ctx) => {
      fs.appendFileSync(${JSON.stringify(chargesLog)}, ctx.operationId + ' ' + cents + '\\n');
      await hang(ctx.signal);
      return 'charged ' + cents;
    },
  },
  {
    name: 'fetch_rates',
    description: 'Reads exchange rates.',
    parameters: z.object({}),
    run: async (_args, ctx) => {
      fs.appendFileSync(${JSON.stringify(ratesLog)}, ctx.operationId + '\\n');
      if (fs.readFileSync(${JSON.stringify(ratesLog)}, 'utf8').trim().split('\\n').length === 1) await hang(ctx.signal);
      return 'EUR/USD 1.10';
    },
  },
];
`;

/** The same MCP server twice: as its hints say (the operation is read-only), and with every tool counted as a write. */
const READS = 'everything';
const WRITES = 'everything-writes';
const OPERATION = 'trigger-long-running-operation';
/** Long enough to be killed mid-call after it was seen running; each step reports progress. */
const DURATION_S = 20;
const COMPLETED = `Long running operation completed. Duration: ${DURATION_S} seconds, Steps: ${DURATION_S}.`;
const mcpConfig = writeMcpConfig(path.join(workDir, 'mcp.json'), {
  [READS]: stdioServerEntry('everything'),
  [WRITES]: stdioServerEntry('everything', ['stdio'], { readOnly: 'none' }),
});

const streamedScript = validateScript(
  {
    agents: {
      streamer: [{ say: STREAM_REPLY, chunk_delay_ms: 5, hold: 'text', hold_end: 'end' }],
      buyer: [
        {
          calls: [
            { call: 'charge', args: { cents: 500 } },
            { call: 'fetch_rates', args: {} },
          ],
        },
        { say: 'Checked what happened.' },
      ],
      operator: [
        {
          calls: [
            { call: `${READS}__${OPERATION}`, args: { duration: DURATION_S, steps: DURATION_S } },
            { call: `${WRITES}__${OPERATION}`, args: { duration: DURATION_S, steps: DURATION_S } },
          ],
        },
        { say: 'Checked both operations.' },
      ],
    },
  },
  'worker-kill (streamed)',
);

// --- The plain worker's turns.

const SURVIVOR_REPLY = 'Survived the crash.';
const TASKS = 3;
/** The kill comes a few seconds into the wait; the timer fires whether or not a worker is up. */
const WAIT_SECONDS = 20;
const WAIT_REPLY = 'Still here after the wait.';
const plainScript = validateScript(
  {
    agents: {
      survivor: [{ say: SURVIVOR_REPLY, hold: 'survivor' }],
      fanner: [
        {
          call: 'fork_join',
          args: {
            deadline_seconds: 300,
            tasks: Array.from({ length: TASKS }, (_, i) => ({ agent: 'prober', message: `Probe ${i + 1}.` })),
          },
        },
        { say: 'fanned' },
      ],
      prober: [
        {
          call: 'store_env_data',
          args: { key: 'probe', short_description: 'What the probe found.', value: { ok: true } },
          hold: 'probes',
        },
        { say: 'probed' },
      ],
      patient: [{ call: 'wait', args: { seconds: WAIT_SECONDS, reason: 'outlive the worker' } }, { say: WAIT_REPLY }],
    },
  },
  'worker-kill (plain)',
);

/**
 * Four worker start-ups, the turns brought to where they are killed, the 30 s heartbeat timeout that notices the dead
 * tool calls and the MCP operation run again (20 s): under a minute and a half on an idle machine. Every step waits on
 * an event, so the budget is only a backstop against a hang: generous, so that a loaded machine does not fail it.
 */
const TEST_TIMEOUT_MS = 300_000;
/**
 * Each scenario's checks after the kill: a turn that never ends fails its own scenario, not every one after it.
 */
const SCENARIO_TIMEOUT_MS = 120_000;

// Written before the workers start: they load it.
fs.writeFileSync(toolsFile, TOOLS_MODULE);
const streamed = useKillableWorkers({
  name: 'chaos-kill-streamed',
  dir: path.join(workDir, 'streamed'),
  agents: {
    'streamer.md':
      '---\nname: streamer\ndescription: Streams slowly, so its worker can be killed mid-stream.\n---\nStream.\n',
    'buyer.md':
      '---\nname: buyer\ndescription: Charges and checks rates.\ncapabilities: [charge, fetch_rates]\n---\nYou buy.\n',
    'operator.md':
      '---\nname: operator\ndescription: Runs long operations.\n' +
      `capabilities: [mcp:${READS}, ${WRITES}__${OPERATION}]\n---\nYou operate.\n`,
  },
  script: streamedScript,
  modelLog: streamedLog,
  workerEnv: { BATON_MODEL_STREAM: 'on', BATON_TOOLS: toolsFile, BATON_MCP_CONFIG: mcpConfig },
});
const plain = useKillableWorkers({
  name: 'chaos-kill-plain',
  dir: path.join(workDir, 'plain'),
  agents: {
    'survivor.md':
      '---\nname: survivor\ndescription: Answers slowly, so its worker can be killed mid-call.\n---\nYou survive.\n',
    'fanner.md':
      '---\nname: fanner\ndescription: Fans probes out.\ncapabilities: [fork_join, prober]\n---\nYou fan out.\n',
    'prober.md': '---\nname: prober\ndescription: Probes.\n---\nYou probe.\n',
    'patient.md': '---\nname: patient\ndescription: Waits, so its worker can be killed meanwhile.\n---\nYou wait.\n',
  },
  script: plainScript,
  modelLog: plainLog,
});

/** A reader of the feed taking events in the background until `stop()`, which ends it after what has committed. */
function follow(events: ThreadEvents): { events: ThreadEvents; seen: RunEvent[]; stop(): Promise<RunEvent[]> } {
  const seen: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of events) seen.push(event);
  })();
  return {
    events,
    seen,
    async stop() {
      await events.catchUp();
      await events.finish();
      await reading;
      return seen;
    },
  };
}

const deltasOf = (seen: readonly RunEvent[], stream: string): RunDeltaEvent[] =>
  seen.filter((event): event is RunDeltaEvent => event.type === 'delta' && event.stream === stream);
const joined = (seen: readonly RunEvent[], stream: string): string =>
  deltasOf(seen, stream)
    .map((delta) => delta.text ?? '')
    .join('');

const lines = (file: string) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];

/** The live children of a process (its stdio MCP servers, for a worker). */
function childrenOf(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .split(' ')
      .filter((field) => field.trim() !== '')
      .map(Number);
  } catch {
    return [];
  }
}

/** Whether a process runs (a zombie left for its new parent to reap does not). */
function isRunning(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The reply a turn sent, or its error thrown. */
async function replied(outcome: Promise<Settled<SendMessageResult>>): Promise<SendMessageResult> {
  const settled = await outcome;
  if (!settled.ok) throw settled.error;
  return settled.value;
}

test(
  'chaos: workers SIGKILLed mid-stream, mid-tool, mid-MCP-call, mid-model-call, mid-fork and mid-wait: each is replaced and nothing runs twice that must not',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client: streamedClient, pool } = streamed();
    const { client: plainClient } = plain();
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const [streamedA, plainA] = await Promise.all([
      streamed().start('streamed worker A'),
      plain().start('plain worker A'),
    ]);
    t.diagnostic(`workers A polling after ${elapsed()}`);
    assert.match(streamedA.output(), /tools charge, fetch_rates from .*tools\.mjs/, 'the ready line names the tools');
    assert.match(
      streamedA.output(),
      new RegExp(`MCP servers ${READS} \\(\\d+ tools\\), ${WRITES} \\(\\d+ tools\\)`),
      'the ready line names both servers',
    );
    const mcpServers = childrenOf(streamedA.child.pid ?? 0);
    assert.equal(mcpServers.length, 2, 'worker A runs one stdio server per configuration entry');

    const ids = {
      streamer: uniqueThreadId('stream-kill'),
      buyer: uniqueThreadId('user-tool-kill'),
      operator: uniqueThreadId('mcp-kill'),
      survivor: uniqueThreadId('worker-kill'),
      fanner: uniqueThreadId('fork-kill'),
      patient: uniqueThreadId('wait-kill'),
    };
    const threads: ThreadHandle[] = [];
    const begin = async (client: typeof streamedClient, agent: keyof typeof ids): Promise<ThreadHandle> => {
      const thread = await client.startThread({ agent, threadId: ids[agent] });
      threads.push(thread);
      return thread;
    };
    try {
      // First the turns that wait where the test holds them, for as long as it takes.
      const streamer = await begin(streamedClient, 'streamer');
      const early = follow(streamer.events());
      const streaming = settle(streamer.send('Stream slowly.'));
      const buying = settle((await begin(streamedClient, 'buyer')).send('Pay and check the rate.'));
      const surviving = settle((await begin(plainClient, 'survivor')).send('Keep going'));
      const fanner = await begin(plainClient, 'fanner');
      const fanning = settle(fanner.send('Probe everything.'));

      // The streamed call's first attempt has started (its request waits at the model); a second reader joins after
      // that start. The text streams to both; the reply's end is held, so the kill lands mid-stream.
      const first = await waitFor('the first attempt of the streamed call to start', 60_000, () =>
        early.seen.find((event) => event.type === 'model_call_started'),
      );
      assert.ok(first.type === 'model_call_started');
      const late = follow(streamer.events({ since: first.seq }));
      await late.events.catchUp();
      streamed().model.release('text');
      await waitFor('the text of the first attempt to reach both readers', 60_000, () =>
        [early, late].every((reader) => joined(reader.seen, first.stream) === STREAM_REPLY) ? true : undefined,
      );
      await waitFor('both user tools running on worker A', 60_000, () =>
        lines(chargesLog).length === 1 && lines(ratesLog).length === 1 ? true : undefined,
      );
      await waitFor('the plain model request of the first attempt', 60_000, () =>
        readModelLog(plainLog).some((request) => request.thread === ids.survivor) ? true : undefined,
      );
      await waitFor('every fork task model call in flight', 60_000, () =>
        readModelLog(plainLog).filter(
          (request) => request.headers['x-baton-root-thread'] === ids.fanner && request.agent === 'prober',
        ).length >= TASKS
          ? true
          : undefined,
      );

      // Then the two that end by themselves (the MCP operation after 20 s, the wait on its 20 s timer): the kill
      // comes a few seconds into both.
      const operator = await begin(streamedClient, 'operator');
      const operatorTurn = streamedClient.temporal.workflow.getHandle(`${operator.workflowId}/turn-1`);
      const operating = settle(operator.send('Run both operations.'));
      const patient = await begin(plainClient, 'patient');
      const waitingTurn = settle(patient.send('Wait a little.'));
      // The MCP write's run is claimed just before its call is sent (the read's is sent beside it), and a heartbeat
      // of the running calls reached Temporal: both are under way on worker A.
      await waitFor('the side-effect MCP call claimed', 60_000, async () => {
        const { rows } = await pool.query('SELECT 1 FROM tool_runs WHERE root_thread_id = $1', [ids.operator]);
        return rows.length === 1 ? true : undefined;
      });
      await waitFor('a heartbeat of the running MCP calls', 30_000, async () => {
        const { raw } = await operatorTurn.describe();
        return (raw.pendingActivities ?? []).some((activity) => activity.lastHeartbeatTime) ? true : undefined;
      });
      const waiting = await waitFor('the wait to start', 60_000, async () => (await patient.status()).waits?.[0]);
      assert.equal(waiting.reason, 'outlive the worker');

      const exits = await Promise.all([streamedA.kill(), plainA.kill()]);
      t.diagnostic(`workers A killed after ${elapsed()}`);
      assert.deepEqual(
        exits,
        [
          { code: null, signal: 'SIGKILL' },
          { code: null, signal: 'SIGKILL' },
        ],
        'both workers died by the signal, not on their own',
      );
      const roles = async (threadId: string) => (await listMessages(pool, threadId)).map((message) => message.role);
      assert.deepEqual(await roles(ids.streamer), ['user'], 'no streamed reply was stored before the kill');
      assert.deepEqual(await roles(ids.survivor), ['user'], 'no reply was stored before the kill');
      assert.deepEqual(await roles(ids.patient), ['user', 'assistant'], 'the wait had not ended when the worker died');

      // The retried attempts are answered at once; the streamed one streams its text again and is let finish.
      streamed().model.release('end');
      plain().model.release('survivor');
      plain().model.release('probes');
      await Promise.all([streamed().start('streamed worker B'), plain().start('plain worker B')]);
      t.diagnostic(`workers B polling after ${elapsed()}`);

      await t.test(
        'a model reply streaming: an abandoned stream, a new one, and one complete stored reply',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          const threadId = ids.streamer;
          assert.equal((await replied(streaming)).reply, STREAM_REPLY);
          for (const [name, reader] of [
            ['the reader from the start', early],
            ['the reader that joined after the first start', late],
          ] as const) {
            const seen = await reader.stop();
            // Two attempts of one model call, each with a stream of its own.
            const starts = seen.filter((event) => event.type === 'model_call_started');
            const second = starts.at(-1);
            assert.ok(second?.type === 'model_call_started', name);
            assert.equal(second.attempt, 2, name);
            assert.equal(second.operationId, first.operationId, `${name}: the same call, retried`);
            assert.notEqual(second.stream, first.stream, name);
            assert.ok(second.streaming, name);

            // The reader is told to drop the first stream, just before the second starts, and sees nothing of it after.
            const abandoned = seen.filter((event) => event.type === 'stream_abandoned');
            assert.deepEqual(
              abandoned,
              [{ type: 'stream_abandoned', threadId, stream: first.stream, reason: 'retried' }],
              name,
            );
            const abandonedAt = seen.indexOf(abandoned[0] as RunEvent);
            assert.equal(seen[abandonedAt + 1], second, `${name}: told when the retried attempt starts`);
            assert.deepEqual(deltasOf(seen.slice(abandonedAt), first.stream), [], `${name}: nothing of it after`);

            // Each stream was shown whole, numbered from 0 with no gap; the second one before the stored reply.
            for (const stream of [first.stream, second.stream]) {
              const parts = deltasOf(seen, stream).map((delta) => delta.part);
              assert.deepEqual(
                parts,
                parts.map((_, i) => i),
                `${name}: the parts of ${stream}`,
              );
              assert.equal(joined(seen, stream), STREAM_REPLY, `${name}: the text of ${stream}`);
            }
            assert.ok(deltasOf(seen, second.stream).every((delta) => delta.attempt === 2));
            const endedAt = seen.findIndex((event) => event.type === 'model_call_ended');
            assert.ok(seen.lastIndexOf(deltasOf(seen, second.stream).at(-1) as RunEvent) < endedAt, name);

            // The stored reply is told once, whole.
            assert.deepEqual(
              seen.flatMap((event) => (event.type === 'assistant_message' ? [event.content] : [])),
              [STREAM_REPLY],
              name,
            );
            assert.equal(seen.filter((event) => event.type === 'model_call_ended').length, 1, name);
          }
          // Stored once, whole.
          const transcript = await listMessages(pool, threadId);
          assert.deepEqual(
            transcript.map((message) => [message.role, message.content]),
            [
              ['user', 'Stream slowly.'],
              ['assistant', STREAM_REPLY],
            ],
          );
          assert.equal(readModelLog(streamedLog).filter((request) => request.thread === threadId).length, 2);
        },
      );

      await t.test(
        'user tools: a read-only one runs again, a side-effect one never, and the model is told',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          assert.equal((await replied(buying)).reply, 'Checked what happened.');
          const transcript = await listMessages(pool, ids.buyer);
          const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
          const [charge, rates] = transcript.flatMap((m) => (m.toolCalls ?? []).map((call) => resultOf.get(call.id)));
          assert.match(
            charge ?? '',
            /^Error: an earlier attempt of this 'charge' call started at .+ and ended without recording its result \(its worker stopped\)\. It was not run again, so it may or may not have taken effect: check before calling it again\.$/,
          );
          assert.equal(lines(chargesLog).length, 1, 'the card was charged at most once');
          assert.equal(rates, 'EUR/USD 1.10', 'the read-only tool ran again and answered');
          const runs = lines(ratesLog);
          assert.equal(runs.length, 2);
          assert.equal(runs[0], runs[1], 'both runs carried the same operation id');
        },
      );

      await t.test(
        'MCP tools: a read-only call is made again, a side-effect one never, and the model is told',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          assert.equal((await replied(operating)).reply, 'Checked both operations.');
          const transcript = await listMessages(pool, ids.operator);
          const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
          const calls = transcript.flatMap((message) => message.toolCalls ?? []);
          assert.deepEqual(
            calls.map((call) => call.name),
            [`${READS}__${OPERATION}`, `${WRITES}__${OPERATION}`],
          );
          const [read, write] = calls.map((call) => resultOf.get(call.id));
          assert.equal(read, COMPLETED, 'the read-only call was made again on worker B and completed');
          assert.match(
            write ?? '',
            new RegExp(
              `^Error: an earlier attempt of this '${WRITES}__${OPERATION}' call started at .+ and ended without recording ` +
                'its result \\(its worker stopped\\)\\. It was not run again, so it may or may not have taken effect: ' +
                'check before calling it again\\.$',
            ),
          );
          // One claim of the write, never finished: the run worker A started is the only one there was.
          const { rows: runs } = await pool.query<{ tool: string; status: string }>(
            'SELECT tool, status FROM tool_runs WHERE root_thread_id = $1',
            [ids.operator],
          );
          assert.deepEqual(runs, [{ tool: `${WRITES}__${OPERATION}`, status: 'running' }]);
          // The activity running the calls completed on a later attempt than the one worker A died in.
          const history = await operatorTurn.fetchHistory();
          const attempts = (history.events ?? []).flatMap(
            (event) => event.activityTaskStartedEventAttributes?.attempt ?? [],
          );
          assert.ok(
            attempts.some((attempt) => attempt >= 2),
            `an activity was retried (attempts ${attempts.join(',')})`,
          );
          // The killed worker's stdio servers read end-of-file on stdin and stop: none outlives its worker for long.
          await waitFor('worker A stdio servers to exit', 60_000, () =>
            mcpServers.every((pid) => !isRunning(pid)) ? true : undefined,
          );
        },
      );

      await t.test(
        'a model call: retried by Temporal on the heartbeat timeout, its reply stored once',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          const threadId = ids.survivor;
          const result = await replied(surviving);
          assert.equal(result.status, 'completed');
          assert.equal(result.reply, SURVIVOR_REPLY);
          assert.equal(result.turn, 1);
          const transcript = await listMessages(pool, threadId);
          assert.deepEqual(
            transcript.map((m) => [m.seq, m.role, m.content]),
            [
              [1, 'user', 'Keep going'],
              [2, 'assistant', SURVIVOR_REPLY],
            ],
          );

          // The first request was cut off by the kill (its connection dropped, so the model never answered it);
          // the retry on worker B saw the same transcript and was answered.
          const requests: ModelLogEntry[] = readModelLog(plainLog).filter((request) => request.thread === threadId);
          assert.equal(requests.length, 2, 'one request per attempt');
          const [firstRequest, secondRequest] = requests;
          assert.deepEqual(secondRequest?.messages, firstRequest?.messages, 'the retried call saw the same transcript');
          assert.deepEqual(
            firstRequest?.messages.map((m) => m.role),
            ['system', 'user'],
          );
          assert.ok(firstRequest?.messages[0]?.content?.startsWith('You survive.\n\n## System Context'));
          assert.equal(firstRequest?.messages[1]?.content, 'Keep going');

          // Temporal retried the same activity (attempt 2) because worker A stopped heartbeating, rather than the
          // workflow scheduling a second model call.
          const history = await plainClient.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
          const events = history.events ?? [];
          const modelCalls = events.filter(
            (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel',
          );
          assert.equal(modelCalls.length, 1, 'the workflow scheduled one model call');
          const retried = events.find(
            (event) =>
              event.activityTaskStartedEventAttributes &&
              Number(event.activityTaskStartedEventAttributes.scheduledEventId) === Number(modelCalls[0]?.eventId),
          )?.activityTaskStartedEventAttributes;
          assert.equal(retried?.attempt, 2);
          assert.equal(decodeTimeoutType(retried?.lastFailure?.timeoutFailureInfo?.timeoutType), 'HEARTBEAT');
        },
      );

      await t.test(
        'a fork: it completes and every write of its tasks is stored once',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          const root = ids.fanner;
          assert.equal((await replied(fanning)).reply, 'fanned');
          const [fork] = await fanner.forks();
          assert.equal(fork?.status, 'success');
          assert.deepEqual(
            fork?.tasks.map((task) => task.status),
            Array.from({ length: TASKS }, () => 'success'),
          );
          // Every task's finding merged once under its prefix; no operation wrote twice.
          assert.deepEqual(
            (await fanner.envData()).map((entry) => [entry.key, entry.version]),
            Array.from({ length: TASKS }, (_, i) => [`fork/1/${i + 1}/probe`, 1]),
          );
          const { rows: stored } = await pool.query<{ key: string; scope: string; n: number }>(
            `SELECT key, scope, COUNT(*)::int AS n FROM env_events WHERE root_thread_id = $1 AND action = 'stored'
            GROUP BY key, scope ORDER BY scope, key`,
            [root],
          );
          assert.equal(stored.length, TASKS * 2, 'each probe stored once in its own store and merged once');
          assert.ok(stored.every((row) => row.n === 1));
          // Each task's transcript holds one reply per step, although its first model call ran twice.
          for (const task of fork?.tasks ?? []) {
            const taskRoles = (await listMessages(pool, task.threadId)).map((m) => m.role);
            assert.deepEqual(taskRoles, ['user', 'assistant', 'tool', 'assistant'], task.threadId);
          }
          const { rows: refused } = await pool.query('SELECT 1 FROM refused_writes WHERE root_thread_id = $1', [root]);
          assert.equal(refused.length, 0, 'no task was reclaimed: the deadline was never reached');
        },
      );

      await t.test(
        'a wait: the new worker takes the turn over and the wait ends on its timer, once',
        { timeout: SCENARIO_TIMEOUT_MS },
        async () => {
          const threadId = ids.patient;
          assert.equal((await replied(waitingTurn)).reply, WAIT_REPLY);
          const transcript = await listMessages(pool, threadId);
          assert.deepEqual(
            transcript.map((m) => m.role),
            ['user', 'assistant', 'tool', 'assistant'],
          );
          const result = transcript[2]?.content ?? '';
          const match = new RegExp(
            `^Waited (\\d+) seconds, until ${waiting.until.replace(/[.]/g, '\\.')}, as planned \\(outlive the worker\\)\\.$`,
          ).exec(result);
          assert.ok(match, result);
          assert.ok(Number(match[1]) >= WAIT_SECONDS, result);
          // One timer, fired once: the new worker picked the turn up from its history instead of starting it over.
          const events =
            (await plainClient.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory()).events ?? [];
          assert.equal(events.filter((e) => e.timerStartedEventAttributes).length, 1);
          assert.equal(events.filter((e) => e.timerFiredEventAttributes).length, 1);
          assert.equal(
            events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel').length,
            2,
          );
          assert.deepEqual((await patient.status()).waits, []);
        },
      );
      t.diagnostic(`every turn checked after ${elapsed()}`);
    } finally {
      await Promise.all(threads.map((thread) => thread.end()));
    }
  },
);
