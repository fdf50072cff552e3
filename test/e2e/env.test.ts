/**
 * Shared environment data as a user inspects it (issue 5, items 6 and 7): an agent stores two entries, updates one
 * and deletes the other through its universal tools; `baton env <thread>` shows the manifest, `get <key>` a value,
 * `events` the change log, and `--watch` streams changes as they commit. The client's env methods are checked
 * against the same worker.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import { connect, type BatonClient, type EnvEvent, type EnvWatch } from '../../client';
import { readStackFile } from '../../stack/stack-file';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import {
  childEnv,
  describeRun,
  freshDir,
  parseJson,
  parseJsonArray,
  startBaton,
  startDev,
  waitFor,
  type BackgroundCommand,
  type DevProcess,
  batonInProcess,
} from './cli-process';

const ARCHIVIST = 'archivist';
const CLERK = 'clerk';
const LEAD = 'lead';
const TASK_KEY = 'arc/task';
const SCRATCH_KEY = 'scratch';
const TASK_DESCRIPTION = 'The ARC task: training pairs as grids of colour numbers.';
const SCRATCH_DESCRIPTION = 'Working notes,\n  thrown away at the end.';
const TASK_V1 = { train: [{ input: [[0, 7]], output: [[7, 0]] }] };
const TASK_V2 = { train: [{ input: [[0, 7]], output: [[7, 0]] }], test: [{ input: [[7, 7]] }] };
const SCRATCH = ['mirror?', 'colour 7 only'];
const REPLY = 'Filed.';
/** How long a watch may take to print a change after the agent's turn has ended. */
const WATCH_TIMEOUT_MS = 30_000;

/** One model call per tool call, so the four changes are logged in a known order. */
const SCRIPT = {
  agents: {
    [ARCHIVIST]: [
      {
        call: 'store_env_data',
        args: { key: TASK_KEY, short_description: TASK_DESCRIPTION, value: TASK_V1, type: 'task', tags: ['arc'] },
      },
      { call: 'store_env_data', args: { key: SCRATCH_KEY, short_description: SCRATCH_DESCRIPTION, value: SCRATCH } },
      { call: 'update_env_data', args: { key: TASK_KEY, value: TASK_V2, expected_version: 1 } },
      { call: 'delete_env_data', args: { key: SCRATCH_KEY } },
      { say: REPLY },
    ],
    [CLERK]: [{ call: 'update_env_data', args: { key: 'missing', value: 1 } }, { say: 'Nothing to update.' }],
    [LEAD]: [{ call: ARCHIVIST, args: { message: 'File the task.' } }, { say: 'The archivist filed it.' }],
  },
};

const agentFile = (name: string, description: string, capabilities = '[]') =>
  `---\nname: ${name}\ndescription: ${description}\ncapabilities: ${capabilities}\n---\n\n` +
  'You keep the shared environment data in order.\n';

/** The four events the archivist's turn logs, as `--json` prints them (times and sequence numbers aside). */
function expectedEvents(threadId: string) {
  const by = { agent: ARCHIVIST, thread: threadId };
  return [
    { key: TASK_KEY, action: 'stored', actor: by, version: 1, value: TASK_V1, shortDescription: TASK_DESCRIPTION },
    {
      key: SCRATCH_KEY,
      action: 'stored',
      actor: by,
      version: 1,
      value: SCRATCH,
      shortDescription: SCRATCH_DESCRIPTION,
    },
    { key: TASK_KEY, action: 'updated', actor: by, version: 2, value: TASK_V2, shortDescription: TASK_DESCRIPTION },
    // The deleted entry's last value stays in the log.
    {
      key: SCRATCH_KEY,
      action: 'deleted',
      actor: by,
      version: 1,
      value: SCRATCH,
      shortDescription: SCRATCH_DESCRIPTION,
    },
  ];
}

/** The fields `expectedEvents` compares. */
function comparable(event: Record<string, unknown>) {
  const { key, action, actor, version, value, shortDescription } = event;
  return { key, action, actor, version, value, shortDescription };
}

/** The line `baton env <thread> events` prints for `event` (as `--json` gives it). */
function eventLine(json: Record<string, unknown>): string {
  const event = json as {
    seq: number;
    createdAt: string;
    action: string;
    key: string;
    actor: { agent: string; thread: string };
    version: number | null;
    valueSize: number | null;
    reason: string | null;
  };
  const version = event.version === null ? '' : ` v${event.version}`;
  const size = event.valueSize === null ? '' : ` ${event.valueSize} B`;
  const reason = event.reason === null ? '' : `: ${event.reason}`;
  return (
    `#${event.seq} ${event.createdAt} ${event.action} ${event.key}${version} ` +
    `by ${event.actor.agent} (${event.actor.thread})${size}${reason}`
  );
}

/** Increasing sequence numbers: the log's order. */
function assertIncreasing(seqs: readonly unknown[]): void {
  for (let index = 1; index < seqs.length; index += 1) {
    assert.ok(Number(seqs[index]) > Number(seqs[index - 1]), `sequence numbers increase: ${seqs.join(', ')}`);
  }
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('shared environment data through the CLI and the client, with `baton dev` on the test stack', () => {
  const stateDir = freshDir('env-state');
  const agentsDir = freshDir('env-agents');
  let dev: DevProcess | undefined;
  let client: BatonClient | undefined;
  const background: BackgroundCommand[] = [];
  const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());
  const startCli = (...args: string[]) => {
    const command = startBaton(['--state-dir', stateDir, ...args], childEnv());
    background.push(command);
    return command;
  };
  const sdk = () => {
    assert.ok(client, 'connected in before()');
    return client;
  };

  /** A client on `baton dev`'s stack, as the CLI finds it. */
  async function connectToDev(): Promise<BatonClient> {
    const stack = readStackFile(stateDir);
    assert.ok(stack, 'baton dev wrote a live stack.json');
    const { temporalAddress: address, namespace, taskQueue, databaseUrl } = stack;
    return connect({ address, namespace, taskQueue, databaseUrl });
  }

  /** Runs the archivist in a new root thread through `baton run` and returns the thread id. */
  async function runArchivist(): Promise<string> {
    const threadId = uniqueThreadId('env');
    const run = await cli('run', ARCHIVIST, 'File the task.', '--thread', threadId, '--json');
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(parseJson(run).reply, REPLY);
    return threadId;
  }

  before(async () => {
    fs.writeFileSync(path.join(agentsDir, `${ARCHIVIST}.md`), agentFile(ARCHIVIST, 'Files tasks for the team.'));
    fs.writeFileSync(path.join(agentsDir, `${CLERK}.md`), agentFile(CLERK, 'Updates what exists.'));
    fs.writeFileSync(path.join(agentsDir, `${LEAD}.md`), agentFile(LEAD, 'Has tasks filed.', `[${ARCHIVIST}]`));
    fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), YAML.stringify(SCRIPT));
    dev = await startDev({ stateDir, args: ['--agents', agentsDir, '--task-queue', uniqueTaskQueue('env')] });
    client = await connectToDev();
  });

  after(async () => {
    for (const command of background) {
      if (command.child.exitCode === null && command.child.signalCode === null) command.child.kill('SIGKILL');
    }
    await client?.close();
    await dev?.stop();
  });

  test('env: the manifest lists entries without values, get prints a value, events logs every change in order', async () => {
    const threadId = await runArchivist();

    const manifest = parseJsonArray(await cli('env', threadId, '--json'));
    assert.equal(manifest.length, 1, 'the deleted entry is gone');
    const [entry] = manifest;
    assert.equal(entry?.key, TASK_KEY);
    assert.equal(entry?.shortDescription, TASK_DESCRIPTION, 'the update kept the description it left out');
    assert.equal(entry?.version, 2);
    assert.equal(entry?.type, 'task');
    assert.deepEqual(entry?.tags, ['arc']);
    assert.deepEqual(entry?.storedBy, { agent: ARCHIVIST, thread: threadId });
    assert.ok(!('value' in (entry ?? {})), 'the manifest carries no values');

    const human = await cli('env', threadId);
    assert.equal(human.code, 0, describeRun(human));
    const [header, row, ...rest] = human.stdout.split('\n');
    assert.match(header ?? '', /^KEY +VERSION +STORED BY +UPDATED +DESCRIPTION$/);
    assert.match(
      row ?? '',
      new RegExp(
        `^${escapeRegExp(TASK_KEY)} +2 +${ARCHIVIST} \\(${threadId}\\) +\\d+[smhd] ago +${escapeRegExp(TASK_DESCRIPTION)}$`,
      ),
    );
    assert.deepEqual(rest, ['']);

    const got = await cli('env', threadId, 'get', TASK_KEY, '--json');
    assert.equal(got.code, 0, describeRun(got));
    const gotEntry = parseJson(got);
    assert.deepEqual(gotEntry.value, TASK_V2);
    assert.equal(gotEntry.version, 2);
    assert.deepEqual(gotEntry.storedBy, { agent: ARCHIVIST, thread: threadId });
    const gotText = await cli('env', threadId, 'get', TASK_KEY);
    // jsonb keeps its own key order, so the pretty value is compared with the one --json gives.
    assert.equal(gotText.stdout, `${JSON.stringify(gotEntry.value, null, 2)}\n`, describeRun(gotText));

    for (const args of [[], ['--json']]) {
      const missing = await cli('env', threadId, 'get', SCRATCH_KEY, ...args);
      assert.equal(missing.code, 1, describeRun(missing));
      assert.equal(missing.stdout, '');
      assert.equal(missing.stderr, `baton: no entry '${SCRATCH_KEY}' in thread '${threadId}'\n`);
    }

    const events = parseJsonArray(await cli('env', threadId, 'events', '--json'));
    assert.deepEqual(events.map(comparable), expectedEvents(threadId));
    assertIncreasing(events.map((event) => event.seq));
    for (const event of events) {
      assert.equal(event.rootThreadId, threadId);
      assert.equal(event.reason, null);
      assert.equal(typeof event.valueSize, 'number');
      assert.ok(!Number.isNaN(Date.parse(String(event.createdAt))), 'createdAt is a time');
    }
    assert.equal(events[0]?.valueSize, Buffer.byteLength(JSON.stringify(TASK_V1)));
    assert.equal(events[1]?.valueSize, Buffer.byteLength(JSON.stringify(SCRATCH)));

    const eventsText = await cli('env', threadId, 'events');
    assert.equal(eventsText.code, 0, describeRun(eventsText));
    assert.equal(eventsText.stdout, `${events.map(eventLine).join('\n')}\n`);

    const since = parseJsonArray(await cli('env', threadId, 'events', '--since', String(events[1]?.seq), '--json'));
    assert.deepEqual(since, events.slice(2));
    const none = await cli('env', threadId, 'events', '--since', String(events[3]?.seq));
    assert.equal(none.stdout, 'No environment data events.\n', describeRun(none));
  });

  test('env: a refused write is logged as rejected, with its reason, and changes nothing', async () => {
    const run = await cli('run', CLERK, 'Update it.', '--json');
    assert.equal(run.code, 0, describeRun(run));
    const threadId = String(parseJson(run).threadId);

    const empty = await cli('env', threadId);
    assert.equal(empty.stdout, 'No environment data.\n', describeRun(empty));
    assert.deepEqual(parseJsonArray(await cli('env', threadId, '--json')), []);

    const events = parseJsonArray(await cli('env', threadId, 'events', '--json'));
    assert.deepEqual(
      events.map((event) => [event.action, event.key, event.actor, event.version, event.valueSize]),
      [['rejected', 'missing', { agent: CLERK, thread: threadId }, null, null]],
    );
    assert.match(String(events[0]?.reason), /no entry 'missing' to update/);
    const text = await cli('env', threadId, 'events');
    assert.equal(text.stdout, `${eventLine(events[0] ?? {})}\n`, describeRun(text));
    assert.match(text.stdout, /^#\d+ \S+ rejected missing by clerk \(\S+\): no entry 'missing' to update/);
  });

  test('env: --watch prints each change as it commits, in order, once, and exits 0 on SIGINT', async () => {
    // A fresh thread with no message yet: the watches start before the agent runs.
    const threadId = uniqueThreadId('env-watch');
    await sdk().startThread({ agent: ARCHIVIST, threadId });
    const eventsWatch = startCli('env', threadId, 'events', '--watch', '--json');
    const manifestWatch = startCli('env', threadId, '--watch');
    for (const watch of [eventsWatch, manifestWatch]) {
      await waitFor('the watch to start', () => watch.output.stderr().includes('Ctrl-C to stop'), {
        timeoutMs: WATCH_TIMEOUT_MS,
        child: watch.child,
        describe: watch.output.stderr,
      });
    }
    assert.equal(eventsWatch.output.stdout(), '', 'nothing logged yet');
    assert.equal(manifestWatch.output.stdout(), 'No environment data.\n');

    const sent = await cli('send', threadId, 'File the task.', '--json');
    assert.equal(sent.code, 0, describeRun(sent));
    const lines = (watch: BackgroundCommand) => watch.output.stdout().split('\n').filter(Boolean);
    await waitFor('four events from the events watch', () => lines(eventsWatch).length >= 4, {
      timeoutMs: WATCH_TIMEOUT_MS,
      child: eventsWatch.child,
      describe: () => `${eventsWatch.output.stdout()}\n${eventsWatch.output.stderr()}`,
    });
    await waitFor('four events from the manifest watch', () => lines(manifestWatch).length >= 5, {
      timeoutMs: WATCH_TIMEOUT_MS,
      child: manifestWatch.child,
      describe: () => `${manifestWatch.output.stdout()}\n${manifestWatch.output.stderr()}`,
    });

    for (const watch of [eventsWatch, manifestWatch]) watch.child.kill('SIGINT');
    const [eventsDone, manifestDone] = await Promise.all([eventsWatch.finished(), manifestWatch.finished()]);
    assert.equal(eventsDone.code, 0, describeRun(eventsDone));
    assert.equal(manifestDone.code, 0, describeRun(manifestDone));

    const logged = parseJsonArray(await cli('env', threadId, 'events', '--json'));
    assert.deepEqual(logged.map(comparable), expectedEvents(threadId));
    const streamed = eventsDone.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(streamed, logged, 'exactly the logged events, in order, each once');
    assert.equal(manifestDone.stdout, `No environment data.\n${logged.map(eventLine).join('\n')}\n`);
  });

  test('env: data a delegated agent stores belongs to the root, attributed to the delegation thread', async () => {
    const run = await cli('run', LEAD, 'Have the task filed.', '--json');
    assert.equal(run.code, 0, describeRun(run));
    const rootId = String(parseJson(run).threadId);
    const tree = parseJson(await cli('tree', rootId, '--json'));
    const children = tree.children as { threadId: string; agent: string }[];
    assert.deepEqual(
      children.map((child) => child.agent),
      [ARCHIVIST],
    );
    const childId = children[0]?.threadId ?? '';
    assert.notEqual(childId, rootId);

    const manifest = parseJsonArray(await cli('env', rootId, '--json'));
    assert.deepEqual(
      manifest.map((entry) => [entry.key, entry.storedBy]),
      [[TASK_KEY, { agent: ARCHIVIST, thread: childId }]],
    );
    const events = parseJsonArray(await cli('env', rootId, 'events', '--json'));
    assert.deepEqual(events.map(comparable), expectedEvents(childId));
    assert.ok(events.every((event) => event.rootThreadId === rootId));

    for (const args of [[], ['get', TASK_KEY], ['events'], ['--watch']]) {
      const child = await cli('env', childId, ...args);
      assert.equal(child.code, 1, describeRun(child));
      assert.equal(
        child.stderr,
        `baton: '${childId}' is a delegation thread; its environment data is that of root thread '${rootId}'\n`,
      );
    }
  });

  test('env: a thread that does not exist exits 1, for every form', async () => {
    for (const args of [[], ['--json'], ['get', 'x'], ['events'], ['events', '--json'], ['events', '--watch']]) {
      const result = await cli('env', 'nosuch', ...args);
      assert.equal(result.code, 1, describeRun(result));
      assert.equal(result.stdout, '');
      assert.equal(result.stderr, "baton: thread 'nosuch' does not exist\n", describeRun(result));
    }
  });

  test('env: arguments that do not fit exit 1 saying why', async () => {
    const cases: [string[], RegExp][] = [
      [['env', 't', 'list'], /^baton: unknown env action 'list'/],
      [['env', 't', 'get'], /needs a <key>/],
      [['env', 't', 'get', 'k', '--watch'], /--watch goes with the manifest or `events`/],
      [['env', 't', '--since', '3'], /--since goes with `events`/],
      [['env', 't', 'events', '--since', 'soon'], /a sequence number/],
    ];
    for (const [args, message] of cases) {
      const result = await cli(...args);
      assert.equal(result.code, 1, describeRun(result));
      assert.match(result.stderr, message);
    }
  });

  test('client: envData, envGet and envEvents read what the agent stored; watchEnv delivers from since', async () => {
    const thread = await sdk().startThread({ agent: ARCHIVIST });
    assert.equal((await thread.send('File the task.')).reply, REPLY);

    const manifest = await thread.envData();
    assert.deepEqual(
      manifest.map((entry) => [entry.key, entry.version, entry.storedBy]),
      [[TASK_KEY, 2, { agent: ARCHIVIST, thread: thread.threadId }]],
    );
    assert.deepEqual(await thread.envData({ prefix: 'arc/', tag: 'arc', type: 'task' }), manifest);
    assert.deepEqual(await thread.envData({ storedBy: 'someone-else' }), []);
    assert.deepEqual((await thread.envGet(TASK_KEY))?.value, TASK_V2);
    assert.equal(await thread.envGet(SCRATCH_KEY), undefined);

    const events = await thread.envEvents();
    assert.deepEqual(
      events.map((event) => comparable({ ...event })),
      expectedEvents(thread.threadId),
    );
    const second = events[1]?.seq ?? 0;
    assert.deepEqual(await thread.envEvents({ since: second }), events.slice(2));
    assert.deepEqual(await thread.envEvents({ since: second, limit: 1 }), events.slice(2, 3));

    const delivered: EnvEvent[] = [];
    const watch = await thread.watchEnv((event) => void delivered.push(event), { since: second });
    assert.deepEqual(delivered, events.slice(2), 'the logged events after since, before watchEnv resolves');
    await watch.stop();
    await watch.done;
    await watch.stop();
  });

  test('client: watchEnv delivers live changes once each, a listener may stop it, close() stops the rest', async () => {
    const own = await connectToDev();
    let closed = false;
    try {
      // A fresh thread: nothing is logged yet, so every event below is delivered live.
      const thread = await own.startThread({ agent: ARCHIVIST });
      const delivered: EnvEvent[] = [];
      const live = await thread.watchEnv((event) => void delivered.push(event));
      const seenByStopping: EnvEvent[] = [];
      let stopping: EnvWatch | undefined = undefined;
      stopping = await thread.watchEnv(async (event) => {
        seenByStopping.push(event);
        await stopping?.stop();
      });
      const idle = await own.thread(thread.threadId).watchEnv(() => undefined);

      assert.equal((await thread.send('File the task.')).reply, REPLY);
      await waitFor('four delivered events', () => delivered.length >= 4, { timeoutMs: WATCH_TIMEOUT_MS });
      assert.deepEqual(delivered, await thread.envEvents(), 'each logged event once, in order');
      await stopping.done;
      assert.deepEqual(seenByStopping, delivered.slice(0, 1), 'nothing is delivered after stop()');

      closed = true;
      await own.close();
      await Promise.all([live.done, idle.done]);
    } finally {
      if (!closed) await own.close();
    }
  });

  test('client: env methods name a thread that does not exist', async () => {
    const thread = sdk().thread('nosuch');
    for (const read of [
      () => thread.envData(),
      () => thread.envGet('x'),
      () => thread.envEvents(),
      () => thread.watchEnv(() => undefined),
    ]) {
      await assert.rejects(read, { name: 'BatonClientError', message: "thread 'nosuch' does not exist" });
    }
  });
});
