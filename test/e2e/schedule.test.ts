/**
 * `baton schedule` as a user runs it, on the real dev server: a `baton dev` worker on the test stack, every command
 * with `--json`, and what each run did read back from Temporal and Postgres.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import YAML from 'yaml';
import { connect, type BatonClient } from '../../client';
import { runThreadId } from '../../common/schedules';
import { uniqueTaskQueue } from '../../testing/test-env';
import {
  baton,
  childEnv,
  describeRun,
  env,
  freshDir,
  parseJson,
  parseJsonArray,
  startDev,
  waitFor,
  type DevProcess,
} from './cli-process';

const REPORT = 'Nothing new since the last run.';
const AGENTS: Record<string, { description: string; script: unknown[] }> = {
  reporter: { description: 'Reports on a schedule.', script: [{ say: REPORT }] },
};

/** Run-wide unique schedule names: the Temporal server outlives this file. */
const uniqueName = (name: string) => `${name}-${randomBytes(3).toString('hex')}`;

interface Run {
  scheduledAt: string;
  workflowId: string;
  threadId?: string;
  status: string;
  result?: { threadId: string; turn: number; status: string; reply: string; createdThread: boolean };
  error?: string;
}
interface Details {
  name: string;
  paused: boolean;
  note?: string;
  skippedOverlap: number;
  runningWorkflowIds: string[];
  recentRuns: Run[];
  nextRuns: string[];
}

describe('baton schedule on the test stack', () => {
  const stateDir = freshDir('schedule-state');
  const agentsDir = freshDir('schedule-agents');
  let dev: DevProcess | undefined;
  let sdk: BatonClient | undefined;
  const db = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  const created: string[] = [];
  const cliEnv = childEnv();
  const cli = (...args: string[]) => baton(['--state-dir', stateDir, ...args], cliEnv);

  /** `baton schedule <args> --json`, which must succeed. */
  async function schedule(...args: string[]): Promise<Record<string, unknown>> {
    const result = await cli('schedule', ...args, '--json');
    assert.equal(result.code, 0, describeRun(result));
    return parseJson(result);
  }
  async function create(name: string, ...args: string[]): Promise<Details> {
    const details = await schedule('create', name, ...args);
    created.push(name);
    return details as unknown as Details;
  }
  const describeSchedule = async (name: string) => (await schedule('describe', name)) as unknown as Details;

  /**
   * Waits until the schedule's description satisfies `condition` (polled through the SDK, which the CLI is a thin
   * layer over: a process per poll would eat the file's time budget), then returns `baton schedule describe --json`.
   */
  async function waitForSchedule(name: string, what: string, condition: (details: Details) => boolean) {
    let last: Details | undefined;
    await waitFor(
      what,
      async () => {
        const polled = await sdk?.schedules.get(name).describe();
        last = polled;
        return polled !== undefined && condition(polled);
      },
      { timeoutMs: 90_000, describe: () => JSON.stringify(last, null, 2) },
    );
    const details = await describeSchedule(name);
    assert.ok(condition(details), `baton schedule describe agrees:\n${JSON.stringify(details, null, 2)}`);
    return details;
  }

  async function userMessages(threadId: string): Promise<string[]> {
    const { rows } = await db.query<{ content: string }>(
      `SELECT content FROM transcript_messages WHERE thread_id = $1 AND role = 'user' ORDER BY seq`,
      [threadId],
    );
    return rows.map((row) => row.content);
  }

  before(async () => {
    for (const [name, agent] of Object.entries(AGENTS)) {
      fs.writeFileSync(
        path.join(agentsDir, `${name}.md`),
        `---\nname: ${name}\ndescription: ${agent.description}\n---\n\nYou ${name}.\n`,
      );
    }
    fs.writeFileSync(
      path.join(agentsDir, 'model-script.yaml'),
      YAML.stringify({ agents: Object.fromEntries(Object.entries(AGENTS).map(([name, a]) => [name, a.script])) }),
    );
    const taskQueue = uniqueTaskQueue('schedule');
    dev = await startDev({ stateDir, args: ['--agents', agentsDir, '--task-queue', taskQueue] });
    sdk = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
  });

  after(async () => {
    for (const name of created) await cli('schedule', 'delete', name);
    await sdk?.close();
    await dev?.stop();
    await db.end();
  });

  test('schedule: create → trigger → the run starts a thread derived from the schedule and its time, which completes', async () => {
    const name = uniqueName('daily');
    const details = await create(
      name,
      '--agent',
      'reporter',
      '--message',
      'Summarise the day.',
      '--every',
      '1h',
      '--new-thread',
    );
    assert.equal(details.paused, false);
    assert.ok(details.nextRuns.length > 0, 'next runs are listed');
    const listed = parseJsonArray(await cli('schedule', 'list', '--json'));
    assert.deepEqual(
      listed.filter((row) => row.name === name).map((row) => [row.agent, row.target]),
      [['reporter', 'new thread per run']],
    );

    await schedule('trigger', name);
    const done = await waitForSchedule(
      name,
      'the triggered run to complete',
      (d) => d.recentRuns[0]?.status === 'completed',
    );
    const run = done.recentRuns[0] as Run;
    const threadId = runThreadId(name, run.scheduledAt);
    assert.equal(run.threadId, threadId);
    const result = run.result;
    assert.deepEqual(
      [result?.threadId, result?.turn, result?.status, result?.reply, result?.createdThread],
      [threadId, 1, 'completed', REPORT, true],
    );
    // The run's conversation is an ordinary root thread: the CLI shows it, and its message says where it came from.
    const tree = parseJson(await cli('tree', threadId, '--json'));
    assert.equal(tree.agent, 'reporter');
    assert.equal(tree.status, 'completed');
    const [message] = await userMessages(threadId);
    assert.match(message ?? '', new RegExp(`^---\\n\\[Schedule Context\\]\\nSent by schedule: ${name}\\n`));
    assert.match(message ?? '', /\n\nSummarise the day\.$/);
    const transcript = parseJsonArray(await cli('transcript', threadId, '--json'));
    assert.equal(transcript.at(-1)?.content, REPORT);
  });

  test('schedule: pause and unpause carry a note', async () => {
    const name = uniqueName('pausable');
    await create(
      name,
      '--agent',
      'reporter',
      '--message',
      'Report.',
      '--cron',
      '0 9 * * 1-5',
      '--timezone',
      'Europe/Paris',
      '--new-thread',
    );
    // Each command prints the state it reads back from Temporal afterwards, not what it was asked.
    const paused = await schedule('pause', name, '--note', 'holiday week');
    assert.deepEqual(paused, { name, paused: true, note: 'holiday week' });
    const unpaused = await schedule('unpause', name, '--note', 'back at work');
    assert.deepEqual(unpaused, { name, paused: false, note: 'back at work' });

    const paused2 = await create(
      uniqueName('born-paused'),
      '--agent',
      'reporter',
      '--message',
      'R.',
      '--every',
      '1d',
      '--new-thread',
      '--paused',
      '--note',
      'not yet',
    );
    assert.equal(paused2.paused, true);
    assert.equal(paused2.note, 'not yet');
  });
});
