/**
 * MCP tools when the worker running them dies: a read-only tool's call is made again on the next worker, a tool
 * with side effects is never called a second time (the model is told its outcome is unknown). The tools come from
 * the published server-everything over stdio, started by `baton worker` from `BATON_MCP_CONFIG`, as in production.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ThreadHandle } from '../../client';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { stdioServerEntry, writeMcpConfig } from '../../testing/mcp-reference-servers';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { useKillableWorkers, type WorkerProcess } from '../../testing/worker-process';
import { settle, waitFor } from './waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'chaos-mcp-tools-'));

/** The same server twice: as its hints say (the operation is read-only), and with every tool counted as a write. */
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

const script = parseScript(
  `
agents:
  operator:
    - calls:
        - { call: ${READS}__${OPERATION}, args: { duration: ${DURATION_S}, steps: ${DURATION_S} } }
        - { call: ${WRITES}__${OPERATION}, args: { duration: ${DURATION_S}, steps: ${DURATION_S} } }
    - say: "Checked both operations."
`,
  'mcp-worker-kill',
);

/** Two worker start-ups, the 30 s heartbeat timeout that notices the dead worker, the retried call: a backstop. */
const TEST_TIMEOUT_MS = 300_000;

const workers = useKillableWorkers({
  name: 'chaos-mcp-tools',
  dir: workDir,
  agents: {
    'operator.md':
      '---\nname: operator\ndescription: Runs long operations.\n' +
      `capabilities: [mcp:${READS}, ${WRITES}__${OPERATION}]\n---\nYou operate.\n`,
  },
  script,
  workerEnv: { BATON_MCP_CONFIG: mcpConfig },
});

const startWorker = (name: string): Promise<WorkerProcess> => workers().start(name);

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

test(
  'chaos: a worker SIGKILLed mid-call calls a read-only MCP tool again, never a side-effect one, and says so',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    const { client, pool } = workers();
    const workerA = await startWorker('worker A');
    assert.match(
      workerA.output(),
      new RegExp(`MCP servers ${READS} \\(\\d+ tools\\), ${WRITES} \\(\\d+ tools\\)`),
      'the ready line names both servers',
    );
    const servers = childrenOf(workerA.child.pid ?? 0);
    assert.equal(servers.length, 2, 'worker A runs one stdio server per configuration entry');
    const threadId = uniqueThreadId('mcp-kill');
    let thread: ThreadHandle | undefined;
    try {
      thread = await client.startThread({ agent: 'operator', threadId });
      const turn = client.temporal.workflow.getHandle(`${thread.workflowId}/turn-1`);
      const sending = settle(thread.send('Run both operations.'));
      // The write's run is claimed just before its call is sent (the read's is sent beside it), and a heartbeat of
      // the running calls reached Temporal: both are under way on worker A.
      await waitFor('the side-effect call claimed', 60_000, async () => {
        const { rows } = await pool.query('SELECT 1 FROM tool_runs WHERE root_thread_id = $1', [threadId]);
        return rows.length === 1 ? true : undefined;
      });
      await waitFor('a heartbeat of the running calls', 30_000, async () => {
        const { raw } = await turn.describe();
        return (raw.pendingActivities ?? []).some((activity) => activity.lastHeartbeatTime) ? true : undefined;
      });
      assert.deepEqual(await workerA.kill(), { code: null, signal: 'SIGKILL' });
      t.diagnostic('worker A killed while both MCP calls ran');

      await startWorker('worker B');
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, 'Checked both operations.');

      const transcript = await listMessages(pool, threadId);
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
        [threadId],
      );
      assert.deepEqual(runs, [{ tool: `${WRITES}__${OPERATION}`, status: 'running' }]);
      // The activity running the calls completed on a later attempt than the one worker A died in.
      const history = await turn.fetchHistory();
      const attempts = (history.events ?? []).flatMap(
        (event) => event.activityTaskStartedEventAttributes?.attempt ?? [],
      );
      assert.ok(
        attempts.some((attempt) => attempt >= 2),
        `an activity was retried (attempts ${attempts.join(',')})`,
      );

      // The killed worker's stdio servers read end-of-file on stdin and stop: none outlives its worker for long.
      await waitFor('worker A stdio servers to exit', 60_000, () =>
        servers.every((pid) => !isRunning(pid)) ? true : undefined,
      );
    } finally {
      await thread?.end();
    }
  },
);
