/**
 * The fast variant of `npm run chaos -- --steps local`: the round of test/chaos/chaos-rounds.test.ts with every agent
 * running its steps as local activities inside its turn's workflow task (the round's world sets `BATON_STEPS`), so
 * the faults land between steps that no activity task separates: a SIGKILLed worker's open steps are run again by
 * the other worker from what is stored.
 */
import { test } from 'node:test';
import { runFastRound } from './fast-round';

/** Fixed, so a failure here replays with `npm run chaos -- --rounds 1 --seed 20261124 --steps local`. */
const SEED = 20261124;

test(
  'chaos, local steps: one round of every fault loses nothing, does nothing twice and leaves nothing running',
  { timeout: 600_000 },
  (t) => runFastRound(t, SEED, 'local'),
);
