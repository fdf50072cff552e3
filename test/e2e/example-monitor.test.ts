/**
 * The example project examples/monitor, run as its README says, on the real stack with its scripted model and with
 * Baton as a user gets it: `npm pack` (of a copy of this checkout, so the build leaves the checkout's dist/ alone),
 * the example copied out of the repository with its `"baton": "file:../.."` changed to that tarball, `npm install`
 * and `npm start`. Then the README's commands: `baton schedule create … --every 1h --new-thread` and `baton schedule
 * trigger` run the monitor in a new thread; it reads the thermometer (the example's tool, reading
 * `data/cold-room.json`) and waits a minute on a durable timer, the test raises the reading meanwhile (as soon as `baton
 * watch --json` shows the first reading, so a slow machine cannot miss the window), the timer ends the
 * wait, the second reading is over the limit, the alert it stores wakes the escalator watcher, whose question is
 * answered with `baton answer`; the scheduled run and the wake-up complete. Last, the copy type-checks against the
 * tarball's declarations (`npm run typecheck`).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  baton,
  type Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  installExample,
  npmStart,
  packedBaton,
  ROOT,
  startBaton,
  stopExample,
  succeed,
} from './user-project';

const EXAMPLE = path.join(ROOT, 'examples', 'monitor');
const SCHEDULE = ['schedule', 'create', 'cold-room', '--agent', 'monitor', '--message', 'Check the cold room.'];
const SCHEDULE_TIMING = ['--every', '1h', '--new-thread'];
const ANSWER = 'Move the stock to the freezer and call the repair service.';
const WARMER = '{ "celsius": 9.5, "limit_celsius": 8 }';

interface Message {
  role: string;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[] | null;
  toolCallId: string | null;
}
interface ScheduleDetails {
  recentRuns: { threadId?: string; status: string }[];
}
interface TreeNode {
  threadId: string;
  agent: string;
  status: string;
  children: TreeNode[];
}

/** The result the transcript stored for each call of `tool`, in order (null while a call has none). */
function toolResults(messages: readonly Message[], tool: string): (string | null)[] {
  const ids = messages.flatMap((message) =>
    (message.toolCalls ?? []).filter((call) => call.name === tool).map((call) => call.id),
  );
  return ids.map(
    (id) => messages.find((message) => message.role === 'tool' && message.toolCallId === id)?.content ?? null,
  );
}

/** Polls `read` every half second until it returns a value; fails with `what` after the command timeout. */
async function eventually<T>(what: string, read: () => Promise<T | undefined>): Promise<T> {
  for (const deadline = Date.now() + COMMAND_TIMEOUT_MS; ;) {
    const value = await read();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `${what}: not within ${COMMAND_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe('the example project (examples/monitor), run as its README says', () => {
  let example: string;
  let start: Command | undefined;

  before(
    async () => {
      const readme = fs.readFileSync(path.join(EXAMPLE, 'README.md'), 'utf8');
      // The commands below are the README's: a change to either shows here.
      const create = `npx baton ${SCHEDULE.slice(0, -1).join(' ')} "Check the cold room." ${SCHEDULE_TIMING.join(' ')}`;
      for (const command of [
        'npm start',
        create,
        'npx baton schedule trigger cold-room',
        `echo '${WARMER}' > data/cold-room.json`,
        `npx baton answer sched-cold-room-20261123T140211Z q1 "${ANSWER}"`,
      ]) {
        assert.ok(readme.includes(command), `the README runs ${command}`);
      }
      // The run's one tarball, packed from a copy of the checkout (its build never touches the checkout's dist/).
      const tarball = await packedBaton();
      example = copyExampleProject('monitor', [], `file:${tarball.file}`);
      await installExample(example);
      start = await npmStart(example);
    },
    { timeout: 4 * COMMAND_TIMEOUT_MS },
  );

  after(async () => {
    // Its hourly runs end with the stack; delete it all the same, as the README does.
    if (start !== undefined) await baton(example, ['schedule', 'delete', 'cold-room']).catch(() => undefined);
    await stopExample('npm start', start, example);
  });

  test('the schedule runs the monitor; its timer ends the wait; the alert wakes the watcher, whose question is answered', async () => {
    assert.match(start?.stderr ?? '', /tools: read_temperature from .*tools\.ts/);
    await baton(example, [...SCHEDULE, ...SCHEDULE_TIMING]);
    await baton(example, ['schedule', 'trigger', 'cold-room']);
    const describeSchedule = async () =>
      JSON.parse((await baton(example, ['schedule', 'describe', 'cold-room', '--json'])).stdout) as ScheduleDetails;
    const thread = await eventually('the triggered run started a thread', async () => {
      const runs = (await describeSchedule()).recentRuns;
      return runs.length === 1 ? runs[0]?.threadId : undefined;
    });
    assert.match(thread, /^sched-cold-room-\d{8}T\d{6}Z$/);
    const transcript = async (id = thread) =>
      JSON.parse((await baton(example, ['transcript', id, '--json'])).stdout) as Message[];

    // The first reading, seen live in `baton watch --json`; then the room warms up at once, and `baton status` shows
    // the wait while the timer runs.
    const follow = startBaton(example, ['watch', thread, '--json', '--no-deltas']);
    let first: string;
    try {
      [first] = await follow.waitFor(/^(?=.*"type":"tool_result")(?=.*"name":"read_temperature").*$/m);
      fs.writeFileSync(path.join(example, 'data', 'cold-room.json'), `${WARMER}\n`);
      await follow.waitFor(/"type":"wait_started"/);
    } finally {
      await follow.stop();
    }
    const reading = (JSON.parse(first) as { content: string }).content;
    assert.deepEqual(
      { ...(JSON.parse(reading) as Record<string, unknown>), at: undefined },
      {
        celsius: 6.8,
        limit_celsius: 8,
        over_limit: false,
        at: undefined,
      },
    );
    const waits = await eventually('the wait in baton status', async () => {
      const status = JSON.parse((await baton(example, ['status', thread, '--json'])).stdout) as {
        waits: { agent: string; reason: string }[];
      };
      return status.waits.length > 0 ? status.waits : undefined;
    });
    assert.deepEqual(
      waits.map((wait) => [wait.agent, wait.reason]),
      [['monitor', 'the cold room is near its 8 °C limit: read it again']],
    );

    // The escalator's question, once the alert woke it.
    const questions = await eventually('the escalator asked', async () => {
      const listed = JSON.parse((await baton(example, ['questions', thread, '--json'])).stdout) as {
        questionId: string;
        agent: string;
        question: string;
        threadId: string;
      }[];
      return listed.length > 0 ? listed : undefined;
    });
    assert.deepEqual(
      questions.map((question) => [question.questionId, question.agent, question.question]),
      [['q1', 'escalator', 'The cold room is at 9.5 °C, over its 8 °C limit. What should the kitchen do?']],
    );
    assert.equal(questions[0]?.threadId, `${thread}/watch.escalator.1`, 'asked in the watcher’s wake-up thread');

    // The monitor's turn: the timer, not a message or a wake, ended the wait; the second reading is the warmer one.
    const monitor = await transcript();
    const [waited] = toolResults(monitor, 'wait');
    assert.match(waited ?? '', /^Waited 60 seconds, until .*, as planned \(the cold room is near its 8 °C limit/);
    const second = JSON.parse(toolResults(monitor, 'read_temperature')[1] ?? '{}') as Record<string, unknown>;
    assert.deepEqual([second.celsius, second.over_limit], [9.5, true]);
    assert.deepEqual(toolResults(monitor, 'store_env_data'), ["Stored 'alerts/cold-room' in environment data."]);

    // The watcher woke once, for the monitor's write of the alert.
    const watch = JSON.parse((await baton(example, ['watch', 'list', thread, '--json'])).stdout) as {
      watchers: { name: string; agent: string; keys: string[] }[];
      wakeups: { watcher: string; changes: { key: string; action: string; writer: { agent: string } }[] }[];
    };
    assert.deepEqual(
      watch.watchers.map((watcher) => [watcher.name, watcher.agent, watcher.keys]),
      [['escalator', 'escalator', ['alerts/*']]],
    );
    assert.deepEqual(
      watch.wakeups.map((wakeup) => [
        wakeup.watcher,
        wakeup.changes.map((change) => [change.key, change.action, change.writer.agent]),
      ]),
      [['escalator', [['alerts/cold-room', 'stored', 'monitor']]]],
    );

    assert.equal((await baton(example, ['answer', thread, 'q1', ANSWER])).stdout, 'q1 answered.\n');

    // The scheduled run completed, and so did the wake-up, with the answer in its transcript.
    const run = await eventually('the scheduled run completed', async () => {
      const [latest] = (await describeSchedule()).recentRuns;
      return latest?.status === 'running' ? undefined : latest;
    });
    assert.equal(run.status, 'completed');
    const wakeup = await eventually('the wake-up completed', async () => {
      const tree = JSON.parse((await baton(example, ['tree', thread, '--json'])).stdout) as TreeNode;
      const node = tree.children.find((child) => child.agent === 'escalator');
      return node?.status === 'completed' ? node : undefined;
    });
    assert.deepEqual(toolResults(await transcript(wakeup.threadId), 'ask_human'), [`The human answered: ${ANSWER}`]);
  });

  test('its tool type-checks against the packed package (npm run typecheck)', async () => {
    await succeed('npm run typecheck', 'npm', ['run', 'typecheck'], { cwd: example });
  });
});
