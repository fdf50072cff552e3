/**
 * The run feed's pure parts: what each feed row means (`runEventsOf`), which streams a reader is told to drop
 * (`StreamTracker`), reading a delta notification (`parseDeltaAnnouncement`), cutting a batch to fit one
 * notification (`splitDelta`), gathering a streamed reply into numbered batches (`DeltaPublisher`, against a
 * pool that records what it is asked), and batching the announcements of stored events (`announceRunEvents`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pool, QueryConfig, QueryResult } from 'pg';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { DeltaPublisher, type DeltaStream } from '../../activities/model-stream';
import {
  MAX_DELTA_PAYLOAD_BYTES,
  runDeltasChannel,
  runEventsChannel,
  MAX_TRACKED_STREAMS,
  StreamTracker,
  parseDeltaAnnouncement,
  runEventsOf,
  type DeltaAnnouncement,
  type RunFeedRow,
  type StoredRunEvent,
} from '../../common/run-events';
import { announceRunEvents, splitDelta } from '../../db/run-events';

const AT = new Date('2030-01-31T09:00:00.000Z');

function row(kind: string, data: Record<string, unknown>, fields: Partial<RunFeedRow> = {}): RunFeedRow {
  return { seq: 7, threadId: 'root', agent: 'lead', kind, data, createdAt: AT, ...fields };
}

/** What every event of `row(…)` carries, for the n-th event of the row. */
const base = (n = 0, threadId = 'root', agent: string | null = 'lead') => ({
  seq: 7,
  id: n === 0 ? '7' : `7.${n}`,
  threadId,
  agent,
  at: AT.toISOString(),
});

test('runEventsOf: a turn starts and ends; a delegated turn’s end is also its caller’s delegation_ended', () => {
  assert.deepEqual(runEventsOf(row('turn_started', {})), [{ ...base(), type: 'turn_started' }]);
  const child = { threadId: 'root/helper-1', agent: 'helper' };
  assert.deepEqual(runEventsOf(row('turn_started', { parentThread: 'root', caller: 'lead' }, child)), [
    { ...base(0, 'root/helper-1', 'helper'), type: 'turn_started', parentThread: 'root', caller: 'lead' },
  ]);
  assert.deepEqual(runEventsOf(row('turn_ended', { status: 'completed' })), [
    { ...base(), type: 'turn_ended', status: 'completed' },
  ]);
  assert.deepEqual(
    runEventsOf(row('turn_ended', { status: 'failed', error: 'boom', parentThread: 'root', caller: 'lead' }, child)),
    [
      {
        ...base(0, 'root/helper-1', 'helper'),
        type: 'turn_ended',
        status: 'failed',
        error: 'boom',
        parentThread: 'root',
      },
      // On the caller's thread, under the caller's name, like its delegation_started.
      {
        ...base(1, 'root', 'lead'),
        type: 'delegation_ended',
        childThread: 'root/helper-1',
        status: 'failed',
        error: 'boom',
      },
    ],
  );
  // A fork task's end is told by its fork_task_ended row, not as a delegation.
  assert.deepEqual(
    runEventsOf(
      row('turn_ended', { status: 'reclaimed', parentThread: 'root', caller: 'lead', forkTask: 'f1/t2' }, child),
    ),
    [
      {
        ...base(0, 'root/helper-1', 'helper'),
        type: 'turn_ended',
        status: 'reclaimed',
        parentThread: 'root',
        forkTask: 'f1/t2',
      },
    ],
  );
});

test('runEventsOf: a stored reply is its model call’s end, its text and its tool calls, numbered seq, seq.1, …', () => {
  const usage = { promptTokens: 10, completionTokens: 2, totalTokens: 12 };
  const events = runEventsOf(
    row('assistant_message', {
      operationId: 'op:model:0',
      content: 'Let me wait.',
      usage,
      provider: 'default',
      model: 'm',
      messageSeq: 3,
      toolCalls: [
        { id: 'c1', name: 'think', arguments: '{"thought":"x"}' },
        { id: 'c2', name: 'wait', arguments: '{"seconds":5}' },
      ],
    }),
  );
  assert.deepEqual(events, [
    { ...base(0), type: 'model_call_ended', operationId: 'op:model:0', usage, provider: 'default', model: 'm' },
    { ...base(1), type: 'assistant_message', operationId: 'op:model:0', content: 'Let me wait.' },
    { ...base(2), type: 'tool_call', toolCallId: 'c1', name: 'think', arguments: '{"thought":"x"}' },
    { ...base(3), type: 'tool_call', toolCallId: 'c2', name: 'wait', arguments: '{"seconds":5}' },
    { ...base(4), type: 'wait_started', toolCallId: 'c2', arguments: '{"seconds":5}' },
  ]);
  // A reply with tool calls only has no text event; one without usage (an endpoint that sent none) has none.
  assert.deepEqual(
    runEventsOf(
      row('assistant_message', { operationId: 'op', content: '', toolCalls: [{ id: 'c', name: 'n', arguments: '' }] }),
    ).map((event) => event.type),
    ['model_call_ended', 'tool_call'],
  );
  assert.deepEqual(runEventsOf(row('assistant_message', { operationId: 'op' })), [
    { ...base(), type: 'model_call_ended', operationId: 'op' },
  ]);
});

test('runEventsOf: messages, tool results and waits ending', () => {
  assert.deepEqual(runEventsOf(row('message', { content: 'Go.', messageSeq: 1 })), [
    { ...base(), type: 'message', content: 'Go.' },
  ]);
  assert.deepEqual(runEventsOf(row('tool_result', { toolCallId: 'c1', name: 'think', content: 'ok', error: false })), [
    { ...base(), type: 'tool_result', toolCallId: 'c1', name: 'think', content: 'ok', error: false },
  ]);
  assert.deepEqual(runEventsOf(row('tool_result', { toolCallId: 'c2', name: 'wait', content: 'Waited.' })), [
    { ...base(0), type: 'tool_result', toolCallId: 'c2', name: 'wait', content: 'Waited.', error: false },
    { ...base(1), type: 'wait_ended', toolCallId: 'c2', content: 'Waited.' },
  ]);
  // A result whose call is not found has no name; an `Error:` result is marked.
  assert.deepEqual(runEventsOf(row('tool_result', { toolCallId: 'c3', content: 'Error: no', error: true })), [
    { ...base(), type: 'tool_result', toolCallId: 'c3', content: 'Error: no', error: true },
  ]);
});

test('runEventsOf: model calls starting, with their stream', () => {
  const data = { operationId: 'op:model:2', step: 2, attempt: 3, stream: 'op:model:2#3', streaming: true };
  assert.deepEqual(runEventsOf(row('model_call_started', { ...data, provider: 'p', model: 'm' })), [
    { ...base(), type: 'model_call_started', ...data, provider: 'p', model: 'm' },
  ]);
  // Numbers stored as text are numbers; anything but `true` is not streaming.
  const [event] = runEventsOf(row('model_call_started', { ...data, step: '2', attempt: '3', streaming: 'yes' }));
  assert.deepEqual(event, { ...base(), type: 'model_call_started', ...data, streaming: false });
});

test('runEventsOf: delegations, forks and fork tasks', () => {
  assert.deepEqual(
    runEventsOf(
      row('delegation_started', {
        thread: 'root/helper-1',
        agent: 'helper',
        number: 1,
        mode: 'new',
        workflowId: 'baton/root/helper-1',
        message: 'Help.',
      }),
    ),
    [
      {
        ...base(),
        type: 'delegation_started',
        childThread: 'root/helper-1',
        childAgent: 'helper',
        number: 1,
        mode: 'new',
        workflowId: 'baton/root/helper-1',
        message: 'Help.',
      },
    ],
  );
  assert.deepEqual(
    runEventsOf(row('fork_started', { fork: 1, store: 'isolated', prefix: 'f1', maxParallel: 4, deadlineAt: 'x' })),
    [{ ...base(), type: 'fork_started', fork: 1, store: 'isolated', prefix: 'f1', maxParallel: 4 }],
  );
  assert.deepEqual(runEventsOf(row('fork_ended', { fork: 1, status: 'partial' })), [
    { ...base(), type: 'fork_ended', fork: 1, status: 'partial' },
  ]);
  const task = { threadId: 'root/helper-2', agent: 'helper' };
  assert.deepEqual(runEventsOf(row('fork_task_started', { fork: 1, task: 2, workflowId: 'w' }, task)), [
    { ...base(0, 'root/helper-2', 'helper'), type: 'fork_task_started', fork: 1, task: 2, workflowId: 'w' },
  ]);
  assert.deepEqual(
    runEventsOf(row('fork_task_ended', { fork: 1, task: 2, status: 'timeout', error: 'late', reclaimed: true }, task)),
    [
      {
        ...base(0, 'root/helper-2', 'helper'),
        type: 'fork_task_ended',
        fork: 1,
        task: 2,
        status: 'timeout',
        error: 'late',
        reclaimed: true,
      },
    ],
  );
  assert.equal(
    (runEventsOf(row('fork_task_ended', { fork: 1, task: 1, status: 'success' }))[0] as { reclaimed: boolean })
      .reclaimed,
    false,
  );
});

test('runEventsOf: questions, approvals, env data and refused writes', () => {
  assert.deepEqual(runEventsOf(row('question_asked', { questionId: 'q1', question: 'Which?', expiresAt: 'T' })), [
    { ...base(), type: 'question_asked', questionId: 'q1', question: 'Which?', expiresAt: 'T' },
  ]);
  assert.deepEqual(runEventsOf(row('question_closed', { questionId: 'q1', status: 'answered', answer: 'Blue.' })), [
    { ...base(), type: 'question_closed', questionId: 'q1', status: 'answered', answer: 'Blue.' },
  ]);
  assert.deepEqual(
    runEventsOf(row('question_closed', { questionId: 'q1', status: 'cancelled', reason: 'its turn failed' })),
    [{ ...base(), type: 'question_closed', questionId: 'q1', status: 'cancelled', reason: 'its turn failed' }],
  );
  assert.deepEqual(
    runEventsOf(row('approval_requested', { approvalId: 'a1', tool: 'deploy', toolCallId: 'c1', arguments: '{}' })),
    [{ ...base(), type: 'approval_requested', approvalId: 'a1', tool: 'deploy', toolCallId: 'c1', arguments: '{}' }],
  );
  assert.deepEqual(
    runEventsOf(
      row('approval_decided', { approvalId: 'a1', tool: 'deploy', status: 'rejected', decidedBy: 'bob', reason: 'no' }),
    ),
    [
      {
        ...base(),
        type: 'approval_decided',
        approvalId: 'a1',
        tool: 'deploy',
        status: 'rejected',
        decidedBy: 'bob',
        reason: 'no',
      },
    ],
  );
  assert.deepEqual(
    runEventsOf(
      row('env_written', { key: 'k', scope: 'root', action: 'stored', version: 2, valueSize: 10, operationId: 'op' }),
    ),
    [{ ...base(), type: 'env_written', key: 'k', scope: 'root', action: 'stored', version: 2, valueSize: 10 }],
  );
  assert.deepEqual(
    runEventsOf(
      row('env_refused', { key: 'k', scope: 'root', action: 'rejected', reason: 'stale', refusalType: 'Env.Stale' }),
    ),
    [{ ...base(), type: 'env_refused', key: 'k', scope: 'root', reason: 'stale', refusalType: 'Env.Stale' }],
  );
  assert.deepEqual(
    runEventsOf(
      row('write_refused', {
        write: 'transcript',
        operationId: 'op',
        writeEpoch: 0,
        currentEpoch: 1,
        detail: 'late reply',
      }),
    ),
    [
      {
        ...base(),
        type: 'write_refused',
        write: 'transcript',
        operationId: 'op',
        writeEpoch: 0,
        currentEpoch: 1,
        detail: 'late reply',
      },
    ],
  );
});

test('runEventsOf: an unknown kind is skipped; absent fields stay absent; a time already text is kept', () => {
  assert.deepEqual(runEventsOf(row('from_a_newer_baton', { anything: 1 })), []);
  const [event] = runEventsOf(row('turn_started', { parentThread: null, caller: 7 }));
  assert.deepEqual(Object.keys(event ?? {}).sort(), ['agent', 'at', 'id', 'seq', 'threadId', 'type']);
  const [textual] = runEventsOf(
    row('message', { content: 'x' }, { createdAt: '2030-01-31 09:00:00+00' as unknown as Date, agent: null }),
  );
  assert.equal(textual?.at, '2030-01-31 09:00:00+00');
  assert.equal(textual?.agent, null);
});

/** A stored event of the tracker's kinds. */
function started(operationId: string, attempt: number, threadId = 'root'): StoredRunEvent {
  return {
    ...base(0, threadId),
    type: 'model_call_started',
    operationId,
    step: 0,
    attempt,
    stream: `${operationId}#${attempt}`,
    streaming: true,
  };
}
const ended = (operationId: string, threadId = 'root'): StoredRunEvent => ({
  ...base(0, threadId),
  type: 'model_call_ended',
  operationId,
});
const turnEnded = (threadId: string): StoredRunEvent => ({ ...base(0, threadId), type: 'turn_ended', status: 'x' });
const delta = (stream: string, threadId = 'root'): DeltaAnnouncement => ({
  rootThreadId: 'root',
  threadId,
  agent: 'lead',
  stream,
  step: 0,
  attempt: 1,
  part: 0,
  text: 'x',
});

test('StreamTracker: a retried attempt abandons the stream before it; deltas of the old stream are dropped', () => {
  const tracker = new StreamTracker();
  assert.ok(tracker.accepts(delta('op#1')), 'a stream not started yet (or started before since) is shown');
  const first = started('op', 1);
  assert.deepEqual(tracker.onStored(first), [first]);
  assert.ok(tracker.accepts(delta('op#1')));
  const second = started('op', 2);
  assert.deepEqual(tracker.onStored(second), [
    { type: 'stream_abandoned', threadId: 'root', stream: 'op#1', reason: 'retried' },
    second,
  ]);
  assert.equal(tracker.accepts(delta('op#1')), false, 'a late delta of the abandoned stream');
  assert.ok(tracker.accepts(delta('op#2')));
  // The same start read twice (it never is, but a tracker must not abandon a stream for itself).
  assert.deepEqual(tracker.onStored(second), [second]);
  // Its reply ends the stream: nothing is abandoned, and late deltas of it are dropped.
  const end = ended('op');
  assert.deepEqual(tracker.onStored(end), [end]);
  assert.equal(tracker.accepts(delta('op#2')), false);
  assert.deepEqual(tracker.onStored(turnEnded('root')), [turnEnded('root')]);
});

test('StreamTracker: a turn that ends with its call open abandons that call’s stream, and only its thread’s', () => {
  const tracker = new StreamTracker();
  tracker.onStored(started('a', 1, 'root/helper-1'));
  tracker.onStored(started('b', 1, 'root/helper-2'));
  tracker.onStored(started('c', 2, 'root/helper-1'));
  assert.deepEqual(tracker.onStored(turnEnded('root/helper-1')), [
    { type: 'stream_abandoned', threadId: 'root/helper-1', stream: 'a#1', reason: 'turn_ended' },
    { type: 'stream_abandoned', threadId: 'root/helper-1', stream: 'c#2', reason: 'turn_ended' },
    turnEnded('root/helper-1'),
  ]);
  assert.equal(tracker.accepts(delta('a#1', 'root/helper-1')), false);
  assert.ok(tracker.accepts(delta('b#1', 'root/helper-2')), 'the other thread streams on');
  // Told once: the turn's end read again abandons nothing more, and the other stream ends normally.
  assert.deepEqual(tracker.onStored(turnEnded('root/helper-1')), [turnEnded('root/helper-1')]);
  assert.deepEqual(tracker.onStored(ended('b', 'root/helper-2')), [ended('b', 'root/helper-2')]);
  assert.deepEqual(tracker.onStored(turnEnded('root/helper-2')), [turnEnded('root/helper-2')]);
});

test('StreamTracker: a stream known only from its deltas is adopted, and ends, or is abandoned, like any other', () => {
  const retried = new StreamTracker();
  assert.equal(retried.knows('op#1'), false);
  retried.adopt(delta('op#1'));
  assert.ok(retried.knows('op#1'));
  assert.ok(retried.accepts(delta('op#1')));
  const second = started('op', 2);
  assert.deepEqual(retried.onStored(second), [
    { type: 'stream_abandoned', threadId: 'root', stream: 'op#1', reason: 'retried' },
    second,
  ]);
  assert.equal(retried.accepts(delta('op#1')), false);
  // Adopting again changes nothing: the stream stays abandoned.
  retried.adopt(delta('op#1'));
  assert.equal(retried.accepts(delta('op#1')), false);

  // A delta of an older attempt than the one open is dropped.
  const older = new StreamTracker();
  older.onStored(started('op', 2));
  older.adopt(delta('op#1'));
  assert.ok(older.knows('op#1'));
  assert.equal(older.accepts(delta('op#1')), false);
  assert.ok(older.accepts(delta('op#2')));

  const cutOff = new StreamTracker();
  cutOff.adopt(delta('a#b#1', 'root/helper-1'));
  assert.deepEqual(cutOff.onStored(turnEnded('root/helper-1')), [
    { type: 'stream_abandoned', threadId: 'root/helper-1', stream: 'a#b#1', reason: 'turn_ended' },
    turnEnded('root/helper-1'),
  ]);

  // Its reply ends it (the operation id is what comes before the last '#').
  const finished = new StreamTracker();
  finished.adopt(delta('a#b#1'));
  assert.deepEqual(finished.onStored(ended('a#b')), [ended('a#b')]);
  assert.equal(finished.accepts(delta('a#b#1')), false);
  assert.deepEqual(finished.onStored(turnEnded('root')), [turnEnded('root')]);
});

test('StreamTracker: a delta that comes after its call’s reply, its start never read, is dropped, not adopted', () => {
  // The reader began after the call started; the delta was held until a catch-up, which read the stored reply first.
  const tracker = new StreamTracker();
  assert.deepEqual(tracker.onStored(ended('op')), [ended('op')]);
  assert.ok(tracker.knows('op#1'), 'its call has replied: there is nothing to wait for');
  tracker.adopt(delta('op#1'));
  assert.equal(tracker.accepts(delta('op#1')), false);
  assert.equal(tracker.accepts(delta('op#2')), false, 'nor a stream of another attempt of the replied call');
  assert.ok(tracker.accepts(delta('other#1')), 'another call streams on');
  assert.deepEqual(tracker.onStored(turnEnded('root')), [turnEnded('root')], 'nothing open to abandon');
});

test('StreamTracker: a long feed keeps what it remembers bounded; recent streams are still told apart', () => {
  const tracker = new StreamTracker();
  const largest = () =>
    Math.max(
      ...Object.values(tracker).map((field: unknown) =>
        field instanceof Map || field instanceof Set ? field.size : Array.isArray(field) ? field.length : 0,
      ),
    );
  let abandoned = 0;
  // 30,000 model calls across 30 threads: every third retried once, every seventh cut off by its turn's end, every
  // eleventh known only from its deltas (its start came before the reader's since).
  for (let call = 0; call < 30_000; call++) {
    const op = `run:model:${call}`;
    const thread = `root/helper-${call % 30}`;
    const cutOff = call % 7 === 3;
    if (call % 11 === 5) tracker.adopt(delta(`${op}#1`, thread));
    else assert.deepEqual(tracker.onStored(started(op, 1, thread)), [started(op, 1, thread)]);
    assert.ok(tracker.accepts(delta(`${op}#1`, thread)), `${op}: its stream is shown while it runs`);
    let attempt = 1;
    if (call % 3 === 0) {
      attempt = 2;
      const out = tracker.onStored(started(op, 2, thread));
      assert.deepEqual(out.at(-1), started(op, 2, thread));
      assert.deepEqual(out.slice(0, -1), [
        { type: 'stream_abandoned', threadId: thread, stream: `${op}#1`, reason: 'retried' },
      ]);
      abandoned += 1;
    }
    const end = cutOff ? turnEnded(thread) : ended(op, thread);
    const out = tracker.onStored(end);
    assert.deepEqual(out.at(-1), end, 'the event itself comes last, once');
    abandoned += out.length - 1;
    assert.deepEqual(
      out.slice(0, -1).map((event) => event.type === 'stream_abandoned' && event.stream),
      cutOff ? [`${op}#${attempt}`] : [],
    );
    assert.equal(tracker.accepts(delta(`${op}#${attempt}`, thread)), false, `${op}: a late delta is dropped`);
    assert.ok(largest() <= MAX_TRACKED_STREAMS, `after ${call + 1} calls the tracker holds ${largest()} of one kind`);
  }
  assert.equal(abandoned, 10_000 + Math.ceil((30_000 - 3) / 7));
  // The most recent streams that ended are still known: their late deltas are dropped, not adopted.
  for (let call = 30_000 - MAX_TRACKED_STREAMS / 4; call < 30_000; call++) {
    const op = `run:model:${call}`;
    assert.ok(tracker.knows(`${op}#1`) || call % 7 === 3, `${op} is still known`);
    assert.equal(tracker.accepts(delta(`${op}#1`)), false);
  }
});

test('run feed channels: one pair per root, the same for every process, within a channel name’s 63 bytes', () => {
  const roots = ['a', 'b', 'feed-0123abcd', 'x'.repeat(64), 'ünïcødé'];
  const names = roots.flatMap((root) => [runEventsChannel(root), runDeltasChannel(root)]);
  assert.equal(new Set(names).size, names.length, 'no two roots (or the two kinds) share a channel');
  for (const name of names) assert.match(name, /^baton_[a-z]+_[0-9a-f]{16}$/);
  assert.ok(names.every((name) => Buffer.byteLength(name) <= 63));
  assert.equal(runDeltasChannel('feed-0123abcd'), runDeltasChannel('feed-0123abcd'));
});

test('parseDeltaAnnouncement: a batch of the deltas channel, and nothing else', () => {
  const batch = delta('op#1');
  assert.deepEqual(parseDeltaAnnouncement(JSON.stringify(batch)), batch);
  const { text: _text, ...calls } = { ...batch, toolCalls: [{ index: 0, id: 'c', name: 'think' }] };
  assert.deepEqual(parseDeltaAnnouncement(JSON.stringify(calls)), calls);
  for (const payload of [
    undefined,
    '',
    'not json',
    'null',
    '42',
    '[]',
    JSON.stringify({ rootThreadId: 'root' }),
    JSON.stringify({ ...batch, part: '0' }),
    JSON.stringify({ ...batch, stream: 1 }),
    JSON.stringify({ ...batch, threadId: undefined }),
    JSON.stringify({ ...batch, rootThreadId: null }),
  ]) {
    assert.equal(parseDeltaAnnouncement(payload), undefined, String(payload));
  }
});

type Unnumbered = Omit<DeltaAnnouncement, 'part'>;
const target: DeltaStream = {
  rootThreadId: 'root-0123456789',
  threadId: 'root-0123456789/planner-1/worker-12',
  agent: 'worker',
  stream: '01a21496-2e19-77e2-a859-1234078ed203:model:12#3',
  step: 12,
  attempt: 3,
};
const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');
/** A lone half of a surrogate pair: a character cut in two. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The text of pieces and each call's id, name and arguments, joined back per index. */
function joined(pieces: readonly Unnumbered[]) {
  const calls = new Map<number, { id?: string; name?: string; arguments: string }>();
  for (const call of pieces.flatMap((piece) => piece.toolCalls ?? [])) {
    const entry = calls.get(call.index) ?? { arguments: '' };
    if (call.id !== undefined) entry.id = call.id;
    if (call.name !== undefined) entry.name = call.name;
    entry.arguments += call.arguments ?? '';
    calls.set(call.index, entry);
  }
  return { text: pieces.map((piece) => piece.text ?? '').join(''), calls: Object.fromEntries(calls) };
}

test('splitDelta: a batch that fits is sent as it is', () => {
  const batch: Unnumbered = { ...target, text: 'Hello', toolCalls: [{ index: 0, id: 'c', name: 'think' }] };
  assert.deepEqual(splitDelta(batch), [batch]);
  const justFits = { ...target, text: 'x'.repeat(MAX_DELTA_PAYLOAD_BYTES - bytes({ ...target, text: '' })) };
  assert.equal(bytes(justFits), MAX_DELTA_PAYLOAD_BYTES);
  assert.deepEqual(splitDelta(justFits), [justFits]);
});

test('splitDelta: text over the limit is cut into pieces that fit, between characters, adding up', () => {
  for (const unit of ['a', 'é', '漢', '🎉', '\u0001', '"', '👩‍👩‍👧']) {
    const text = `${unit.repeat(8000)}end`;
    const batch: Unnumbered = { ...target, text };
    const pieces = splitDelta(batch);
    assert.ok(pieces.length > 1, `${JSON.stringify(unit)}: ${bytes(batch)} bytes need several notifications`);
    for (const piece of pieces) {
      assert.ok(bytes(piece) <= MAX_DELTA_PAYLOAD_BYTES, `${JSON.stringify(unit)}: a piece of ${bytes(piece)} bytes`);
      assert.doesNotMatch(piece.text ?? '', LONE_SURROGATE, 'no character cut in half');
      assert.deepEqual({ ...piece, text: undefined }, { ...target, text: undefined }, 'each piece keeps its tags');
      assert.equal(piece.toolCalls, undefined);
    }
    assert.equal(joined(pieces).text, text);
  }
});

test('splitDelta: long tool call arguments are cut the same way; id and name stay with the first piece', () => {
  const longArgs = JSON.stringify({ thought: 'ünïcødé 漢字 🎉 '.repeat(800) });
  const batch: Unnumbered = {
    ...target,
    text: 'Calling: ',
    toolCalls: [
      { index: 0, id: 'call_0', name: 'think', arguments: longArgs },
      { index: 1, id: 'call_1', name: 'list_env_data' },
      { index: 2, arguments: '"}' },
    ],
  };
  const pieces = splitDelta(batch);
  for (const piece of pieces) {
    assert.ok(bytes(piece) <= MAX_DELTA_PAYLOAD_BYTES, `a piece of ${bytes(piece)} bytes`);
    assert.ok(piece.text === undefined || piece.toolCalls === undefined, 'text and calls in pieces of their own');
    assert.ok((piece.toolCalls?.length ?? 0) <= 1);
    for (const call of piece.toolCalls ?? []) assert.doesNotMatch(call.arguments ?? '', LONE_SURROGATE);
  }
  const firstOfCall0 = pieces.find((piece) => piece.toolCalls?.[0]?.index === 0);
  assert.deepEqual(
    { id: firstOfCall0?.toolCalls?.[0]?.id, name: firstOfCall0?.toolCalls?.[0]?.name },
    { id: 'call_0', name: 'think' },
  );
  const laterOfCall0 = pieces.filter((piece) => piece.toolCalls?.[0]?.index === 0).slice(1);
  assert.ok(laterOfCall0.length > 0);
  assert.ok(laterOfCall0.every((piece) => Object.keys(piece.toolCalls?.[0] ?? {}).join() === 'index,arguments'));
  assert.deepEqual(joined(pieces), {
    text: 'Calling: ',
    calls: {
      0: { id: 'call_0', name: 'think', arguments: longArgs },
      // A call with no arguments yet is kept: its id and name are news.
      1: { id: 'call_1', name: 'list_env_data', arguments: '' },
      2: { arguments: '"}' },
    },
  });
});

/**
 * Stands in for the pool `publishDeltas` uses: it records each `pg_notify` query, and the test decides when (and
 * whether) each one succeeds.
 */
class RecordingPool {
  readonly queries: { name?: string; channels: string[]; payloads: DeltaAnnouncement[] }[] = [];
  private readonly answers: { resolve: () => void; reject: (error: Error) => void }[] = [];
  private arrived: (() => void) | undefined;
  /** When false, each query waits for `answer()`. */
  constructor(private readonly immediate = true) {}

  query(config: QueryConfig<[string[], string[]]>): Promise<QueryResult> {
    const [channels, payloads] = config.values ?? [[], []];
    this.queries.push({
      ...(config.name === undefined ? {} : { name: config.name }),
      channels,
      payloads: payloads.map((payload) => JSON.parse(payload) as DeltaAnnouncement),
    });
    this.arrived?.();
    const result = { rows: [], rowCount: 0 } as unknown as QueryResult;
    if (this.immediate) return Promise.resolve(result);
    return new Promise((resolve, reject) => this.answers.push({ resolve: () => resolve(result), reject }));
  }

  /** Settles the oldest waiting query. */
  answer(error?: Error): void {
    const next = this.answers.shift();
    assert.ok(next, 'a query is waiting');
    if (error) next.reject(error);
    else next.resolve();
  }

  /** Resolves once `count` queries have arrived. */
  async queriesArrived(count: number): Promise<void> {
    while (this.queries.length < count) await new Promise<void>((resolve) => (this.arrived = resolve));
  }

  /** Every batch published so far, in order. */
  batches(): DeltaAnnouncement[] {
    return this.queries.flatMap((query) => query.payloads);
  }

  asPool(): Pool {
    return this as unknown as Pool;
  }
}

function chunk(delta: ChatCompletionChunk.Choice.Delta): ChatCompletionChunk {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: null, logprobs: null }],
  };
}
const textChunk = (content: string) => chunk({ content });
const callChunk = (index: number, fields: { id?: string; name?: string; arguments?: string }) =>
  chunk({
    tool_calls: [
      {
        index,
        ...(fields.id === undefined ? {} : { id: fields.id, type: 'function' as const }),
        function: {
          ...(fields.name === undefined ? {} : { name: fields.name }),
          ...(fields.arguments === undefined ? {} : { arguments: fields.arguments }),
        },
      },
    ],
  });
/** A publisher whose timer never fires during a test: the test flushes. */
const LONG_INTERVAL_MS = 3_600_000;

test('DeltaPublisher: gathered chunks go out as one batch, tagged, on the deltas channel; tool calls joined', async () => {
  const pool = new RecordingPool();
  const publisher = new DeltaPublisher(pool.asPool(), target, LONG_INTERVAL_MS);
  publisher.add(chunk({ role: 'assistant', content: '' }));
  publisher.add(textChunk('Hello '));
  publisher.add(textChunk('wörld 🎉'));
  publisher.add(callChunk(0, { id: 'c0', name: 'think', arguments: '' }));
  publisher.add(callChunk(0, { arguments: '{"thought":' }));
  publisher.add(callChunk(0, { arguments: '"x"}' }));
  publisher.add(callChunk(1, { id: 'c1', name: 'list_env_data' }));
  publisher.add(callChunk(1, { arguments: '{}' }));
  // A usage chunk has no choice: nothing to gather.
  publisher.add({ ...textChunk(''), choices: [] });
  assert.equal(pool.queries.length, 0, 'nothing is sent before the flush');
  await publisher.flush();
  assert.equal(pool.queries.length, 1);
  assert.deepEqual(pool.queries[0]?.channels, [runDeltasChannel(target.rootThreadId)], 'on its root’s channel');
  assert.deepEqual(pool.batches(), [
    {
      ...target,
      part: 0,
      text: 'Hello wörld 🎉',
      toolCalls: [
        { index: 0, id: 'c0', name: 'think', arguments: '{"thought":"x"}' },
        { index: 1, id: 'c1', name: 'list_env_data', arguments: '{}' },
      ],
    },
  ]);
  // Nothing gathered since: a flush sends nothing.
  await publisher.flush();
  assert.equal(pool.queries.length, 1);
});

test('DeltaPublisher: parts are numbered from 0 without gaps across flushes and split batches', async () => {
  const pool = new RecordingPool();
  const publisher = new DeltaPublisher(pool.asPool(), target, LONG_INTERVAL_MS);
  publisher.add(textChunk('one '));
  await publisher.flush();
  const long = '漢字🎉'.repeat(3000);
  publisher.add(textChunk(long));
  await publisher.flush();
  publisher.add(textChunk(' three'));
  await publisher.flush();
  const batches = pool.batches();
  assert.ok(batches.length > 3, 'the long text was split');
  assert.deepEqual(
    batches.map((batch) => batch.part),
    batches.map((_, i) => i),
  );
  assert.equal(batches.map((batch) => batch.text).join(''), `one ${long} three`);
  for (const query of pool.queries) {
    for (const batch of query.payloads) assert.ok(bytes(batch) <= MAX_DELTA_PAYLOAD_BYTES);
  }
});

test('DeltaPublisher: one publish at a time, in order; a failed one is a gap the reader sees, not a failure', async () => {
  const pool = new RecordingPool(false);
  const publisher = new DeltaPublisher(pool.asPool(), target, LONG_INTERVAL_MS);
  publisher.add(textChunk('a'));
  const first = publisher.flush();
  publisher.add(textChunk('b'));
  const second = publisher.flush();
  publisher.add(textChunk('c'));
  const third = publisher.flush();
  await pool.queriesArrived(1);
  // The second waits for the first, so notifications leave in part order.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(pool.queries.length, 1);
  pool.answer(new Error('connection lost'));
  await first;
  await pool.queriesArrived(2);
  pool.answer();
  await second;
  await pool.queriesArrived(3);
  pool.answer();
  await third;
  assert.deepEqual(
    pool.queries.map((query) => query.payloads.map((batch) => [batch.part, batch.text])),
    [[[0, 'a']], [[1, 'b']], [[2, 'c']]],
  );
});

test('DeltaPublisher: gathered chunks go out by themselves within the interval; discard drops them', async () => {
  const pool = new RecordingPool();
  const publisher = new DeltaPublisher(pool.asPool(), target, 1);
  publisher.add(textChunk('soon'));
  await pool.queriesArrived(1);
  assert.deepEqual(
    pool.batches().map((batch) => batch.text),
    ['soon'],
  );
  const quiet = new DeltaPublisher(pool.asPool(), target, LONG_INTERVAL_MS);
  quiet.add(textChunk('never shown'));
  quiet.discard();
  await quiet.flush();
  quiet.add(textChunk('after'));
  await quiet.flush();
  assert.deepEqual(
    pool.batches().map((batch) => [batch.part, batch.text]),
    [
      [0, 'soon'],
      [0, 'after'],
    ],
  );
});

test('announceRunEvents: roots announced together go in one statement, each once; those during a send, in the next', async (t) => {
  // The gathering delay runs on mocked timers: the test moves the clock past it instead of sleeping through it.
  t.mock.timers.enable({ apis: ['setTimeout'] });
  /** Far past any gathering delay: whatever a timer would send has been sent once the clock moved this far. */
  const pastTheGathering = () => t.mock.timers.tick(60_000);
  /** Until every promise continuation queued so far has run (a send loop that can end has ended). */
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  const pool = new RecordingPool(false);
  announceRunEvents(pool.asPool(), 'root-a');
  announceRunEvents(pool.asPool(), 'root-b');
  announceRunEvents(pool.asPool(), 'root-a');
  await settled();
  assert.equal(pool.queries.length, 0, 'the first roots wait for the gathering delay');
  pastTheGathering();
  await pool.queriesArrived(1);
  assert.deepEqual(pool.queries[0]?.channels, [runEventsChannel('root-a'), runEventsChannel('root-b')]);
  assert.deepEqual(pool.batches(), [{ rootThreadId: 'root-a' }, { rootThreadId: 'root-b' }]);
  // While that statement is under way, more roots wait for it, then go at once, together.
  announceRunEvents(pool.asPool(), 'root-c');
  announceRunEvents(pool.asPool(), 'root-a');
  pastTheGathering();
  await settled();
  assert.equal(pool.queries.length, 1, 'nothing more is sent while a statement is under way');
  pool.answer(new Error('connection lost'));
  await pool.queriesArrived(2);
  assert.deepEqual(pool.queries[1]?.channels, [runEventsChannel('root-c'), runEventsChannel('root-a')]);
  pool.answer();
  // Once that send is done, a later announcement starts a batch of its own, which gathers first.
  await settled();
  announceRunEvents(pool.asPool(), 'root-d');
  await settled();
  assert.equal(pool.queries.length, 2, 'root-d waits for its own gathering delay');
  pastTheGathering();
  await pool.queriesArrived(3);
  assert.deepEqual(pool.queries[2]?.channels, [runEventsChannel('root-d')]);
  pool.answer();
  assert.ok(pool.queries.every((query) => query.name === 'baton-run-announce'));
});
