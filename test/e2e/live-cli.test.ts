/**
 * `baton run`, `send` and `watch` showing a run as it happens (issue 24), as a user runs them: real `baton` processes
 * against a real `baton worker` process with `BATON_MODEL_STREAM=on`, on the scripted model streaming slowly. On a
 * pseudo-terminal (tmux, whose screen the test reads with `capture-pane`; `script` for raw bytes) the tree is drawn
 * live; through pipes the output holds no control characters; `--json --stream` is JSON lines.
 *
 * "Before the turn ends" is decided by order, not by timing: the root's last step is held (`hold:`) until the test
 * has read the screen, and streamed text is told from the stored message by the screen showing its first words
 * without its last (the stored message arrives whole).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { RunEvent } from '../../client';
import { parseScript } from '../../scripted-model';
import { uniqueThreadId } from '../../testing/test-env';
import { startKillableWorkers, type KillableWorkers } from '../../testing/worker-process';
import {
  COMMAND_TIMEOUT_MS,
  ROOT,
  baton,
  describeRun,
  freshDir,
  parseJson,
  stackEnv,
  startBaton,
  waitFor,
  workDir,
} from './cli-process';

const BATON = path.join(ROOT, 'bin', 'baton.js');
const ESC = '\x1b';
const SPINNER = /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/;
const STREAMED_WORDS = 'alpha bravo charlie delta echo foxtrot golf hotel';

const agentFile = (name: string, capabilities: string[] = []) =>
  `---\nname: ${name}\ndescription: The ${name}.\ncapabilities: [${capabilities.join(', ')}]\n---\nWork.\n`;

const script = parseScript(
  `
agents:
  # The live tree: a tool, a delegation whose streamed reply's end is held, a fork, then a final answer held too.
  live_lead:
    - { call: think, args: { thought: "Ask the counter." } }
    - { call: live_counter, args: { message: "Count the stars." } }
    - call: fork_join
      args: { tasks: [ { agent: live_checker, message: "Check the count." } ] }
    - { say: "The counter counted eight stars.", hold: live-final }
  live_counter:
    - { say: "${STREAMED_WORDS}", chunk_delay_ms: 50, hold_end: live-counter-end }
  live_checker:
    - { say: "Checked: eight." }
  # Quick runs for JSON lines and plain lines: the same shape, nothing held; a second turn for \`baton send\`.
  quick_lead:
    - { call: think, args: { thought: "Plan." } }
    - { call: quick_helper, args: { message: "Help." } }
    - call: fork_join
      args: { tasks: [ { agent: quick_helper, message: "Help in a fork." } ] }
    - { say: "Quick and done.", chunk_delay_ms: 20 }
    - { say: "Second turn done.", chunk_delay_ms: 20 }
  quick_helper:
    - { say: "Helped.", chunk_delay_ms: 20 }
  # Watchers from the CLI: the writer stores a key in its second turn; the watcher wakes for it.
  cli_writer:
    - { say: "Ready." }
    - { call: store_env_data, args: { key: "findings/x", short_description: "A finding.", value: 1 } }
    - { say: "Stored." }
  cli_watcher:
    - { say: "Looked at it." }
  # Watched mid-turn: each step after the first is held, so the test decides what happens while it watches.
  watched:
    - { call: think, args: { thought: "Before the watch." } }
    - { call: think, args: { thought: "While watched." }, hold: watched-second }
    - { say: "Watched to the end.", hold: watched-final }
`,
  'live-cli',
);

let fixture: KillableWorkers | undefined;
const workers = (): KillableWorkers => {
  assert.ok(fixture, 'the worker was started');
  return fixture;
};

before(async () => {
  fixture = await startKillableWorkers({
    name: 'live-cli',
    dir: freshDir('live'),
    agents: {
      'live_lead.md': agentFile('live_lead', ['live_counter', 'live_checker', 'fork_join']),
      'live_counter.md': agentFile('live_counter'),
      'live_checker.md': agentFile('live_checker'),
      'quick_lead.md': agentFile('quick_lead', ['quick_helper', 'fork_join']),
      'quick_helper.md': agentFile('quick_helper'),
      'watched.md': agentFile('watched'),
      'cli_writer.md': agentFile('cli_writer'),
      'cli_watcher.md': agentFile('cli_watcher'),
    },
    script,
    // What this issue is about: a `baton worker` that asks the model for streamed replies.
    workerEnv: { BATON_MODEL_STREAM: 'on' },
  });
  await fixture.start('worker');
});

after(async () => {
  // tmux leaves its socket file behind when its server is killed: remove it too.
  const socket = spawnSync('tmux', ['-L', tmuxSocket, 'display-message', '-p', '#{socket_path}'], { encoding: 'utf8' });
  spawnSync('tmux', ['-L', tmuxSocket, 'kill-server'], { encoding: 'utf8' });
  if (socket.status === 0 && socket.stdout.trim() !== '') fs.rmSync(socket.stdout.trim(), { force: true });
  await fixture?.close();
});

const cliEnv = () => stackEnv({ BATON_TASK_QUEUE: workers().taskQueue });
const cli = (...args: string[]) => baton(args, cliEnv());

/** `'…'` for sh: the command tmux and `script` run. */
const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
const batonCommand = (args: readonly string[]) =>
  [process.execPath, BATON, ...args].map(quote).join(' ') + `; echo "[exit $?]"`;

/**
 * A tmux server of this test file's own (its own socket), started with the CLI's environment, whose panes are
 * terminals: `screen()` is what a person would see.
 */
const tmuxSocket = `baton-live-${process.pid}`;
function tmux(...args: string[]): string {
  const result = spawnSync('tmux', ['-L', tmuxSocket, '-f', '/dev/null', ...args], {
    cwd: workDir,
    env: { ...cliEnv(), TERM: 'xterm-256color' },
    encoding: 'utf8',
  });
  assert.equal(result.status, 0, `tmux ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

interface Terminal {
  name: string;
  /** The screen now, maybe in the middle of a redraw: for failure messages. */
  raw(): string;
  /**
   * The screen once two captures a moment apart agree, so a frame caught half drawn (a redraw split across the
   * pseudo-terminal's reads) is never what a test asserts on.
   */
  screen(): Promise<string>;
}

/** Runs `baton <args>` in a new 120x50 tmux window; the pane stays after the command ends, showing `[exit <code>]`. */
function startInTerminal(name: string, args: readonly string[]): Terminal {
  // The shell outlives a Ctrl-C meant for `baton` (`trap`), so the pane can say how `baton` exited.
  tmux('new-session', '-d', '-x', '120', '-y', '50', '-s', name, `trap : INT; ${batonCommand(args)}; sleep 3600`);
  const raw = () => tmux('capture-pane', '-p', '-t', name);
  return {
    name,
    raw,
    async screen() {
      let previous = raw();
      for (;;) {
        await sleep(20);
        const current = raw();
        if (current === previous) return current;
        previous = current;
      }
    },
  };
}

const lines = (screen: string) => screen.split('\n').map((line) => line.trimEnd());

test('baton run on a terminal draws the tree live: names, streamed text, tool lines, a delegation and a fork task indented under their caller, before the turn ends', async () => {
  const threadId = uniqueThreadId('live');
  const terminal = startInTerminal('run', ['run', 'live_lead', 'Count the stars, please.', '--thread', threadId]);
  const describe = () => terminal.raw();

  // Streamed text: the counter's words on screen while the model holds the end of its reply, so the reply cannot be
  // stored yet (the counter's call has no result line) and what shows can only have come from the stream.
  let partial = '';
  await waitFor(
    "the counter's streamed words, its reply's end held",
    async () => (partial = await terminal.screen()).includes(STREAMED_WORDS),
    { timeoutMs: COMMAND_TIMEOUT_MS, describe },
  );
  assert.doesNotMatch(partial, /← live_counter/, `the counter's reply is not stored yet:\n${partial}`);
  assert.match(partial, /^ {4}alpha( \w+)*$/m, 'streamed text under the delegated agent, indented');
  assert.match(
    partial,
    /^ {2}live_counter {2}\S (\d+m)?\d+s$/m,
    'the running delegate: a spinner and its elapsed time',
  );
  workers().model.release('live-counter-end');

  // Everything but the held final answer: the turn has not ended, and the screen shows the whole tree so far.
  let heldScreen = '';
  await waitFor(
    "the fork's result on screen",
    async () => /^ {2}← fork_join: /m.test((heldScreen = await terminal.screen())),
    { timeoutMs: COMMAND_TIMEOUT_MS, describe },
  );
  const held = lines(heldScreen);
  const at = (pattern: RegExp) => {
    const index = held.findIndex((line) => pattern.test(line));
    assert.ok(index >= 0, `a line matching ${pattern} on screen:\n${held.join('\n')}`);
    return index;
  };
  const order = [
    at(/^live_lead {2}\S (\d+m)?\d+s$/), // the root, still running: spinner and elapsed time
    at(/^ {2}> Count the stars, please\.$/),
    at(/^ {2}→ think \{"thought":"Ask the counter\."\}$/),
    at(/^ {2}← think: /),
    at(/^ {2}→ live_counter \{"message":"Count the stars\."\}$/),
    at(/^ {2}live_counter {2}✓ /),
    at(new RegExp(`^ {4}${STREAMED_WORDS}$`)),
    at(/^ {2}← live_counter: alpha bravo/),
    at(/^ {2}→ fork_join /),
    at(/^ {2}live_checker \(fork 1 task 1\) {2}✓ /),
    at(/^ {4}Checked: eight\.$/),
    at(/^ {2}← fork_join: /),
  ];
  assert.deepEqual(
    order,
    [...order].sort((a, b) => a - b),
    `in the order they happened:\n${held.join('\n')}`,
  );
  assert.ok(SPINNER.test(held[order[0] ?? 0] ?? ''), 'the running root turns a spinner');
  assert.doesNotMatch(held.join('\n'), /eight stars|\[exit/, 'the final answer is held: the turn has not ended');

  workers().model.release('live-final');
  await waitFor('the command to end', () => terminal.raw().includes('[exit'), {
    timeoutMs: COMMAND_TIMEOUT_MS,
    describe,
  });
  const final = lines(await terminal.screen());
  assert.ok(final.includes('[exit 0]'), final.join('\n'));
  assert.ok(final.includes(`thread ${threadId}`), 'the thread id first, as before');
  assert.match(final.join('\n'), /^live_lead {2}✓ \S+$/m, 'the root ended: a tick and how long it took');
  assert.ok(final.includes('  The counter counted eight stars.'), 'the final answer in the tree');
  // Then the reply as before, after a blank line; the tree printed for good has no spinner left in it.
  const exitLine = final.indexOf('[exit 0]');
  assert.deepEqual(final.slice(exitLine - 2, exitLine), ['', 'The counter counted eight stars.']);
  assert.doesNotMatch(final.join('\n'), SPINNER);
});

/** Every line of `stdout` parsed as JSON: fails on the first that is not one JSON document. */
function jsonLines(stdout: string): Record<string, unknown>[] {
  assert.ok(stdout.endsWith('\n'), 'every line ends');
  return stdout
    .slice(0, -1)
    .split('\n')
    .map((line, index) => {
      try {
        const value = JSON.parse(line) as unknown;
        assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), `line ${index + 1}: object`);
        return value as Record<string, unknown>;
      } catch (error) {
        assert.fail(`line ${index + 1} is not JSON (${String(error)}): ${line}`);
      }
    });
}

/** The stored events' feed numbers never go back, each id comes once, and the deltas carry no number. */
function checkOrder(events: RunEvent[]): void {
  const stored = events.filter((e): e is Extract<RunEvent, { seq: number }> => 'seq' in e);
  const seqs = stored.map((e) => e.seq);
  assert.deepEqual(
    seqs,
    [...seqs].sort((a, b) => a - b),
    'stored events in feed order',
  );
  assert.equal(new Set(stored.map((e) => e.id)).size, stored.length, 'each event once');
}

test('baton run --json --stream prints every event as one JSON line, deltas included, then the result', async () => {
  const threadId = uniqueThreadId('json');
  const run = await cli('run', 'quick_lead', 'Go.', '--thread', threadId, '--json', '--stream');
  assert.equal(run.code, 0, describeRun(run));
  assert.ok(!run.stdout.includes(ESC) && !run.stderr.includes(ESC), 'no control sequences');
  const parsed = jsonLines(run.stdout);
  const result = parsed.at(-1) ?? {};
  assert.equal(result.type, 'result');
  assert.equal(result.threadId, threadId);
  assert.equal(result.reply, 'Quick and done.');
  assert.equal(result.status, 'completed');
  assert.equal(result.workflowId, `baton/${threadId}`);
  const events = parsed.slice(0, -1) as unknown as RunEvent[];
  checkOrder(events);
  const types = new Set(events.map((e) => e.type));
  for (const type of [
    'turn_started',
    'message',
    'model_call_started',
    'delta',
    'model_call_ended',
    'assistant_message',
    'tool_call',
    'tool_result',
    'delegation_started',
    'fork_started',
    'fork_task_started',
    'fork_task_ended',
    'turn_ended',
  ]) {
    assert.ok(types.has(type as RunEvent['type']), `a ${type} event among ${[...types].join(', ')}`);
  }
  const first = events[0];
  const last = events.at(-1);
  assert.equal(first?.type, 'turn_started');
  assert.equal(first?.threadId, threadId);
  assert.equal(last?.type, 'turn_ended');
  assert.equal(last?.threadId, threadId);
  // The root's streamed text adds up to its stored reply.
  const streamed = events
    .filter((e) => e.type === 'delta' && e.threadId === threadId && e.text !== undefined)
    .map((e) => (e.type === 'delta' ? e.text : ''))
    .join('');
  assert.equal(streamed, 'Quick and done.');

  // `baton send` the same way: the events of the new turn alone, after every event of the first.
  const send = await cli('send', threadId, 'Again.', '--json', '--stream');
  assert.equal(send.code, 0, describeRun(send));
  const again = jsonLines(send.stdout);
  assert.equal(again.at(-1)?.type, 'result');
  assert.equal(again.at(-1)?.reply, 'Second turn done.');
  assert.equal(again.at(-1)?.turn, 2);
  const secondEvents = again.slice(0, -1) as unknown as RunEvent[];
  checkOrder(secondEvents);
  const lastSeqBefore = Math.max(...events.filter((e) => 'seq' in e).map((e) => (e as { seq: number }).seq));
  const firstAgain = secondEvents[0];
  assert.equal(firstAgain?.type, 'turn_started');
  assert.ok(firstAgain && 'seq' in firstAgain && firstAgain.seq > lastSeqBefore, 'only what happened after the send');

  // `--json` alone stays as it was: one JSON document (indented), the result with no type of its own.
  const plainJson = await cli('run', 'quick_lead', 'Go.', '--json');
  assert.equal(plainJson.code, 0, describeRun(plainJson));
  const document = parseJson(plainJson);
  assert.equal(document.reply, 'Quick and done.');
  assert.equal(document.type, undefined);
  assert.ok(plainJson.stdout.startsWith('{\n  "'), 'printed as before, indented');
});

test('output that is not a terminal: the reply alone as before, plain event lines with --stream, no control characters', async () => {
  const threadId = uniqueThreadId('plain');
  const plain = await cli('run', 'quick_lead', 'Go.', '--thread', threadId, '--stream');
  assert.equal(plain.code, 0, describeRun(plain));
  assert.ok(!plain.stdout.includes(ESC), `no ESC on stdout:\n${JSON.stringify(plain.stdout)}`);
  assert.ok(!plain.stderr.includes(ESC), 'no ESC on stderr');
  // eslint-disable-next-line no-control-regex
  assert.doesNotMatch(plain.stdout, /[\u0000-\u0009\u000b-\u001f\u007f]/, 'no control character but line ends');
  const out = lines(plain.stdout);
  const at = (pattern: RegExp) => {
    const index = out.findIndex((line) => pattern.test(line));
    assert.ok(index >= 0, `a line matching ${pattern}:\n${plain.stdout}`);
    return index;
  };
  const order = [
    at(/^ +\d+ quick_lead started$/),
    at(/^ +\d+ quick_lead > Go\.$/),
    at(/^ +\d+ quick_lead → think \{"thought":"Plan\."\}$/),
    at(/^ +\d+ quick_lead ← think: /),
    at(/^ +\d+ quick_lead delegates to quick_helper \(thread .+\/quick_helper-1\)$/),
    at(/^ +\d+ {3}quick_helper started \(delegated by quick_lead\)$/),
    at(/^ +\d+ {3}quick_helper Helped\.$/),
    at(/^ +\d+ quick_lead ← quick_helper: Helped\.$/),
    at(/^ +\d+ {3}quick_helper started \(fork 1 task 1\)$/),
    at(/^ +\d+ quick_lead Quick and done\.$/),
    at(/^ +\d+ quick_lead completed$/),
  ];
  assert.deepEqual(
    order,
    [...order].sort((a, b) => a - b),
    plain.stdout,
  );
  assert.deepEqual(out.slice(-3), ['', 'Quick and done.', ''], 'a blank line, then the reply');

  // Without --stream, a pipe gets exactly what it got before: the reply on stdout, the thread on stderr.
  const before = await cli('run', 'quick_lead', 'Go.');
  assert.equal(before.code, 0, describeRun(before));
  assert.equal(before.stdout, 'Quick and done.\n');
  assert.match(before.stderr, /^thread \S+\n$/);
});

test('baton run --quiet on a terminal prints exactly what it printed before: no tree, no control characters', async () => {
  const threadId = uniqueThreadId('quiet');
  // `script` runs the command on a pseudo-terminal and passes its bytes through as they are.
  const child = spawn(
    'script',
    ['-qfec', batonCommand(['run', 'quick_lead', 'Go.', '--thread', threadId, '--quiet']), '/dev/null'],
    { cwd: workDir, env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let bytes = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (bytes += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  assert.equal(code, 0, bytes);
  assert.equal(bytes, `thread ${threadId}\r\nQuick and done.\r\n[exit 0]\r\n`);

  // The same run without --quiet draws on the terminal: the check above can tell the two apart.
  const live = spawn('script', ['-qfec', batonCommand(['run', 'quick_lead', 'Go.']), '/dev/null'], {
    cwd: workDir,
    env: cliEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let drawn = '';
  live.stdout.setEncoding('utf8').on('data', (chunk: string) => (drawn += chunk));
  assert.equal(await new Promise<number | null>((resolve) => live.once('close', resolve)), 0, drawn);
  assert.ok(drawn.includes(`${ESC}[`), 'the live tree uses ANSI sequences on a terminal');
  assert.ok(drawn.endsWith('\r\nQuick and done.\r\n[exit 0]\r\n'), 'and ends with the reply as before');
});

test('baton watch attaches mid-turn, shows what happens next, and Ctrl-C detaches (exit 0) while the turn goes on', async () => {
  const threadId = uniqueThreadId('watched');
  const thread = await workers().client.startThread({ agent: 'watched', threadId });
  const reply = thread.send('Go on.');
  reply.catch(() => undefined);
  // Mid-turn: the first tool ran and the next step waits behind its gate.
  await waitFor('the held second step', () => workers().model.requestCount('watched') >= 2, { timeoutMs: 60_000 });

  const terminal = startInTerminal('watch', ['watch', threadId]);
  const describe = () => terminal.raw();
  // From the start of the feed (the default): the earlier tool call, under a root still running.
  let first = '';
  await waitFor('the earlier events', async () => (first = await terminal.screen()).includes('Before the watch.'), {
    timeoutMs: COMMAND_TIMEOUT_MS,
    describe,
  });
  assert.match(first, /^watched {2}\S (\d+m)?\d+s$/m, 'the running root, with a spinner');
  assert.ok(first.includes(`Watching thread ${threadId} (Ctrl-C to detach; nothing is stopped).`));

  // What happens while it watches shows up: the next call and its result.
  workers().model.release('watched-second');
  let later = '';
  await waitFor(
    'the later tool call and its result',
    async () => (later = await terminal.screen()).includes('While watched'),
    {
      timeoutMs: COMMAND_TIMEOUT_MS,
      describe,
    },
  );
  await waitFor('its result', async () => ((await terminal.screen()).match(/^ {2}← think: /gm) ?? []).length === 2, {
    timeoutMs: COMMAND_TIMEOUT_MS,
    describe,
  });
  assert.match(later, /^ {2}→ think \{"thought":"While watched\."\}/m);

  // Ctrl-C: the watch detaches with exit 0, the turn (still held) goes on.
  tmux('send-keys', '-t', terminal.name, 'C-c');
  await waitFor('the watch to end', () => terminal.raw().includes('[exit'), {
    timeoutMs: COMMAND_TIMEOUT_MS,
    describe,
  });
  const screen = await terminal.screen();
  assert.match(screen, /^(\^C)?Detached from thread \S+; it goes on\.$/m, screen);
  assert.ok(lines(screen).includes('[exit 0]'), screen);
  assert.equal((await thread.status()).busy, true, 'the turn still runs');
  workers().model.release('watched-final');
  assert.equal((await reply).reply, 'Watched to the end.');

  // --since: the events after a given number, and only those (JSON lines, through a pipe).
  const all: RunEvent[] = [];
  for await (const event of thread.events({ deltas: false })) {
    all.push(event);
    if (event.type === 'turn_ended' && event.threadId === threadId) break;
  }
  const stored = all.filter((e): e is Extract<RunEvent, { seq: number }> => 'seq' in e);
  const since = stored.find((e) => e.type === 'tool_result')?.seq;
  assert.ok(since !== undefined);
  const watch = startBaton(['watch', threadId, '--since', String(since), '--json', '--no-deltas'], cliEnv());
  await waitFor('the turn end in the watch', () => watch.output.stdout().includes('"turn_ended"'), {
    timeoutMs: COMMAND_TIMEOUT_MS,
    child: watch.child,
    describe: watch.output.stderr,
  });
  watch.child.kill('SIGINT');
  const ended = await watch.finished();
  assert.equal(ended.code, 0, describeRun(ended));
  assert.match(ended.stderr, /Detached from thread \S+; it goes on\.\n$/);
  const watched = jsonLines(ended.stdout) as unknown as RunEvent[];
  assert.deepEqual(
    watched.map((e) => ('id' in e ? e.id : e.type)),
    stored.filter((e) => e.seq > since).map((e) => e.id),
    'exactly the events after --since, in order',
  );
});

test('baton watch refuses an unknown thread and a delegation thread: one line, exit 1', async () => {
  const threadId = uniqueThreadId('quick');
  const run = await cli('run', 'quick_lead', 'Go.', '--thread', threadId, '--quiet');
  assert.equal(run.code, 0, describeRun(run));
  const cases: [string, string][] = [
    ['no-such-thread-here', "baton: thread 'no-such-thread-here' does not exist\n"],
    [
      `${threadId}/quick_helper-1`,
      `baton: '${threadId}/quick_helper-1' is a delegation thread; its tree is the tree of root thread '${threadId}'\n`,
    ],
  ];
  for (const [target, message] of cases) {
    const result = await cli('watch', target);
    assert.equal(result.code, 1, describeRun(result));
    assert.equal(result.stdout, '');
    assert.equal(result.stderr, message);
  }
});

test('baton watch add, list and remove: a watcher from the command line wakes for a change, and events and tree show it', async () => {
  const threadId = uniqueThreadId('cliwatch');
  const run = await cli('run', 'cli_writer', 'Get ready.', '--thread', threadId, '--quiet');
  assert.equal(run.code, 0, describeRun(run));
  const added = await cli('watch', 'add', threadId, 'cli_watcher', '--keys', 'findings/*', '--debounce', '0', '--json');
  assert.equal(added.code, 0, describeRun(added));
  const watcher = parseJson(added);
  assert.deepEqual(
    [watcher.name, watcher.agent, watcher.keys, watcher.origin, watcher.createdBy],
    ['cli_watcher', 'cli_watcher', ['findings/*'], 'run_time', 'cli'],
  );
  const again = await cli('watch', 'add', threadId, 'cli_watcher', '--keys', 'other/*');
  assert.equal(again.code, 1, describeRun(again));
  assert.match(again.stderr, /^baton: a watcher named 'cli_watcher' already watches thread/);

  assert.equal((await cli('send', threadId, 'Store it.', '--quiet')).code, 0);
  let listed = '';
  await waitFor(
    'the wake-up to finish',
    async () => {
      const list = await cli('watch', 'list', threadId);
      listed = list.stdout;
      return list.code === 0 && /cli_watcher #1 {2}completed/.test(listed);
    },
    { timeoutMs: 60_000, describe: () => listed },
  );
  assert.match(
    listed,
    /^cli_watcher {2}agent cli_watcher {2}keys findings\/\* {2}debounce 0 s {2}active {2}1 wake-up {2}\(added by cli\)/,
  );
  assert.match(listed, /findings\/x: stored as version 1 by cli_writer/);
  const json = parseJson(await cli('watch', 'list', threadId, '--json')) as {
    watchers: unknown[];
    wakeups: { changes: { key: string }[] }[];
  };
  assert.equal(json.watchers.length, 1);
  assert.deepEqual(
    json.wakeups[0]?.changes.map((change) => change.key),
    ['findings/x'],
  );

  const events = await cli('events', threadId);
  assert.equal(events.code, 0, describeRun(events));
  assert.match(
    events.stdout,
    /cli_watcher woke \(wake-up 1, depth 1\) in [^\n]+\/watch\.cli_watcher\.1\n +findings\/x: stored as version 1 by cli_writer/,
  );
  const tree = await cli('tree', threadId);
  assert.match(tree.stdout, /\[watcher cli_watcher, wake-up 1\] cli_watcher {2}completed/);

  const removed = await cli('watch', 'remove', threadId, 'cli_watcher');
  assert.equal(removed.code, 0, describeRun(removed));
  assert.equal(removed.stdout, `watcher cli_watcher removed from ${threadId}\n`);
  const missing = await cli('watch', 'remove', threadId, 'nobody');
  assert.equal(missing.code, 1);
  assert.equal(missing.stderr, `baton: no watcher named 'nobody' in thread '${threadId}'\n`);
  // A thread named like a subcommand is watched after `--`.
  const named = await cli('watch', '--', 'list');
  assert.equal(named.code, 1);
  assert.equal(named.stderr, "baton: thread 'list' does not exist\n");
});
