/**
 * What `baton run`, `send` and `watch` draw of a run feed (`cli/run-tree.ts`), from events as the feed delivers them:
 * the tree under the callers, streamed text replaced by the stored reply where it stood, a retried stream dropped,
 * stored text that cannot move the cursor, and lines that fit the terminal.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RunTree, cutToWidth, displayWidth, plainEventLine, renderRunTree, wrapToWidth } from '../../cli/run-tree';
import type { RunEvent, StoredRunEvent } from '../../common/run-events';

const ROOT = 'r1';
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
let seq = 0;

/** A stored event of `thread`, committed `ms` after T0. */
function stored(thread: string, agent: string, ms: number, event: Record<string, unknown>): StoredRunEvent {
  seq += 1;
  return {
    seq,
    id: String(seq),
    threadId: thread,
    agent,
    at: new Date(T0 + ms).toISOString(),
    ...event,
  } as StoredRunEvent;
}

function delta(thread: string, agent: string, stream: string, text: string, part: number): RunEvent {
  return { type: 'delta', threadId: thread, agent, stream, step: 0, attempt: 1, part, text };
}

const render = (tree: RunTree, width = 80, spinner?: string) =>
  renderRunTree(tree, { width, now: T0 + 5_000, ...(spinner === undefined ? {} : { spinner }) });

test('a delegation and a fork task hang under their caller; streamed text is replaced by the stored reply', () => {
  const tree = new RunTree(ROOT, 'lead');
  const events: RunEvent[] = [
    stored(ROOT, 'lead', 0, { type: 'turn_started' }),
    stored(ROOT, 'lead', 0, { type: 'message', content: 'Go.' }),
    stored(ROOT, 'lead', 10, { type: 'tool_call', toolCallId: 'c1', name: 'helper', arguments: '{"message":"Help."}' }),
    stored(ROOT, 'lead', 20, {
      type: 'delegation_started',
      childThread: `${ROOT}/helper-1`,
      childAgent: 'helper',
      number: 1,
      mode: 'new',
      workflowId: 'w',
      message: 'Help.',
    }),
    stored(`${ROOT}/helper-1`, 'helper', 30, { type: 'turn_started', parentThread: ROOT, caller: 'lead' }),
    delta(`${ROOT}/helper-1`, 'helper', 'op1#1', 'Helping ', 0),
    delta(`${ROOT}/helper-1`, 'helper', 'op1#1', 'now', 1),
  ];
  for (const event of events) tree.apply(event);
  assert.deepEqual(render(tree, 80, '*'), [
    'lead  * 5s',
    '  > Go.',
    '  → helper {"message":"Help."} *',
    '  helper  * 4s',
    '    Helping now',
  ]);

  for (const event of [
    stored(`${ROOT}/helper-1`, 'helper', 900, { type: 'model_call_ended', operationId: 'op1' }),
    stored(`${ROOT}/helper-1`, 'helper', 900, { type: 'assistant_message', operationId: 'op1', content: 'Helped.' }),
    stored(`${ROOT}/helper-1`, 'helper', 1030, { type: 'turn_ended', status: 'completed', parentThread: ROOT }),
    stored(ROOT, 'lead', 1040, {
      type: 'tool_result',
      toolCallId: 'c1',
      name: 'helper',
      content: 'Helped.',
      error: false,
    }),
    stored(ROOT, 'lead', 1100, { type: 'fork_started', fork: 1, store: 'isolated', prefix: 'fork/1', maxParallel: 4 }),
    stored(`${ROOT}/checker-1`, 'checker', 1200, { type: 'fork_task_started', fork: 1, task: 1, workflowId: 'w' }),
    stored(`${ROOT}/checker-1`, 'checker', 1200, {
      type: 'turn_started',
      parentThread: ROOT,
      forkTask: 'fork 1 task 1',
    }),
    stored(`${ROOT}/checker-1`, 'checker', 1300, {
      type: 'turn_ended',
      status: 'failed',
      error: 'Model.ScriptExhausted',
      forkTask: 'fork 1 task 1',
    }),
  ]) {
    tree.apply(event);
  }
  assert.deepEqual(render(tree, 80, '*'), [
    'lead  * 5s',
    '  > Go.',
    '  → helper {"message":"Help."}',
    '  helper  ✓ 1.0s',
    '    Helped.',
    '  ← helper: Helped.',
    '  checker (fork 1 task 1)  ✗ failed 100ms: Model.ScriptExhausted',
  ]);
  // Printed for good (no spinner): what still runs says so in words.
  assert.equal(render(tree)[0], 'lead  running 5s');
});

test('a retried stream is dropped, and a thread whose start was not read hangs under the root', () => {
  const tree = new RunTree(ROOT, 'lead');
  tree.apply(stored(ROOT, 'lead', 0, { type: 'turn_started' }));
  tree.apply(delta(ROOT, 'lead', 'op#1', 'first try', 0));
  tree.apply({ type: 'stream_abandoned', threadId: ROOT, stream: 'op#1', reason: 'retried' });
  tree.apply(delta(ROOT, 'lead', 'op#2', 'second try', 0));
  tree.apply(delta(`${ROOT}/late-3`, 'late', 'op9#1', 'already running', 4));
  assert.deepEqual(render(tree, 80, '*'), ['lead  * 5s', '  second try', '  late', '    already running']);
});

test('stored text cannot move the cursor: control characters are replaced, on the tree and on plain lines', () => {
  const tree = new RunTree(ROOT, 'lead');
  const evil = 'ok\x1b[2J\x1b]0;title\x07\r\nnext\tline';
  const events = [
    stored(ROOT, 'lead', 0, { type: 'turn_started' }),
    stored(ROOT, 'lead', 10, { type: 'assistant_message', operationId: 'op', content: evil }),
    stored(ROOT, 'lead', 10, { type: 'tool_call', toolCallId: 'c', name: 'shell', arguments: evil }),
    stored(ROOT, 'lead', 20, { type: 'tool_result', toolCallId: 'c', content: evil, error: true }),
  ];
  const plain: string[] = [];
  for (const event of events) {
    tree.apply(event);
    plain.push(plainEventLine(tree, event) ?? '');
  }
  const drawn = render(tree).join('\n');
  // eslint-disable-next-line no-control-regex
  const control = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
  assert.doesNotMatch(drawn, control);
  assert.doesNotMatch(plain.join('\n'), control);
  assert.match(drawn, /^ {2}ok\uFFFD\[2J\uFFFD\]0;title\uFFFD$/m);
  assert.match(drawn, /^ {2}next {2}line$/m);
  assert.match(drawn, /^ {2}← shell: ok\uFFFD\[2J\uFFFD\]0;title\uFFFD next line$/m, 'a result on one line');
  const [, reply, call, result] = events.map((e) => String(e.seq).padStart(5));
  assert.deepEqual(plain.slice(1), [
    `${reply} lead ok\uFFFD[2J\uFFFD]0;title\uFFFD\n        next  line`,
    `${call} lead → shell ok\uFFFD[2J\uFFFD]0;title\uFFFD next line`,
    `${result} lead ← shell: ok\uFFFD[2J\uFFFD]0;title\uFFFD next line`,
  ]);
});

test('lines fit the terminal: cut with … or wrapped at spaces, wide characters counted twice', () => {
  assert.equal(displayWidth('日本'), 4);
  assert.equal(cutToWidth('abcdefgh', 5), 'abcd…');
  assert.equal(cutToWidth('日本語です', 5), '日本…');
  assert.deepEqual(wrapToWidth('one two three four', 9), ['one two', 'three', 'four']);
  assert.deepEqual(wrapToWidth('abcdefghijkl', 5), ['abcde', 'fghij', 'kl']);

  const tree = new RunTree(ROOT, 'lead');
  tree.apply(stored(ROOT, 'lead', 0, { type: 'turn_started' }));
  tree.apply(
    stored(ROOT, 'lead', 1, { type: 'tool_call', toolCallId: 'c', name: 'shell', arguments: 'x'.repeat(200) }),
  );
  tree.apply(stored(ROOT, 'lead', 2, { type: 'assistant_message', operationId: 'o', content: 'word '.repeat(200) }));
  const lines = render(tree, 40, '*');
  for (const line of lines) assert.ok(displayWidth(line) <= 39, `at most 39 columns: '${line}'`);
  assert.match(lines[1] ?? '', /^ {2}→ shell x+… \*$/, 'the running call is cut before its spinner');
  assert.equal(lines.at(-1), '  … (21 more lines)', 'a long text shows its first lines');
});

test('a watcher wake-up hangs under the root, marked, with the changes that woke it; its pause is a line of the root', () => {
  const tree = new RunTree(ROOT, 'lead');
  const wake = `${ROOT}/watch.reviewer.1`;
  const change = {
    seq: 3,
    key: 'findings/a',
    action: 'stored',
    oldVersion: null,
    newVersion: 1,
    writer: { agent: 'finder', thread: `${ROOT}/finder-1` },
    at: 'T',
  };
  const events: StoredRunEvent[] = [
    stored(ROOT, 'lead', 0, { type: 'turn_started' }),
    stored(ROOT, 'lead', 5, { type: 'turn_ended', status: 'completed' }),
    stored(wake, '', 10, {
      type: 'watch_woke',
      agent: null,
      watcher: 'reviewer',
      wakeup: 1,
      depth: 1,
      changes: [change],
      workflowId: `baton/${wake}`,
    }),
    stored(wake, 'reviewer', 20, { type: 'turn_started', parentThread: ROOT }),
    stored(wake, 'reviewer', 30, { type: 'turn_ended', status: 'completed', parentThread: ROOT }),
    stored(ROOT, 'reviewer', 40, {
      type: 'watcher_changed',
      watcher: 'reviewer',
      state: 'paused',
      keys: ['findings/*'],
      reason: '60 wake-ups in the last hour',
      until: '2026-01-01T01:00:00.000Z',
    }),
  ];
  for (const event of events) tree.apply(event);
  const lines = render(tree, 120);
  const at = lines.findIndex((line) => line.includes('watcher reviewer, wake-up 1'));
  assert.ok(at > 0, `the wake-up is drawn: ${lines.join('\n')}`);
  assert.ok(lines[at]?.startsWith('  '), 'under the root');
  assert.ok(
    lines.some((line) =>
      line.includes('watcher reviewer woke (wake-up 1, depth 1): findings/a: stored as version 1 by finder'),
    ),
  );
  assert.ok(lines.some((line) => line.includes('watcher reviewer paused until 2026-01-01T01:00:00.000Z: 60 wake-ups')));
  assert.match(
    plainEventLine(tree, events[2] as StoredRunEvent) ?? '',
    /watcher reviewer woke \(wake-up 1, depth 1\): findings\/a: stored as version 1 by finder$/,
  );
});
