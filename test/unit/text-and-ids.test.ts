import assert from 'node:assert/strict';
import { test } from 'node:test';
import { operationId, rootTurnWorkflowId, threadIdProblem, threadWorkflowId } from '../../common/ids';
import { describeSeconds, describeWait, truncateBytes, turnSummary, utf8Length } from '../../common/text';
import { newThreadId } from '../../client/thread-ids';

test('ids: workflow ids derive from the thread id', () => {
  assert.equal(threadWorkflowId('t1'), 'baton/t1');
  assert.equal(rootTurnWorkflowId('t1', 3), 'baton/t1/turn-3');
  assert.equal(operationId('run-1', 'model', 2), 'run-1:model:2');
});

test('ids: thread ids are short and safe; new ones pass the same check', () => {
  assert.equal(threadIdProblem('my-thread_1.2'), undefined);
  assert.match(threadIdProblem('has space') ?? '', /must be 1-64 characters/);
  assert.match(threadIdProblem('x'.repeat(65)) ?? '', /must be 1-64 characters/);
  assert.match(threadIdProblem('-leading') ?? '', /starting with a letter or digit/);
  const id = newThreadId();
  assert.equal(threadIdProblem(id), undefined);
  assert.notEqual(newThreadId(), id);
});

test('text: byte-bounded truncation never splits a character and marks the cut', () => {
  assert.equal(utf8Length('aé€😀'), 1 + 2 + 3 + 4);
  assert.equal(truncateBytes('short', 10), 'short');
  const cut = truncateBytes('€'.repeat(100), 20);
  assert.ok(utf8Length(cut) <= 20);
  assert.ok(cut.endsWith('…'));
  assert.equal(cut, '€'.repeat(5) + '…');
});

test('text: a turn summary is the agent and the first non-empty line, at most 200 bytes', () => {
  assert.equal(turnSummary('solver', '\n  Solve task 007bbfb7  \nmore'), 'solver: Solve task 007bbfb7');
  const long = turnSummary('solver', 'é'.repeat(500));
  assert.ok(utf8Length(long) <= 200);
});

test('text: wait durations read as people say them, and a wait as `waiting until <time>: <reason>`', () => {
  assert.deepEqual([0, 1, 2, 2.4, 119, 120, 3600, 3725, 86_400, 8 * 86_400 + 60].map(describeSeconds), [
    '0 seconds',
    '1 second',
    '2 seconds',
    '2 seconds',
    '119 seconds',
    '2 minutes',
    '1 hour',
    '1 hour 2 minutes 5 seconds',
    '1 day',
    '8 days 1 minute',
  ]);
  assert.equal(
    describeWait({ until: '2030-01-31T09:00:00.000Z', reason: 'the nightly report' }),
    'waiting until 2030-01-31T09:00:00.000Z: the nightly report',
  );
});
