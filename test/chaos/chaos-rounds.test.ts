/**
 * The fast variant of `npm run chaos`: one seeded round (workers SIGKILLed, Temporal and Postgres restarted, model
 * 5xx/429 bursts, replies cut halfway, a thread refused with 401) on a stack of its own, with every check of a round
 * (an MCP tool's call among them), every agent's steps as activities (the default).
 */
import { test } from 'node:test';
import { runFastRound } from './fast-round';

/** Fixed, so a failure here replays with `npm run chaos -- --rounds 1 --seed 20261123 --steps activity`. */
const SEED = 20261123;

test(
  'chaos: one round of every fault loses nothing, does nothing twice and leaves nothing running',
  { timeout: 600_000 },
  (t) => runFastRound(t, SEED, 'activity'),
);
