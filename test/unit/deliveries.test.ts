import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  carriedDeliveries,
  MAX_CARRIED_DELIVERIES,
  MAX_MESSAGE_ID_CHARS,
  messageIdProblem,
  type Delivery,
} from '../../common/deliveries';

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
