import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  carriedDeliveries,
  MAX_CARRIED_DELIVERIES,
  MAX_CARRIED_DELIVERY_BYTES,
  MAX_CARRIED_FAILURE_BYTES,
  MAX_MESSAGE_ID_CHARS,
  messageIdProblem,
  type Delivery,
} from '../../common/deliveries';
import { truncateBytes } from '../../common/text';

const deliveries = (from: number, count: number): Delivery[] =>
  Array.from({ length: count }, (_, index) => ({ id: `m-${from + index}`, turn: from + index }));

test('deliveries: a run carries the most recent ones, what it was handed first, and no more than the bound', () => {
  assert.deepEqual(carriedDeliveries([], []), []);
  assert.deepEqual(carriedDeliveries(deliveries(1, 2), deliveries(3, 1)), deliveries(1, 3));
  const carried = carriedDeliveries(deliveries(1, MAX_CARRIED_DELIVERIES), deliveries(MAX_CARRIED_DELIVERIES + 1, 30));
  assert.equal(carried.length, MAX_CARRIED_DELIVERIES);
  assert.deepEqual(carried, deliveries(31, MAX_CARRIED_DELIVERIES), 'the oldest ones are let go');
  // An id longer than a client may give (an Update sent around the SDK) is not carried: history stays small.
  const long = { id: 'x'.repeat(MAX_MESSAGE_ID_CHARS + 1), turn: 9 };
  assert.deepEqual(carriedDeliveries([], [long, ...deliveries(10, 1)]), deliveries(10, 1));
});

test('deliveries: a message id is 1 to 200 characters', () => {
  assert.equal(messageIdProblem('schedule:nightly:20250101T090000Z'), undefined);
  assert.equal(messageIdProblem('x'.repeat(MAX_MESSAGE_ID_CHARS)), undefined);
  assert.equal(messageIdProblem(''), `messageId must be 1 to ${MAX_MESSAGE_ID_CHARS} characters (got 0)`);
  assert.equal(
    messageIdProblem('x'.repeat(MAX_MESSAGE_ID_CHARS + 1)),
    `messageId must be 1 to ${MAX_MESSAGE_ID_CHARS} characters (got ${MAX_MESSAGE_ID_CHARS + 1})`,
  );
});

test('deliveries: what a run carries stays under its byte bound with the longest ids and reasons, the newest kept', () => {
  // Ids of the longest length a client may give, of 3-byte characters; reasons cut as the thread cuts them.
  const longest = (turn: number): Delivery => ({
    id: '中'.repeat(MAX_MESSAGE_ID_CHARS),
    turn,
    ended: { failed: truncateBytes('✗'.repeat(10_000), MAX_CARRIED_FAILURE_BYTES) },
  });
  const carried = carriedDeliveries(
    [],
    Array.from({ length: MAX_CARRIED_DELIVERIES }, (_, index) => longest(index + 1)),
  );
  const bytes = Buffer.byteLength(JSON.stringify(carried));
  assert.ok(bytes <= MAX_CARRIED_DELIVERY_BYTES && bytes < 64 * 1024, `${bytes} bytes`);
  // The most recent ones are kept, as many as fit.
  assert.ok(carried.length > MAX_CARRIED_DELIVERIES / 2, `${carried.length} carried`);
  assert.equal(carried.at(-1)?.turn, MAX_CARRIED_DELIVERIES);
  assert.equal(carried[0]?.turn, MAX_CARRIED_DELIVERIES - carried.length + 1);
  // Plain ids and answers: all 100 fit.
  const answered = Array.from({ length: MAX_CARRIED_DELIVERIES }, (_, index): Delivery => ({
    id: `message-${index}`,
    turn: index + 1,
    ended: {
      answerOperationId: `0190a6d2-7c1e-7a3b-9f00-3e5d2c1b0a99:turn:${index + 1}:model:9`,
      steps: 10,
      usage: { promptTokens: 12_345, completionTokens: 678, totalTokens: 13_023 },
    },
  }));
  assert.equal(carriedDeliveries([], answered).length, MAX_CARRIED_DELIVERIES);
});
