/**
 * Limits on model calls that every worker shares (`BATON_MODEL_LIMITS`), against real Postgres and two real
 * `baton worker` processes: the ledger of leases, requests and tokens (room, waits, a dead worker's lease expiring, a
 * provider's Retry-After), and two workers under `concurrent: 1` whose requests never overlap at the scripted model,
 * none timing out while it waits, a waiting call saying so in its heartbeat.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import { blockScopes, returnCapacity, tryTakeCapacity, type LimitedScope } from '../../db/model-limits';
import { createPool } from '../../db/pool';
import { readRunFeed } from '../../db/run-events';
import { runEventsOf } from '../../common/run-events';
import { RunTree, renderRunTree } from '../../cli/run-tree';
import { parseScript } from '../../scripted-model';
import { readModelLog } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { useKillableWorkers } from '../../testing/worker-process';
import { waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'model-limits-'));
const pool = createPool({ connectionString: env.databaseUrl, applicationName: 'baton-model-limits-test' });
after(() => pool.end());

/** A scope of its own per test, so tests (and runs) never share a ledger. */
const scopeOf = (limit: LimitedScope['limit']): LimitedScope => ({
  scope: `test-${randomBytes(4).toString('hex')}`,
  limit,
});
const lease = () => randomBytes(8).toString('hex');

test('model limits: calls at once, requests and tokens per minute, and Retry-After each make a call wait', async () => {
  const atOnce = scopeOf({ concurrent: 1 });
  const first = lease();
  assert.deepEqual(await tryTakeCapacity(pool, first, [atOnce]), { taken: true });
  const second = await tryTakeCapacity(pool, lease(), [atOnce]);
  assert.equal(second.taken, false);
  assert.ok(!second.taken && second.reason === '1 call(s) at once' && second.scope === atOnce.scope);
  await returnCapacity(pool, first, 0);
  assert.deepEqual(await tryTakeCapacity(pool, lease(), [atOnce]), { taken: true }, 'a returned place is free');

  const perMinute = scopeOf({ requestsPerMinute: 2 });
  for (let index = 0; index < 2; index += 1) {
    const id = lease();
    assert.deepEqual(await tryTakeCapacity(pool, id, [perMinute]), { taken: true });
    await returnCapacity(pool, id, 0);
  }
  const third = await tryTakeCapacity(pool, lease(), [perMinute]);
  assert.ok(!third.taken, 'a third request within the minute waits');
  assert.equal(third.reason, '2 request(s) per minute');
  assert.ok(third.waitMs > 55_000 && third.waitMs <= 60_000, `until the first is a minute old: ${third.waitMs} ms`);

  const tokens = scopeOf({ tokensPerMinute: 100 });
  const spender = lease();
  assert.deepEqual(await tryTakeCapacity(pool, spender, [tokens]), { taken: true });
  const during = lease();
  assert.deepEqual(await tryTakeCapacity(pool, during, [tokens]), { taken: true }, 'no tokens counted yet');
  await returnCapacity(pool, during, 0);
  await returnCapacity(pool, spender, 120);
  const after = await tryTakeCapacity(pool, lease(), [tokens]);
  assert.ok(!after.taken && after.reason === '100 token(s) per minute', 'the reply used the minute');

  const throttled = scopeOf({ concurrent: 10 });
  await blockScopes(pool, [throttled.scope], 1_500);
  const blocked = await tryTakeCapacity(pool, lease(), [throttled]);
  assert.ok(!blocked.taken && /Retry-After/.test(blocked.reason), 'every caller waits out a Retry-After');
  assert.ok(blocked.waitMs > 0 && blocked.waitMs <= 1_500);
});

test("model limits: a call limited by two scopes takes both or neither, and a dead worker's place expires", async () => {
  const provider = scopeOf({ concurrent: 2 });
  const model = scopeOf({ concurrent: 1 });
  const held = lease();
  assert.deepEqual(await tryTakeCapacity(pool, held, [provider, model]), { taken: true });
  const refused = await tryTakeCapacity(pool, lease(), [provider, model]);
  assert.ok(!refused.taken && refused.scope === model.scope, 'the model scope is full');
  const { rows } = await pool.query<{ count: string }>('SELECT count(*) FROM model_limit_leases WHERE scope = $1', [
    provider.scope,
  ]);
  assert.equal(Number(rows[0]?.count), 1, 'the refused call holds no place in the provider scope');
  // The worker holding `held` died: its lease is not renewed and lapses.
  await pool.query(`UPDATE model_limit_leases SET expires_at = now() - interval '1 second' WHERE lease_id = $1`, [
    held,
  ]);
  assert.deepEqual(await tryTakeCapacity(pool, lease(), [provider, model]), { taken: true });
});

/** How long each scripted reply takes: calls that overlapped would arrive less than this apart. */
const REPLY_MS = 700;
const RUNS = 4;
/** What the provider's 429 asks every caller to wait. */
const RETRY_AFTER_S = 2;

const workers = useKillableWorkers({
  name: 'model-limits',
  dir: workDir,
  agents: {
    'limited.md': '---\nname: limited\ndescription: Limited.\ncapabilities: []\n---\nAnswer.\n',
    'throttled.md': '---\nname: throttled\ndescription: Throttled.\ncapabilities: []\n---\nAnswer.\n',
  },
  script: parseScript(
    `agents:
  limited:
    - { say: "Limited.", delay_ms: ${REPLY_MS} }
  throttled:
    - { fail: 429, times: 1, retry_after_s: ${RETRY_AFTER_S} }
    - say: "Waited."
`,
    'model-limits',
  ),
  modelLog: path.join(workDir, 'model.jsonl'),
  workerEnv: {
    BATON_MODEL_LIMITS: JSON.stringify({ default: { concurrent: 1 } }),
    // One activity at a time per worker: calls running at once are on different workers.
    BATON_MAX_CONCURRENT_ACTIVITIES: '1',
  },
});

test('model limits: two workers under concurrent: 1 never overlap their requests, and a waiting call says why', async () => {
  const fixture = workers();
  await fixture.start('worker A');
  await fixture.start('worker B');
  const threads = Array.from({ length: RUNS }, () => uniqueThreadId('limited'));
  const runs = threads.map((threadId) => fixture.client.run({ agent: 'limited', threadId, message: 'Go.' }));
  for (const run of runs) run.catch(() => undefined);

  // A call waiting for room heartbeats why; the Web UI shows it with the pending activity.
  const waitingFor = await waitFor('a call waiting for capacity', 30_000, async () => {
    // The turn runs in its thread's workflow or, for some step modes, in a child of its own.
    for (const workflowId of threads.flatMap((threadId) => [`baton/${threadId}`, `baton/${threadId}/turn-1`])) {
      const described = await fixture.client.temporal.workflow
        .getHandle(workflowId)
        .describe()
        .catch(() => undefined);
      for (const pending of described?.raw.pendingActivities ?? []) {
        const [details] = pending.heartbeatDetails?.payloads ?? [];
        if (details === undefined) continue;
        const decoded = defaultPayloadConverter.fromPayload<{ waitingForCapacity?: string }>(details);
        if (decoded.waitingForCapacity !== undefined) return decoded.waitingForCapacity;
      }
    }
    return undefined;
  });
  assert.equal(waitingFor, 'default: 1 call(s) at once');

  // The run feed says so too, and the CLI's live tree shows it under the waiting thread.
  const waited = await waitFor('a model_call_waiting event', 30_000, async () => {
    for (const threadId of threads) {
      const events = (await readRunFeed(fixture.pool, threadId)).flatMap(runEventsOf);
      const event = events.find((candidate) => candidate.type === 'model_call_waiting');
      if (event !== undefined) return { threadId, events };
    }
    return undefined;
  });
  const event = waited.events.find((candidate) => candidate.type === 'model_call_waiting');
  assert.ok(event?.type === 'model_call_waiting');
  assert.deepEqual([event.scope, event.reason, event.step], ['default', '1 call(s) at once', 0]);
  assert.match(event.operationId, /:/);
  const tree = new RunTree(waited.threadId, 'limited');
  for (const stored of waited.events) tree.apply(stored);
  assert.ok(
    renderRunTree(tree, { width: 200, now: Date.now() }).some((line) =>
      line.includes('waiting for capacity: default: 1 call(s) at once'),
    ),
    'the live tree shows the wait',
  );

  for (const { result } of await Promise.all(runs)) assert.equal(result.reply, 'Limited.');
  const arrivals = readModelLog(path.join(workDir, 'model.jsonl'))
    .filter((entry) => threads.includes(entry.thread ?? ''))
    .map((entry) => Date.parse(entry.time))
    .sort((a, b) => a - b);
  assert.equal(arrivals.length, RUNS, 'one request per run');
  for (let index = 1; index < arrivals.length; index += 1) {
    const gap = (arrivals[index] ?? 0) - (arrivals[index - 1] ?? 0);
    assert.ok(
      gap >= REPLY_MS - 50,
      `request ${index + 1} came ${gap} ms after the one before, which took ${REPLY_MS} ms`,
    );
  }
  // Both workers made calls (each runs one activity at a time): the limit held across processes, not within one.
  const identities = new Set<string>();
  for (const workflowId of threads.flatMap((threadId) => [`baton/${threadId}`, `baton/${threadId}/turn-1`])) {
    const history = await fixture.client.temporal.workflow
      .getHandle(workflowId)
      .fetchHistory()
      .catch(() => undefined);
    for (const event of history?.events ?? []) {
      const identity = event.activityTaskStartedEventAttributes?.identity;
      if (identity) identities.add(identity);
    }
  }
  assert.ok(identities.size >= 2, `the calls ran on ${[...identities].join(', ')}`);
});

test("model limits: a provider's Retry-After to one call holds another thread's call, whichever worker runs it", async () => {
  const fixture = workers();
  const modelLog = path.join(workDir, 'model.jsonl');
  const throttledThread = uniqueThreadId('throttled');
  const throttled = fixture.client.run({ agent: 'throttled', threadId: throttledThread, message: 'Go.' });
  throttled.catch(() => undefined);
  const refusedAt = await waitFor('the 429', 30_000, () => {
    const entry = readModelLog(modelLog).find((logged) => logged.thread === throttledThread);
    return Promise.resolve(entry === undefined ? undefined : Date.parse(entry.time));
  });
  const otherThread = uniqueThreadId('held');
  const other = await fixture.client.run({ agent: 'limited', threadId: otherThread, message: 'Go.' });
  assert.equal(other.result.reply, 'Limited.');
  assert.equal((await throttled).result.reply, 'Waited.');
  const sentAt = Date.parse(readModelLog(modelLog).find((logged) => logged.thread === otherThread)?.time ?? '');
  assert.ok(
    sentAt - refusedAt >= RETRY_AFTER_S * 1000 - 100,
    `the other call was sent ${sentAt - refusedAt} ms after the 429 asked for ${RETRY_AFTER_S} s`,
  );
});
