/**
 * `GatheredSends` (db/gathered-sends.ts), which batches the env store's and the run feed's announcements: what is
 * queued together goes in one send, what is queued during a send goes in the next, in order, and `flush` sends at once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatheredSends } from '../../db/gathered-sends';

/** A sender that records its batches and holds each until released. */
function recordingSender() {
  const batches: string[][] = [];
  const held: (() => void)[] = [];
  return {
    batches,
    release: () => held.shift()?.(),
    send: (batch: string[]) => {
      batches.push(batch);
      return new Promise<void>((resolve) => held.push(resolve));
    },
  };
}

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('gathered sends: items queued within the gathering delay go in one send; those queued during it, in the next', async () => {
  const sender = recordingSender();
  const sends = new GatheredSends<string>({ gatherMs: 20, maxPerBatch: 100, send: sender.send });
  sends.add(['a', 'b']);
  sends.add(['c']);
  assert.deepEqual(sender.batches, [], 'nothing is sent before the delay');
  await tick(40);
  assert.deepEqual(sender.batches, [['a', 'b', 'c']]);
  // Queued while that send is under way: sent right after it, without another delay.
  sends.add(['d']);
  sends.add(['e']);
  sender.release();
  await tick(1);
  assert.deepEqual(sender.batches, [
    ['a', 'b', 'c'],
    ['d', 'e'],
  ]);
  sender.release();
  await tick(1);
});

test('gathered sends: flush sends what is gathering at once and resolves once every item queued so far is sent', async () => {
  const sender = recordingSender();
  const sends = new GatheredSends<string>({ gatherMs: 10_000, maxPerBatch: 2, send: sender.send });
  sends.add(['a', 'b', 'c']);
  let flushed = false;
  const flushing = sends.flush().then(() => (flushed = true));
  await tick(1);
  // At most `maxPerBatch` a send, in the order queued.
  assert.deepEqual(sender.batches, [['a', 'b']]);
  sender.release();
  await tick(1);
  assert.deepEqual(sender.batches, [['a', 'b'], ['c']]);
  assert.equal(flushed, false, 'the last batch is still being sent');
  sender.release();
  await flushing;
  // Nothing queued: a flush resolves at once and sends nothing.
  await sends.flush();
  assert.equal(sender.batches.length, 2);
});

test('gathered sends: with keyOf an item queued again before its send goes once; a failed send does not stop the next', async () => {
  const batches: string[][] = [];
  let fail = true;
  const sends = new GatheredSends<string>({
    gatherMs: 5,
    maxPerBatch: 100,
    keyOf: (item) => item,
    send: (batch) => {
      batches.push(batch);
      if (fail) {
        fail = false;
        return Promise.reject(new Error('the connection is gone'));
      }
      return Promise.resolve();
    },
  });
  sends.add(['root-a', 'root-b', 'root-a']);
  await sends.flush();
  sends.add(['root-a']);
  await sends.flush();
  assert.deepEqual(batches, [['root-a', 'root-b'], ['root-a']]);
});
