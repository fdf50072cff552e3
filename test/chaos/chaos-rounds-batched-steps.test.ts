/**
 * The fast variant of `npm run chaos -- --steps batched`: the round of test/chaos/chaos-rounds.test.ts with every agent
 * running its consecutive steps in one local activity (the round's world sets `BATON_STEPS`), so a SIGKILLed worker
 * can die in the middle of a batch of several model calls and tool runs: the other worker runs the batch again from
 * its first step, finding every step that stored its reply.
 */
import { test } from 'node:test';
import { runFastRound } from './fast-round';

/** Fixed, so a failure here replays with `npm run chaos -- --rounds 1 --seed 20261126 --steps batched`. */
const SEED = 20261126;

test(
  'chaos, batched steps: one round of every fault loses nothing, does nothing twice and leaves nothing running',
  { timeout: 600_000 },
  (t) => runFastRound(t, SEED, 'batched'),
);
