/**
 * `distinctToolCallIds`: a reply's calls come out with ids distinct within it, the first holder of an id keeping it,
 * whatever ids a model sends (repeated, empty, or made to look like the ones Baton derives).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distinctToolCallIds } from '../../common/ids';

const ids = (...list: string[]) => distinctToolCallIds(list.map((id, index) => ({ id, index }))).map((c) => c.id);

test('tool call ids: a reply without repeats is unchanged', () => {
  const calls = [{ id: 'a' }, { id: 'b' }];
  assert.deepEqual(distinctToolCallIds(calls), calls);
  assert.deepEqual(distinctToolCallIds([]), []);
});

test('tool call ids: a repeated id becomes <id>#<n> for its n-th use; the first keeps it', () => {
  assert.deepEqual(ids('same', 'same', 'other', 'same'), ['same', 'same#2', 'other', 'same#3']);
  assert.deepEqual(ids('', ''), ['', '#2']);
});

test('tool call ids: a made-up id never collides with another call’s, whatever the order', () => {
  assert.deepEqual(ids('a', 'a', 'a#2'), ['a', 'a#2#', 'a#2']);
  assert.deepEqual(ids('a#2', 'a', 'a'), ['a#2', 'a', 'a#2#']);
  assert.deepEqual(ids('a', 'a#2', 'a#2#', 'a'), ['a', 'a#2', 'a#2#', 'a#2##']);
  // A crafted reply of many repeats: all distinct, every call kept in its place with its own fields.
  const crafted = distinctToolCallIds(
    Array.from({ length: 200 }, (_, index) => ({ id: index % 2 ? 'x' : 'x#2', index })),
  );
  assert.equal(new Set(crafted.map((call) => call.id)).size, 200);
  assert.deepEqual(
    crafted.map((call) => call.index),
    Array.from({ length: 200 }, (_, index) => index),
  );
});
