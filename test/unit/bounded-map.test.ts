/** `setBounded` (common/bounded-map.ts): the in-process caches' limit. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setBounded } from '../../common/bounded-map';

test('setBounded: a new key past the limit drops the oldest; setting a held key again drops nothing', () => {
  const map = new Map<string, number>();
  for (const [key, value] of [
    ['a', 1],
    ['b', 2],
    ['c', 3],
  ] as const)
    setBounded(map, key, value, 3);
  setBounded(map, 'b', 20, 3);
  assert.deepEqual(
    [...map],
    [
      ['a', 1],
      ['b', 20],
      ['c', 3],
    ],
  );
  setBounded(map, 'd', 4, 3);
  assert.deepEqual(
    [...map],
    [
      ['b', 20],
      ['c', 3],
      ['d', 4],
    ],
  );
});
