import { randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pg from 'pg';
import { ENV_EVENTS_CHANNEL } from '../../common/env-data';
import type { ThreadScope } from '../../common/types';
import {
  CONTINUE_VERSIONS,
  EnvDataError,
  EnvDataErrorType,
  EnvStore,
  type EnvEntry,
  type EnvEvent,
  type EnvWriteResult,
} from '../../db/env-data';
import { StaleEpochError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { openChildThread, openRootThread } from '../../testing/thread-fixtures';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';

const env = readTestEnv();
// Room for the concurrent-writer tests to really run side by side.
const pool = createPool({ connectionString: env.databaseUrl, max: 25 });
const store = new EnvStore(pool);

after(async () => {
  await pool.end();
});

const openRoot = (agent: string) => openRootThread(pool, agent);

const openChild = (parent: ThreadScope, agent: string) => openChildThread(pool, parent, agent);

/** Derived operation ids, as a workflow computes them. */
function opId(scope: ThreadScope, step: string): string {
  return `${scope.threadId}:${step}`;
}

/** Everything a refused call must leave as it was: the entry and the event log of the scope. */
async function snapshot(rootThreadId: string, key: string): Promise<{ entry?: EnvEntry; events: EnvEvent[] }> {
  const [entry, events] = await Promise.all([store.get(rootThreadId, key), store.events(rootThreadId)]);
  return { ...(entry ? { entry } : {}), events };
}

function isEnvDataError(type: EnvDataErrorType, message?: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof EnvDataError, `expected an EnvDataError, got ${String(error)}`);
    assert.equal(error.type, type, error.message);
    if (message) assert.match(error.message, message);
    return true;
  };
}

function actorOf(scope: ThreadScope) {
  return { agent: scope.agent, thread: scope.threadId };
}

const ARC_TASK = {
  task_id: 'training-001',
  input_grid: [
    [0, 1, 2],
    [3, 4, 5],
    [6, 7, 8],
  ],
  output_grid: [
    [8, 7, 6],
    [5, 4, 3],
    [2, 1, 0],
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// Create, read, replace, update, delete

test('env store: store then get returns the value with its description, author and version 1', async () => {
  const solver = await openRoot('solver');
  const result = await store.store(solver, opId(solver, 'store'), {
    key: 'arc_task',
    shortDescription: 'The current ARC puzzle: training-001, a 3x3 grid.',
    value: ARC_TASK,
  });
  assert.deepEqual(result, { action: 'stored', key: 'arc_task', version: 1 });

  const entry = await store.get(solver.rootThreadId, 'arc_task');
  assert.ok(entry);
  assert.deepEqual(entry.value, ARC_TASK);
  assert.equal(entry.shortDescription, 'The current ARC puzzle: training-001, a 3x3 grid.');
  assert.deepEqual(entry.storedBy, actorOf(solver));
  assert.equal(entry.version, 1);
  assert.equal(entry.type, null);
  assert.deepEqual(entry.tags, []);
  assert.ok(entry.createdAt instanceof Date && entry.updatedAt instanceof Date);
  assert.equal(await store.get(solver.rootThreadId, 'no_such_key'), undefined);

  const [event, ...more] = await store.events(solver.rootThreadId);
  assert.equal(more.length, 0);
  assert.ok(event);
  assert.equal(event.action, 'stored');
  assert.equal(event.key, 'arc_task');
  assert.equal(event.rootThreadId, solver.rootThreadId);
  assert.deepEqual(event.actor, actorOf(solver));
  assert.equal(event.operationId, opId(solver, 'store'));
  assert.equal(event.version, 1);
  assert.deepEqual(event.value, ARC_TASK);
  assert.equal(event.valueSize, Buffer.byteLength(JSON.stringify(ARC_TASK)));
  assert.equal(event.reason, null);
});

test('env store: list returns the manifest (key, description, author, version, time) and never values', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), { key: 'arc_task', shortDescription: 'The puzzle.', value: ARC_TASK });
  await store.store(observer, opId(observer, 's1'), {
    key: 'observed_patterns',
    shortDescription: 'Patterns seen so far.',
    value: ['rotation_symmetry'],
    type: 'finding',
    tags: ['arc', 'observer'],
  });

  const manifest = await store.list(solver.rootThreadId);
  assert.deepEqual(
    manifest.map((entry) => entry.key),
    ['arc_task', 'observed_patterns'],
  );
  for (const entry of manifest) {
    assert.equal('value' in entry, false, `the manifest entry '${entry.key}' must not carry its value`);
    assert.deepEqual(Object.keys(entry).sort(), [
      'createdAt',
      'key',
      'scope',
      'shortDescription',
      'storedBy',
      'storedByTask',
      'tags',
      'type',
      'updatedAt',
      'version',
    ]);
    assert.ok(entry.updatedAt instanceof Date);
    assert.equal(entry.version, 1);
  }
  const [task, patterns] = manifest;
  assert.deepEqual(task?.storedBy, actorOf(solver));
  assert.equal(task?.shortDescription, 'The puzzle.');
  assert.deepEqual(patterns?.storedBy, actorOf(observer));
  assert.equal(patterns?.type, 'finding');
  assert.deepEqual(patterns?.tags, ['arc', 'observer']);
  assert.equal(await store.hasEntries(pool, solver.rootThreadId), true);
  assert.equal(await store.hasEntries(pool, uniqueThreadId('empty')), false);
});

test('env store: storing an existing key replaces it (version 2, last write wins, attributed to the last writer)', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), {
    key: 'findings',
    shortDescription: 'First draft.',
    value: { n: 1 },
    type: 'draft',
    tags: ['a'],
  });
  const before = await store.get(solver.rootThreadId, 'findings');
  const result = await store.store(observer, opId(observer, 's1'), {
    key: 'findings',
    shortDescription: 'Second draft.',
    value: ['replaced'],
  });
  assert.deepEqual(result, { action: 'stored', key: 'findings', version: 2 });

  const entry = await store.get(solver.rootThreadId, 'findings');
  assert.ok(entry && before);
  assert.deepEqual(entry.value, ['replaced']);
  assert.equal(entry.shortDescription, 'Second draft.');
  assert.equal(entry.type, null, 'a store replaces the whole entry, type included');
  assert.deepEqual(entry.tags, []);
  assert.deepEqual(entry.storedBy, actorOf(observer));
  assert.equal(entry.version, 2);
  assert.equal(entry.createdAt.getTime(), before.createdAt.getTime());
  assert.ok(entry.updatedAt.getTime() >= before.updatedAt.getTime());

  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.version, event.actor, event.value]),
    [
      ['stored', 1, actorOf(solver), { n: 1 }],
      ['stored', 2, actorOf(observer), ['replaced']],
    ],
  );
});

test('env store: update keeps the fields it is not given and records the whole new state', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), {
    key: 'observed_patterns',
    shortDescription: 'Two patterns.',
    value: ['rotation', 'color_map'],
    type: 'finding',
    tags: ['arc'],
  });

  const valueOnly = await store.update(observer, opId(observer, 'u1'), {
    key: 'observed_patterns',
    value: ['rotation', 'color_map', 'border'],
  });
  assert.deepEqual(valueOnly, { action: 'updated', key: 'observed_patterns', version: 2 });
  let entry = await store.get(solver.rootThreadId, 'observed_patterns');
  assert.deepEqual(entry?.value, ['rotation', 'color_map', 'border']);
  assert.equal(entry?.shortDescription, 'Two patterns.');
  assert.equal(entry?.type, 'finding');
  assert.deepEqual(entry?.tags, ['arc']);
  assert.deepEqual(entry?.storedBy, actorOf(observer));

  const descriptionOnly = await store.update(solver, opId(solver, 'u2'), {
    key: 'observed_patterns',
    shortDescription: 'Three patterns, including border detection.',
  });
  assert.equal(descriptionOnly.version, 3);
  entry = await store.get(solver.rootThreadId, 'observed_patterns');
  assert.deepEqual(entry?.value, ['rotation', 'color_map', 'border']);
  assert.equal(entry?.shortDescription, 'Three patterns, including border detection.');
  assert.deepEqual(entry?.storedBy, actorOf(solver));

  // null is a value, not an omission.
  await store.update(solver, opId(solver, 'u3'), { key: 'observed_patterns', value: null });
  entry = await store.get(solver.rootThreadId, 'observed_patterns');
  assert.equal(entry?.value, null);
  assert.equal(entry?.version, 4);

  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.version, event.actor, event.value, event.shortDescription]),
    [
      ['stored', 1, actorOf(solver), ['rotation', 'color_map'], 'Two patterns.'],
      ['updated', 2, actorOf(observer), ['rotation', 'color_map', 'border'], 'Two patterns.'],
      [
        'updated',
        3,
        actorOf(solver),
        ['rotation', 'color_map', 'border'],
        'Three patterns, including border detection.',
      ],
      ['updated', 4, actorOf(solver), null, 'Three patterns, including border detection.'],
    ],
  );
});

test('env store: update of a missing key is NotFound, creates nothing and is logged as rejected', async () => {
  const solver = await openRoot('solver');
  await assert.rejects(
    store.update(solver, opId(solver, 'u1'), { key: 'ghost', value: 1 }),
    isEnvDataError(EnvDataErrorType.NotFound, /no entry 'ghost' to update/),
  );
  assert.equal(await store.get(solver.rootThreadId, 'ghost'), undefined);
  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.key, event.actor, event.version, event.value]),
    [['rejected', 'ghost', actorOf(solver), null, null]],
  );
  assert.match(events[0]?.reason ?? '', /no entry 'ghost'/);

  // Nothing to change is refused before the store is touched.
  await assert.rejects(
    store.update(solver, opId(solver, 'u2'), { key: 'ghost' }),
    isEnvDataError(EnvDataErrorType.NothingToUpdate),
  );
  assert.equal((await store.events(solver.rootThreadId)).length, 1);
});

test('env store: a stale expectedVersion is a VersionConflict naming the current version, and changes nothing', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), { key: 'plan', shortDescription: 'The plan.', value: 'v1' });
  const first = await store.update(observer, opId(observer, 'u1'), {
    key: 'plan',
    value: 'v2',
    expectedVersion: 1,
  });
  assert.equal(first.version, 2);
  const before = await snapshot(solver.rootThreadId, 'plan');
  const conflictsBefore = store.versionConflicts;

  await assert.rejects(
    store.update(solver, opId(solver, 'u1'), { key: 'plan', value: 'stale', expectedVersion: 1 }),
    (error: unknown) => {
      assert.ok(error instanceof EnvDataError);
      assert.equal(error.type, EnvDataErrorType.VersionConflict);
      assert.equal(error.currentVersion, 2);
      assert.match(error.message, /at version 2, not 1/);
      // The entry as the conflict found it, to retry from without reading it again.
      assert.deepEqual(error.conflict, { key: 'plan', expectedVersion: 1, current: { version: 2, value: 'v2' } });
      return true;
    },
  );
  const after = await snapshot(solver.rootThreadId, 'plan');
  assert.deepEqual(after.entry, before.entry);
  assert.equal(after.entry?.value, 'v2');
  // A conflict changes nothing, so it logs nothing either (a contended key would otherwise commit and log every
  // refused attempt); it is counted.
  assert.deepEqual(after.events, before.events);
  assert.equal(store.versionConflicts, conflictsBefore + 1);
  // The refused operation id stays free: nothing was recorded under it.
  const retried = await store.update(solver, opId(solver, 'u1'), { key: 'plan', value: 'v3', expectedVersion: 2 });
  assert.deepEqual(retried, { action: 'updated', key: 'plan', version: 3 });
});

test('env store: delete removes the entry, and the deleted event still holds its last value', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), {
    key: 'solution_attempts',
    shortDescription: 'Two failed attempts.',
    value: [{ ok: false }, { ok: false }],
  });
  await store.update(solver, opId(solver, 'u1'), { key: 'solution_attempts', value: [{ ok: false }] });
  await store.store(solver, opId(solver, 's2'), { key: 'kept', shortDescription: 'Kept.', value: true });

  const result = await store.delete(observer, opId(observer, 'd1'), 'solution_attempts');
  assert.deepEqual(result, { action: 'deleted', key: 'solution_attempts', version: 2 });
  assert.equal(await store.get(solver.rootThreadId, 'solution_attempts'), undefined);
  assert.deepEqual(
    (await store.list(solver.rootThreadId)).map((entry) => entry.key),
    ['kept'],
  );

  const events = await store.events(solver.rootThreadId);
  const deleted = events.at(-1);
  assert.equal(deleted?.action, 'deleted');
  assert.equal(deleted?.key, 'solution_attempts');
  assert.deepEqual(deleted?.actor, actorOf(observer));
  assert.equal(deleted?.version, 2);
  assert.deepEqual(deleted?.value, [{ ok: false }]);
  assert.equal(deleted?.shortDescription, 'Two failed attempts.');
  assert.deepEqual(
    events.map((event) => [event.action, event.key, event.actor.agent]),
    [
      ['stored', 'solution_attempts', 'solver'],
      ['updated', 'solution_attempts', 'solver'],
      ['stored', 'kept', 'solver'],
      ['deleted', 'solution_attempts', 'observer'],
    ],
  );

  await assert.rejects(
    store.delete(observer, opId(observer, 'd2'), 'solution_attempts'),
    isEnvDataError(EnvDataErrorType.NotFound, /no entry 'solution_attempts' to delete/),
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Filters

test('env store: list filters by prefix, type, tag, author and excluded agent', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  const summarizer = await openChild(solver, 'summarizer');
  const put = (scope: ThreadScope, key: string, extra: { type?: string; tags?: string[] } = {}) =>
    store.store(scope, opId(scope, `store:${key}`), { key, shortDescription: `About ${key}.`, value: key, ...extra });
  await put(solver, 'arc/task', { type: 'task', tags: ['arc', 'input'] });
  await put(observer, 'arc/patterns', { type: 'finding', tags: ['arc'] });
  await put(observer, 'arc/patterns/colors', { type: 'finding', tags: ['colors'] });
  await put(solver, 'arcade', { type: 'task' });
  await put(summarizer, 'notes');
  await put(summarizer, 'abc');

  const keys = async (filters: Parameters<EnvStore['list']>[1]) =>
    (await store.list(solver.rootThreadId, filters)).map((entry) => entry.key);

  assert.deepEqual(await keys({}), ['abc', 'arc/patterns', 'arc/patterns/colors', 'arc/task', 'arcade', 'notes']);
  assert.deepEqual(await keys({ prefix: 'arc/' }), ['arc/patterns', 'arc/patterns/colors', 'arc/task']);
  assert.deepEqual(await keys({ prefix: 'arc/patterns/' }), ['arc/patterns/colors']);
  assert.deepEqual(await keys({ prefix: 'arc' }), ['arc/patterns', 'arc/patterns/colors', 'arc/task', 'arcade']);
  // A prefix is literal text, not a LIKE pattern.
  assert.deepEqual(await keys({ prefix: 'a_c' }), []);
  assert.deepEqual(await keys({ prefix: '%' }), []);
  assert.deepEqual(await keys({ type: 'finding' }), ['arc/patterns', 'arc/patterns/colors']);
  assert.deepEqual(await keys({ type: 'task' }), ['arc/task', 'arcade']);
  assert.deepEqual(await keys({ tag: 'arc' }), ['arc/patterns', 'arc/task']);
  assert.deepEqual(await keys({ tag: 'colors' }), ['arc/patterns/colors']);
  assert.deepEqual(await keys({ tag: 'missing' }), []);
  assert.deepEqual(await keys({ storedBy: 'observer' }), ['arc/patterns', 'arc/patterns/colors']);
  assert.deepEqual(await keys({ excludeAgent: 'observer' }), ['abc', 'arc/task', 'arcade', 'notes']);
  assert.deepEqual(await keys({ prefix: 'arc', excludeAgent: 'solver' }), ['arc/patterns', 'arc/patterns/colors']);
  assert.deepEqual(await keys({ type: 'finding', tag: 'arc', storedBy: 'observer' }), ['arc/patterns']);
});

// ---------------------------------------------------------------------------------------------------------------
// Isolation

test('env store: two roots using the same keys never see each other’s data or events', async () => {
  const rootA = await openRoot('solver');
  const rootB = await openRoot('solver');
  for (const [scope, label] of [
    [rootA, 'A'],
    [rootB, 'B'],
  ] as const) {
    await store.store(scope, opId(scope, 's1'), { key: 'arc_task', shortDescription: `Task ${label}.`, value: label });
    await store.store(scope, opId(scope, 's2'), {
      key: 'shared/notes',
      shortDescription: `Notes ${label}.`,
      value: [],
    });
  }
  await store.update(rootA, opId(rootA, 'u1'), { key: 'arc_task', value: 'A2', expectedVersion: 1 });
  await store.delete(rootB, opId(rootB, 'd1'), 'shared/notes');

  assert.equal((await store.get(rootA.rootThreadId, 'arc_task'))?.value, 'A2');
  assert.equal((await store.get(rootB.rootThreadId, 'arc_task'))?.value, 'B');
  assert.equal((await store.get(rootB.rootThreadId, 'arc_task'))?.version, 1);
  assert.ok(await store.get(rootA.rootThreadId, 'shared/notes'), 'a delete in B leaves A alone');
  assert.deepEqual(
    (await store.list(rootA.rootThreadId)).map((entry) => [entry.key, entry.shortDescription]),
    [
      ['arc_task', 'Task A.'],
      ['shared/notes', 'Notes A.'],
    ],
  );
  assert.deepEqual(
    (await store.list(rootB.rootThreadId)).map((entry) => [entry.key, entry.shortDescription]),
    [['arc_task', 'Task B.']],
  );
  const eventsA = await store.events(rootA.rootThreadId);
  const eventsB = await store.events(rootB.rootThreadId);
  assert.ok(
    eventsA.every((event) => event.rootThreadId === rootA.rootThreadId && event.actor.thread === rootA.threadId),
  );
  assert.ok(
    eventsB.every((event) => event.rootThreadId === rootB.rootThreadId && event.actor.thread === rootB.threadId),
  );
  assert.deepEqual(
    eventsA.map((event) => event.action),
    ['stored', 'stored', 'updated'],
  );
  assert.deepEqual(
    eventsB.map((event) => event.action),
    ['stored', 'stored', 'deleted'],
  );
  // `since` is a global sequence number: a since taken in one root does not open the other.
  const lastB = eventsB.at(-1)?.seq ?? 0;
  assert.deepEqual(await store.events(rootA.rootThreadId, { since: lastB }), []);
});

// ---------------------------------------------------------------------------------------------------------------
// Limits: every refusal is clear and changes nothing

async function assertRefusedUnchanged(
  scope: ThreadScope,
  key: string,
  call: () => Promise<EnvWriteResult>,
  type: EnvDataErrorType,
  message?: RegExp,
): Promise<void> {
  const before = await snapshot(scope.rootThreadId, key);
  await assert.rejects(call(), isEnvDataError(type, message));
  assert.deepEqual(await snapshot(scope.rootThreadId, key), before, `a refused call (${type}) changed nothing`);
}

test('env store: a value over the configured limit is TooLarge and changes nothing', async () => {
  const solver = await openRoot('solver');
  const small = new EnvStore(pool, { maxValueBytes: 64 });
  await small.store(solver, opId(solver, 's1'), { key: 'grid', shortDescription: 'A grid.', value: [1, 2, 3] });
  const exactly64 = 'x'.repeat(62); // 64 bytes of JSON with its quotes
  let step = 0;
  await assertRefusedUnchanged(
    solver,
    'grid',
    () =>
      small.store(solver, opId(solver, `s${++step + 1}`), {
        key: 'grid',
        shortDescription: 'Big.',
        value: `${exactly64}x`,
      }),
    EnvDataErrorType.TooLarge,
    /65 bytes of JSON; the limit is 64 bytes/,
  );
  await assertRefusedUnchanged(
    solver,
    'grid',
    () => small.update(solver, opId(solver, `u${++step}`), { key: 'grid', value: `${exactly64}x` }),
    EnvDataErrorType.TooLarge,
  );
  await assertRefusedUnchanged(
    solver,
    'other',
    () =>
      small.store(solver, opId(solver, `s${++step + 1}`), {
        key: 'other',
        shortDescription: 'Big.',
        value: `${exactly64}x`,
      }),
    EnvDataErrorType.TooLarge,
  );
  // Bytes, not characters: 32 two-byte characters are 66 bytes of JSON.
  await assertRefusedUnchanged(
    solver,
    'grid',
    () => small.update(solver, opId(solver, `u${++step}`), { key: 'grid', value: 'é'.repeat(32) }),
    EnvDataErrorType.TooLarge,
  );
  const atLimit = await small.update(solver, opId(solver, 'u-at-limit'), { key: 'grid', value: exactly64 });
  assert.equal(atLimit.version, 2, 'exactly the limit is allowed');
});

test('env store: the default limit is 100 KiB of JSON (a 101 KiB value is TooLarge, 100 KiB is stored)', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'blob', shortDescription: 'A blob.', value: 'small' });
  await assertRefusedUnchanged(
    solver,
    'blob',
    () =>
      store.store(solver, opId(solver, 's2'), { key: 'blob', shortDescription: 'Big.', value: 'x'.repeat(101 * 1024) }),
    EnvDataErrorType.TooLarge,
    /the limit is 102400 bytes/,
  );
  const result = await store.store(solver, opId(solver, 's3'), {
    key: 'blob',
    shortDescription: 'Exactly 100 KiB of JSON.',
    value: 'x'.repeat(100 * 1024 - 2),
  });
  assert.equal(result.version, 2);
  assert.equal((await store.events(solver.rootThreadId)).at(-1)?.valueSize, 100 * 1024);
});

test('env store: bad keys are InvalidKey for store, update and delete, and change nothing', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'ok', shortDescription: 'Fine.', value: 1 });
  const badKeys = ['', ' ', 'has space', '/leading', 'trailing/', 'double//slash', 'tab\tkey', 'ünï', 'k'.repeat(201)];
  let step = 0;
  for (const key of badKeys) {
    const label = JSON.stringify(key.length > 20 ? `${key.slice(0, 8)}…(${key.length})` : key);
    for (const call of [
      () => store.store(solver, opId(solver, `bad${++step}`), { key, shortDescription: 'Bad.', value: 1 }),
      () => store.update(solver, opId(solver, `bad${++step}`), { key, value: 1 }),
      () => store.delete(solver, opId(solver, `bad${++step}`), key),
    ]) {
      const before = await snapshot(solver.rootThreadId, 'ok');
      await assert.rejects(call(), isEnvDataError(EnvDataErrorType.InvalidKey), `key ${label}`);
      assert.deepEqual(await snapshot(solver.rootThreadId, 'ok'), before, `key ${label} changed nothing`);
    }
  }
  const longest = 'k'.repeat(200);
  const good = ['a', 'arc/task', 'arc/patterns/colors', 'A-Z_0.9', longest];
  for (const key of good) {
    await store.store(solver, opId(solver, `good:${key}`), { key, shortDescription: 'Good.', value: key });
  }
  assert.deepEqual((await store.list(solver.rootThreadId)).map((entry) => entry.key).sort(), [...good, 'ok'].sort());
});

test('env store: a missing, blank or 501-character description is InvalidDescription and changes nothing', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'k', shortDescription: 'Fine.', value: 1 });
  let step = 0;
  for (const description of ['', '   ', '\n\t', 'd'.repeat(501)]) {
    await assertRefusedUnchanged(
      solver,
      'k',
      () => store.store(solver, opId(solver, `s${++step + 1}`), { key: 'k', shortDescription: description, value: 2 }),
      EnvDataErrorType.InvalidDescription,
    );
    await assertRefusedUnchanged(
      solver,
      'k',
      () => store.update(solver, opId(solver, `u${++step}`), { key: 'k', shortDescription: description }),
      EnvDataErrorType.InvalidDescription,
    );
  }
  const longest = await store.store(solver, opId(solver, 'longest'), {
    key: 'k',
    shortDescription: 'd'.repeat(500),
    value: 3,
  });
  assert.equal(longest.version, 2, 'exactly 500 characters is allowed');
});

test('env store: a description left out at run time (an untyped caller) is InvalidDescription, not a TypeError', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'k', shortDescription: 'Fine.', value: 1 });
  const untyped = { key: 'k', value: 2 } as unknown as Parameters<EnvStore['store']>[2];
  await assertRefusedUnchanged(
    solver,
    'k',
    () => store.store(solver, opId(solver, 'missing'), untyped),
    EnvDataErrorType.InvalidDescription,
    /short_description is required/,
  );
});

test('env store: values JSON cannot hold faithfully are NotSerializable and change nothing', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'k', shortDescription: 'Fine.', value: { ok: true } });
  const cycle: Record<string, unknown> = { name: 'loop' };
  cycle.self = cycle;
  const cases: [string, unknown, RegExp][] = [
    ['undefined', undefined, /the value is undefined/],
    ['a function inside an object', { grid: [1], transform: () => 1 }, /'transform' is function/],
    ['a BigInt', { count: 10n }, /BigInt/],
    ['NaN', { score: Number.NaN }, /'score' is NaN/],
    ['Infinity in an array', [1, Number.POSITIVE_INFINITY], /'1' is Infinity/],
    ['undefined in an array', [1, undefined], /'1' is undefined/],
    ['a symbol', { tag: Symbol('s') }, /'tag' is symbol/],
    ['a cycle', cycle, /circular/i],
  ];
  let step = 0;
  for (const [label, value, message] of cases) {
    await assertRefusedUnchanged(
      solver,
      'k',
      () => store.store(solver, opId(solver, `s${++step + 1}`), { key: 'k', shortDescription: label, value }),
      EnvDataErrorType.NotSerializable,
      message,
    );
    if (value !== undefined) {
      await assertRefusedUnchanged(
        solver,
        'k',
        () => store.update(solver, opId(solver, `u${++step}`), { key: 'k', value }),
        EnvDataErrorType.NotSerializable,
        message,
      );
    }
  }
});

test('env store: text Postgres cannot hold (NUL, lone surrogates) is refused as invalid input, not a database error', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'k', shortDescription: 'Fine.', value: 'ok' });
  // JSON can carry "\u0000", but jsonb and text columns cannot: the store must refuse it as input a caller can fix,
  // not fail with a raw database error that the tool activity would retry.
  await assertRefusedUnchanged(
    solver,
    'k',
    () => store.store(solver, opId(solver, 's2'), { key: 'k', shortDescription: 'NUL.', value: 'a\u0000b' }),
    EnvDataErrorType.NotSerializable,
  );
  await assertRefusedUnchanged(
    solver,
    'k',
    () => store.update(solver, opId(solver, 'u1'), { key: 'k', value: { 'a\u0000': 1 } }),
    EnvDataErrorType.NotSerializable,
  );
  await assertRefusedUnchanged(
    solver,
    'k',
    () => store.update(solver, opId(solver, 'u2'), { key: 'k', shortDescription: 'Has a \u0000 in it.' }),
    EnvDataErrorType.InvalidDescription,
  );
  await assertRefusedUnchanged(
    solver,
    'k',
    () => store.update(solver, opId(solver, 'u3'), { key: 'k', value: 'half a pair: \ud800' }),
    EnvDataErrorType.NotSerializable,
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Exactly once

test('env store: the same operation id twice, one after the other, writes once and returns the same result', async () => {
  const solver = await openRoot('solver');
  const write = { key: 'arc_task', shortDescription: 'The puzzle.', value: ARC_TASK };
  const first = await store.store(solver, opId(solver, 'store'), write);
  const retried = await store.store(solver, opId(solver, 'store'), write);
  assert.deepEqual(retried, first);
  assert.deepEqual(first, { action: 'stored', key: 'arc_task', version: 1 });
  assert.equal((await store.get(solver.rootThreadId, 'arc_task'))?.version, 1);
  assert.equal((await store.events(solver.rootThreadId)).length, 1);

  const update = { key: 'arc_task', value: { ...ARC_TASK, solved: true } };
  const updated = await store.update(solver, opId(solver, 'update'), update);
  assert.deepEqual(await store.update(solver, opId(solver, 'update'), update), updated);
  const deleted = await store.delete(solver, opId(solver, 'delete'), 'arc_task');
  assert.deepEqual(await store.delete(solver, opId(solver, 'delete'), 'arc_task'), deleted);
  assert.deepEqual(
    (await store.events(solver.rootThreadId)).map((event) => [event.action, event.version]),
    [
      ['stored', 1],
      ['updated', 2],
      ['deleted', 2],
    ],
  );

  // A refusal is an outcome too: the retry gets it again even once the key exists.
  await assert.rejects(
    store.update(solver, opId(solver, 'late'), { key: 'later', value: 1 }),
    isEnvDataError(EnvDataErrorType.NotFound),
  );
  await store.store(solver, opId(solver, 'create-later'), { key: 'later', shortDescription: 'Now.', value: 0 });
  await assert.rejects(
    store.update(solver, opId(solver, 'late'), { key: 'later', value: 1 }),
    isEnvDataError(EnvDataErrorType.NotFound),
  );
  assert.equal((await store.get(solver.rootThreadId, 'later'))?.value, 0);
  assert.equal((await store.events(solver.rootThreadId)).filter((event) => event.action === 'rejected').length, 1);
});

test('env store: the same operation id run concurrently writes once and every run returns the same result', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 'seed'), { key: 'existing', shortDescription: 'Seed.', value: 0 });
  const runs = 8;

  const stores = await Promise.all(
    Array.from({ length: runs }, () =>
      store.store(solver, opId(solver, 'store'), {
        key: 'arc_task',
        shortDescription: 'The puzzle.',
        value: ARC_TASK,
      }),
    ),
  );
  assert.deepEqual(stores, Array(runs).fill({ action: 'stored', key: 'arc_task', version: 1 }));
  assert.equal((await store.get(solver.rootThreadId, 'arc_task'))?.version, 1, 'written once');

  const updates = await Promise.all(
    Array.from({ length: runs }, () =>
      store.update(solver, opId(solver, 'update'), { key: 'existing', value: 1, expectedVersion: 1 }),
    ),
  );
  assert.deepEqual(updates, Array(runs).fill({ action: 'updated', key: 'existing', version: 2 }));
  assert.equal((await store.get(solver.rootThreadId, 'existing'))?.version, 2, 'updated once');

  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.key, event.version]),
    [
      ['stored', 'existing', 1],
      ['stored', 'arc_task', 1],
      ['updated', 'existing', 2],
    ],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Fencing

test('env store: a write under a stale epoch is refused, changes nothing and is logged once as rejected', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'arc_task', shortDescription: 'The puzzle.', value: 'v1' });
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [solver.threadId]);
  const before = await snapshot(solver.rootThreadId, 'arc_task');

  const stale = () =>
    store.store(solver, opId(solver, 's2'), { key: 'arc_task', shortDescription: 'Late.', value: 'from the old turn' });
  const isStale = (error: unknown) => {
    assert.ok(error instanceof StaleEpochError, `expected StaleEpochError, got ${String(error)}`);
    assert.equal(error.threadId, solver.threadId);
    assert.equal(error.writeEpoch, solver.epoch);
    assert.equal(error.currentEpoch, solver.epoch + 1);
    return true;
  };
  await assert.rejects(stale(), isStale);
  const after = await snapshot(solver.rootThreadId, 'arc_task');
  assert.deepEqual(after.entry, before.entry);
  assert.deepEqual(after.events.slice(0, -1), before.events);
  const rejected = after.events.at(-1);
  assert.equal(rejected?.action, 'rejected');
  assert.equal(rejected?.key, 'arc_task');
  // Logged under an id of its own, so the operation id stays free for the turn that owns the thread now.
  assert.equal(rejected?.operationId, `${opId(solver, 's2')}@stale:${solver.epoch}`);
  assert.deepEqual(rejected?.actor, actorOf(solver));
  assert.equal(rejected?.value, null);
  assert.match(rejected?.reason ?? '', new RegExp(`is at epoch ${solver.epoch + 1}; .* under epoch ${solver.epoch}`));

  // The retried activity is refused the same way and logs nothing more.
  await assert.rejects(stale(), isStale);
  assert.deepEqual(await snapshot(solver.rootThreadId, 'arc_task'), after);

  // Update and delete are fenced too; the turn that now owns the thread writes normally.
  await assert.rejects(store.update(solver, opId(solver, 'u1'), { key: 'arc_task', value: 'x' }), isStale);
  await assert.rejects(store.delete(solver, opId(solver, 'd1'), 'arc_task'), isStale);
  assert.deepEqual((await store.get(solver.rootThreadId, 'arc_task'))?.value, 'v1');
  const current = { ...solver, epoch: solver.epoch + 1 };
  assert.equal((await store.update(current, opId(current, 'u2'), { key: 'arc_task', value: 'v2' })).version, 2);
  // The refused operation's id, used again at the current epoch, writes instead of replaying the refusal.
  const reused = await store.store(current, opId(solver, 's2'), {
    key: 'arc_task',
    shortDescription: 'Now.',
    value: 'v3',
  });
  assert.equal(reused.version, 3);
  // Every refusal of the reclaimed turn is also in the root's refused-writes log, with both epochs.
  const { rows: refused } = await pool.query<{ operation_id: string; write_epoch: number; current_epoch: number }>(
    `SELECT operation_id, write_epoch, current_epoch FROM refused_writes WHERE root_thread_id = $1 AND kind = 'env'
      ORDER BY seq`,
    [solver.rootThreadId],
  );
  assert.deepEqual(
    refused.map((row) => row.operation_id),
    [opId(solver, 's2'), opId(solver, 's2'), opId(solver, 'u1'), opId(solver, 'd1')],
  );
  assert.ok(refused.every((row) => row.write_epoch === solver.epoch && row.current_epoch === solver.epoch + 1));
});

/** Resolves once `sessions` sessions wait for the epoch lock of `threadId` (migration 009); fails after 5 s. */
async function waitingForEpochLock(threadId: string, sessions = 1): Promise<void> {
  for (const deadline = Date.now() + 5000; ;) {
    assert.ok(Date.now() < deadline, `fewer than ${sessions} session(s) waited for the epoch lock of ${threadId}`);
    const { rows } = await pool.query<{ waiting: number }>(
      `SELECT COUNT(*)::int AS waiting FROM pg_locks l
        WHERE l.locktype = 'advisory' AND NOT l.granted
          AND ((l.classid::bigint << 32) | l.objid::bigint) = thread_epoch_lock_key($1)`,
      [threadId],
    );
    if ((rows[0]?.waiting ?? 0) >= sessions) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('env store: a replace or CAS update racing an epoch bump in flight waits for it and is then refused', async () => {
  const solver = await openRoot('solver');
  // Existing entries: the writes below take the one-round-trip path (env_replace).
  await store.store(solver, opId(solver, 'seed-a'), { key: 'a', shortDescription: 'A.', value: 0 });
  await store.store(solver, opId(solver, 'seed-b'), { key: 'b', shortDescription: 'B.', value: 0 });
  const before = await snapshot(solver.rootThreadId, 'a');
  const reclaimer = await pool.connect();
  try {
    await reclaimer.query('BEGIN');
    await reclaimer.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [solver.threadId]);
    const storing = store.store(solver, opId(solver, 'late-store'), { key: 'a', shortDescription: 'A.', value: 1 });
    const updating = store.update(solver, opId(solver, 'late-update'), { key: 'b', value: 1, expectedVersion: 1 });
    // Both read the epoch only once the bump is decided: they wait for its transaction.
    await waitingForEpochLock(solver.threadId, 2);
    await reclaimer.query('COMMIT');
    for (const outcome of await Promise.allSettled([storing, updating])) {
      assert.equal(outcome.status, 'rejected');
      const error: unknown = outcome.status === 'rejected' ? outcome.reason : undefined;
      assert.ok(error instanceof StaleEpochError, `expected StaleEpochError, got ${String(error)}`);
      assert.equal(error.currentEpoch, solver.epoch + 1);
    }
  } finally {
    await reclaimer.query('ROLLBACK').catch(() => undefined);
    reclaimer.release();
  }
  assert.deepEqual((await store.get(solver.rootThreadId, 'a'))?.value, 0);
  assert.deepEqual((await store.get(solver.rootThreadId, 'b'))?.value, 0);
  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(events.slice(0, before.events.length), before.events);
  assert.deepEqual(
    events
      .slice(before.events.length)
      .map((event) => `${event.key} ${event.action}`)
      .sort(),
    ['a rejected', 'b rejected'],
  );
});

test('env store: an epoch bump waits for a write in flight under the old epoch, and later writes of it are refused', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 'seed'), { key: 'a', shortDescription: 'A.', value: 0 });
  const writer = await pool.connect();
  const reclaimer = await pool.connect();
  try {
    // The store's one-round-trip write, held before its commit.
    await writer.query('BEGIN');
    const { rows } = await writer.query<{ outcome: string }>(
      `SELECT outcome FROM env_replace($1, $2, $3, 'a', $4, 'stored', '1', 1, $5, 'A.', NULL, '{}', NULL)`,
      [solver.threadId, solver.rootThreadId, solver.epoch, opId(solver, 'in-flight'), solver.agent],
    );
    assert.equal(rows[0]?.outcome, 'written');
    const bumping = reclaimer.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [solver.threadId]);
    await waitingForEpochLock(solver.threadId);
    await writer.query('COMMIT');
    await bumping;
  } finally {
    await writer.query('ROLLBACK').catch(() => undefined);
    writer.release();
    reclaimer.release();
  }
  // The write in flight landed (it was made under the epoch it held); the old turn can write no more.
  assert.equal((await store.get(solver.rootThreadId, 'a'))?.value, 1);
  await assert.rejects(
    store.store(solver, opId(solver, 'after'), { key: 'a', shortDescription: 'A.', value: 2 }),
    StaleEpochError,
  );
  assert.equal((await store.get(solver.rootThreadId, 'a'))?.value, 1);
});

test('env store: a store of a new key is written by the one-call path, versions going on after a delete', async () => {
  const solver = await openRoot('solver');
  const replace = async (key: string, step: string, value: string) =>
    (
      await pool.query<{ outcome: string; version: number | null }>(
        `SELECT outcome, version FROM env_replace($1, $2, $3, $4, $5, 'stored', $6, 1, $7, 'New.', NULL, '{}', NULL)`,
        [solver.threadId, solver.rootThreadId, solver.epoch, key, opId(solver, step), value, solver.agent],
      )
    ).rows[0];
  assert.deepEqual(await replace('fresh', 'new', '1'), { outcome: 'written', version: 1 });
  const entry = await store.get(solver.rootThreadId, 'fresh');
  assert.deepEqual(
    [entry?.value, entry?.version, entry?.shortDescription, entry?.storedBy],
    [1, 1, 'New.', actorOf(solver)],
  );
  await store.delete(solver, opId(solver, 'delete'), 'fresh');
  assert.deepEqual(await replace('fresh', 'again', '2'), { outcome: 'written', version: 2 });
  // A stale epoch or an operation seen before is left to the full transaction, which refuses or answers it.
  const stale = await pool.query<{ outcome: string }>(
    `SELECT outcome FROM env_replace($1, $2, $3, 'other', $4, 'stored', '1', 1, $5, 'New.', NULL, '{}', NULL)`,
    [solver.threadId, solver.rootThreadId, solver.epoch - 1, opId(solver, 'stale'), solver.agent],
  );
  assert.equal(stale.rows[0]?.outcome, 'general');
  await assert.rejects(replace('third', 'new', '3'), /env_events_root_thread_id_operation_id_key/);
  assert.equal(await store.get(solver.rootThreadId, 'third'), undefined, 'the rolled-back call created nothing');
  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.key, event.action, event.version, event.actor]),
    [
      ['fresh', 'stored', 1, actorOf(solver)],
      ['fresh', 'deleted', 1, actorOf(solver)],
      ['fresh', 'stored', 2, actorOf(solver)],
    ],
  );
});

test('env store: a store of a key another writer is creating waits for it and replaces its entry (migration 021)', async () => {
  const root = await openRoot('racer');
  const [first, second] = await Promise.all([openChild(root, 'first'), openChild(root, 'second')]);
  const replace = (db: Pick<pg.Pool, 'query'>, writer: ThreadScope, value: string) =>
    db.query<{ outcome: string; version: number | null }>(
      `SELECT outcome, version FROM env_replace($1, $2, $3, 'raced', $4, 'stored', $5, 1, $6, 'Raced.', NULL, '{}', NULL)`,
      [writer.threadId, writer.rootThreadId, writer.epoch, opId(writer, 'store'), value, writer.agent],
    );
  // The first writer creates the key and has not committed when the second stores it.
  const [held, racer] = [await pool.connect(), await pool.connect()];
  try {
    await held.query('BEGIN');
    assert.deepEqual((await replace(held, first, '1')).rows[0], { outcome: 'written', version: 1 });
    const { rows: backend } = await racer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const waiting = replace(racer, second, '2');
    for (const deadline = Date.now() + 5000; ;) {
      assert.ok(Date.now() < deadline, 'the second store never waited for the first');
      const { rows } = await pool.query<{ wait: string | null }>(
        'SELECT wait_event_type AS wait FROM pg_stat_activity WHERE pid = $1',
        [backend[0]?.pid],
      );
      if (rows[0]?.wait === 'Lock') break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await held.query('COMMIT');
    // It replaced the entry itself, rather than leaving it to the caller's full transaction (`general`).
    assert.deepEqual((await waiting).rows[0], { outcome: 'written', version: 2 });
  } finally {
    await held.query('ROLLBACK').catch(() => undefined);
    held.release();
    racer.release();
  }
  const entry = await store.get(root.rootThreadId, 'raced');
  assert.deepEqual([entry?.value, entry?.version, entry?.storedBy], [2, 2, actorOf(second)]);
  const events = await store.events(root.rootThreadId);
  assert.deepEqual(
    events.filter((event) => event.key === 'raced').map((event) => [event.action, event.version, event.actor]),
    [
      ['stored', 1, actorOf(first)],
      ['stored', 2, actorOf(second)],
    ],
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Concurrent writers

/** Resolves once `parties` callers are waiting, so every writer reads before any writes. */
function barrier(parties: number): () => Promise<void> {
  let waiting = 0;
  let release!: () => void;
  const open = new Promise<void>((resolve) => (release = resolve));
  return () => {
    waiting += 1;
    if (waiting === parties) release();
    return open;
  };
}

test('env store: N concurrent read-modify-write increments with expectedVersion lose no update', async () => {
  const writers = 20;
  const root = await openRoot('coordinator');
  await store.store(root, opId(root, 'seed'), { key: 'counter', shortDescription: 'A shared counter.', value: 0 });
  const scopes = await Promise.all(Array.from({ length: writers }, (_, i) => openChild(root, `worker-${i}`)));
  const allRead = barrier(writers);
  let conflicts = 0;
  const conflictsBefore = store.versionConflicts;

  await Promise.all(
    scopes.map(async (scope) => {
      for (let attempt = 0; ; attempt += 1) {
        const entry = await store.get(root.rootThreadId, 'counter');
        assert.ok(entry);
        if (attempt === 0) await allRead();
        try {
          await store.update(scope, opId(scope, `increment:${attempt}`), {
            key: 'counter',
            value: (entry.value as number) + 1,
            expectedVersion: entry.version,
          });
          return;
        } catch (error) {
          if (!(error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict)) throw error;
          conflicts += 1;
        }
      }
    }),
  );

  const entry = await store.get(root.rootThreadId, 'counter');
  assert.equal(entry?.value, writers, 'no increment was lost');
  assert.equal(entry?.version, writers + 1);
  const events = await store.events(root.rootThreadId);
  const updates = events.filter((event) => event.action === 'updated');
  assert.equal(updates.length, writers);
  // Each update saw the one before it: version v holds the value v - 1.
  assert.deepEqual(
    updates.map((event) => [event.version, event.value]),
    Array.from({ length: writers }, (_, i) => [i + 2, i + 1]),
  );
  assert.deepEqual(new Set(updates.map((event) => event.actor.thread)), new Set(scopes.map((s) => s.threadId)));
  assert.ok(conflicts >= writers - 1, `every writer but one conflicted at least once (${conflicts} conflicts)`);
  // Refused attempts are counted, not logged: the log holds the seed and the updates only.
  assert.equal(store.versionConflicts - conflictsBefore, conflicts);
  assert.deepEqual(
    events.map((event) => event.action),
    ['stored', ...Array<string>(writers).fill('updated')],
  );
});

test('env store: 8 clients incrementing one key with expectedVersion, 5 times each, lose no update', async () => {
  const clients = 8;
  const increments = 5;
  const root = await openRoot('coordinator');
  await store.store(root, opId(root, 'seed'), { key: 'counter', shortDescription: 'A shared counter.', value: 0 });
  const scopes = await Promise.all(Array.from({ length: clients }, (_, i) => openChild(root, `worker-${i}`)));
  let conflicts = 0;

  await Promise.all(
    scopes.map(async (scope) => {
      for (let done = 0, attempt = 0; done < increments; attempt += 1) {
        const entry = await store.get(root.rootThreadId, 'counter');
        assert.ok(entry);
        try {
          await store.update(scope, opId(scope, `increment:${attempt}`), {
            key: 'counter',
            value: (entry.value as number) + 1,
            expectedVersion: entry.version,
          });
          done += 1;
        } catch (error) {
          if (!(error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict)) throw error;
          assert.ok((error.currentVersion ?? 0) > entry.version, 'a conflict names a later version');
          conflicts += 1;
        }
      }
    }),
  );

  await assertCounted(root, clients * increments, conflicts);
});

/**
 * The counter of `root`, seeded at 0 and incremented `total` times: its value and version, and one event per change,
 * each version holding the value before it plus one; no refused attempt is logged. `conflicts` shows they contended.
 */
async function assertCounted(root: ThreadScope, total: number, conflicts: number): Promise<void> {
  const entry = await store.get(root.rootThreadId, 'counter');
  assert.equal(entry?.value, total, 'the counter equals the increments');
  assert.equal(entry?.version, total + 1);
  const events = await store.events(root.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.version, event.value]),
    Array.from({ length: total + 1 }, (_, i) => [i === 0 ? 'stored' : 'updated', i + 1, i]),
    'one event per change, each version holding the value before it plus one; no refused attempt is logged',
  );
  assert.ok(conflicts > 0, 'the clients did contend');
}

test('env store: clients retrying from the conflict’s entry, without reading again, lose no update; a call of conflicts answers each with its entry', async () => {
  const clients = 8;
  const increments = 5;
  const root = await openRoot('coordinator');
  await store.store(root, opId(root, 'seed'), { key: 'counter', shortDescription: 'A shared counter.', value: 0 });
  const scopes = await Promise.all(Array.from({ length: clients }, (_, i) => openChild(root, `worker-${i}`)));
  const first = await store.get(root.rootThreadId, 'counter');
  assert.ok(first);
  const batchedBefore = store.batchCounts.batched;
  let conflicts = 0;

  await Promise.all(
    scopes.map(async (scope) => {
      // Every client reads once; after that it goes on from what each conflict tells it.
      let entry = { value: first.value as number, version: first.version };
      for (let done = 0, attempt = 0; done < increments; attempt += 1) {
        try {
          const written = await store.update(scope, opId(scope, `increment:${attempt}`), {
            key: 'counter',
            value: entry.value + 1,
            expectedVersion: entry.version,
          });
          entry = { value: entry.value + 1, version: written.version };
          done += 1;
        } catch (error) {
          if (!(error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict)) throw error;
          const current = error.conflict?.current;
          assert.ok(current, 'a conflict carries the entry');
          // The counter's value is always its version less one: a value from another version would break it.
          assert.equal(current.value, current.version - 1, 'the value is the one at that version');
          assert.ok(current.version > entry.version, 'a conflict names a later version');
          entry = { value: current.value, version: current.version };
          conflicts += 1;
        }
      }
    }),
  );

  await assertCounted(root, clients * increments, conflicts);
  // The clients' updates met in shared calls (`env_replace_many`), whose conflicts are answered together.
  assert.ok(store.batchCounts.batched > batchedBefore, 'updates went in calls of several');
});

test('env store: a retried update that wrote before gets its first answer in a call of conflicts, not a conflict', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  await store.store(solver, opId(solver, 's1'), { key: 'plan', shortDescription: 'The plan.', value: 'v1' });
  const written = await store.update(observer, opId(observer, 'u1'), { key: 'plan', value: 'v2', expectedVersion: 1 });
  assert.equal(written.version, 2);
  const batchedBefore = store.batchCounts.batched;

  // The first write goes alone; the two behind it share the next call: the retry (its expected version is stale now,
  // but its operation wrote) and a stale update of another writer.
  const [, retried, stale] = await Promise.allSettled([
    store.store(solver, opId(solver, 's2'), { key: 'other', shortDescription: 'Another key.', value: 1 }),
    store.update(observer, opId(observer, 'u1'), { key: 'plan', value: 'v2', expectedVersion: 1 }),
    store.update(solver, opId(solver, 'u2'), { key: 'plan', value: 'late', expectedVersion: 1 }),
  ]);
  assert.equal(store.batchCounts.batched, batchedBefore + 2, 'the retry and the stale update shared a call');
  assert.deepEqual(retried, { status: 'fulfilled', value: { action: 'updated', key: 'plan', version: 2 } });
  assert.equal(stale.status, 'rejected');
  assert.deepEqual((stale.reason as EnvDataError).conflict, {
    key: 'plan',
    expectedVersion: 1,
    current: { version: 2, value: 'v2' },
  });
  assert.equal((await store.get(solver.rootThreadId, 'plan'))?.version, 2);
});

test('env store: an update through the full transaction (no new value) names the entry it conflicted with', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's1'), { key: 'plan', shortDescription: 'The plan.', value: { step: 1 } });
  await store.update(solver, opId(solver, 'u1'), { key: 'plan', value: { step: 2 } });

  await assert.rejects(
    store.update(solver, opId(solver, 'u2'), { key: 'plan', shortDescription: 'Renamed.', expectedVersion: 1 }),
    (error: unknown) => {
      assert.ok(error instanceof EnvDataError);
      assert.equal(error.type, EnvDataErrorType.VersionConflict);
      assert.deepEqual(error.conflict, {
        key: 'plan',
        expectedVersion: 1,
        current: { version: 2, value: { step: 2 } },
      });
      return true;
    },
  );
  assert.equal((await store.get(solver.rootThreadId, 'plan'))?.shortDescription, 'The plan.');
});

test('env store: versions come from the key, not a scan of the log: a key with 20,000 past events goes on from them', async () => {
  const solver = await openRoot('solver');
  // A long history of one key, then its deletion, written straight into the log (through the API it takes minutes).
  await pool.query(
    `INSERT INTO env_events (root_thread_id, scope, key, action, actor_agent, actor_thread, operation_id, version)
     SELECT $1, '', 'k', CASE WHEN v = 20000 THEN 'deleted' ELSE 'updated' END, $2, $1, 'history:' || v, v
       FROM generate_series(1, 20000) v`,
    [solver.rootThreadId, solver.agent],
  );
  await pool.query('ANALYZE env_events');
  const again = await store.store(solver, opId(solver, 'again'), { key: 'k', shortDescription: 'Again.', value: 1 });
  assert.equal(again.version, 20001, 'the re-created key goes on from its highest version');
  assert.equal((await store.get(solver.rootThreadId, 'k'))?.version, 20001);
  const next = await store.store(solver, opId(solver, 'next'), { key: 'k', shortDescription: 'Next.', value: 2 });
  assert.equal(next.version, 20002, 'a replaced entry counts on from its own row');

  // The lookup of the highest version is one probe of the key's index, not a scan of the log.
  const { rows } = await pool.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${CONTINUE_VERSIONS}`, [
    solver.rootThreadId,
    '',
    'k',
  ]);
  const plan = JSON.stringify(rows[0]?.['QUERY PLAN']);
  assert.match(plan, /env_events_key_version_idx/);
  assert.doesNotMatch(plan, /"Seq Scan"[^}]*"Relation Name":"env_events"/);
});

test('env store: N concurrent plain stores are last-write-wins: every write lands, none is refused', async (t) => {
  const writers = 20;
  const root = await openRoot('coordinator');
  await store.store(root, opId(root, 'seed'), { key: 'counter', shortDescription: 'A shared counter.', value: 0 });
  const scopes = await Promise.all(Array.from({ length: writers }, (_, i) => openChild(root, `worker-${i}`)));
  const allRead = barrier(writers);

  await Promise.all(
    scopes.map(async (scope) => {
      const entry = await store.get(root.rootThreadId, 'counter');
      await allRead();
      await store.store(scope, opId(scope, 'increment'), {
        key: 'counter',
        shortDescription: 'A shared counter.',
        value: (entry?.value as number) + 1,
      });
    }),
  );

  const entry = await store.get(root.rootThreadId, 'counter');
  assert.equal(entry?.version, writers + 1);
  const writes = (await store.events(root.rootThreadId)).filter((event) => event.actor.thread !== root.threadId);
  assert.equal(writes.length, writers);
  assert.ok(writes.every((event) => event.action === 'stored'));
  // Not asserted: without expectedVersion the increments overwrite each other (this is what it is for).
  t.diagnostic(`plain stores: counter is ${String(entry?.value)} after ${writers} increments`);
});

// ---------------------------------------------------------------------------------------------------------------
// Writes in batches (migration 018)

test('env store: writes that overlap go in one call, and each gets the answer it would have had alone', async () => {
  const solver = await openRoot('solver');
  const other = await openChild(solver, 'other');
  const reclaimed = await openChild(solver, 'reclaimed');
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [reclaimed.threadId]);
  // A store of its own: nothing else of the suite writes beside these.
  const batches = new EnvStore(pool);
  const seed = (key: string, value: unknown) =>
    batches.store(solver, opId(solver, `seed-${key}`), { key, shortDescription: `Seed ${key}.`, value });
  for (const key of ['a', 'c', 'd', 'f']) await seed(key, 0);
  await batches.delete(solver, opId(solver, 'delete-f'), 'f');
  const seeded = (await batches.events(solver.rootThreadId)).length;
  await batches.flushAnnouncements();
  const feed = await listen(solver.rootThreadId);
  try {
    const before = batches.batchCounts;
    // The first write goes alone; every other one is issued while it is in flight, so they queue and go together.
    const outcomes = await Promise.allSettled([
      batches.store(solver, opId(solver, 'first'), { key: 'first', shortDescription: 'Alone.', value: 1 }),
      batches.store(solver, opId(solver, 'a'), { key: 'a', shortDescription: 'Replaced.', value: 1 }),
      batches.store(other, opId(other, 'b'), { key: 'b', shortDescription: 'New.', value: 'new', type: 't1' }),
      batches.store(solver, opId(solver, 'b'), {
        key: 'b',
        shortDescription: 'New, again.',
        value: 'again',
        type: 't2',
        tags: ['x', 'y'],
      }),
      batches.update(other, opId(other, 'c'), { key: 'c', value: 5, expectedVersion: 3 }),
      batches.update(solver, opId(solver, 'd'), { key: 'd', value: 6, expectedVersion: 1 }),
      batches.update(other, opId(other, 'd'), { key: 'd', value: 7, expectedVersion: 1 }),
      batches.store(solver, opId(solver, 'f'), { key: 'f', shortDescription: 'Back.', value: 'back' }),
      batches.update(solver, opId(solver, 'e'), { key: 'e', value: 1 }),
      batches.store(reclaimed, opId(reclaimed, 's'), { key: 's', shortDescription: 'Stale.', value: 1 }),
    ]);
    const answer = (outcome: PromiseSettledResult<EnvWriteResult>) =>
      outcome.status === 'fulfilled'
        ? outcome.value
        : outcome.reason instanceof EnvDataError
          ? { refused: outcome.reason.type, currentVersion: outcome.reason.currentVersion }
          : { refused: (outcome.reason as Error).constructor.name };
    assert.deepEqual(outcomes.map(answer), [
      { action: 'stored', key: 'first', version: 1 },
      { action: 'stored', key: 'a', version: 2 },
      { action: 'stored', key: 'b', version: 1 },
      // The second write of an entry in the batch takes effect after the first.
      { action: 'stored', key: 'b', version: 2 },
      { refused: EnvDataErrorType.VersionConflict, currentVersion: 1 },
      { action: 'updated', key: 'd', version: 2 },
      // Expecting the version the update before it replaced: a conflict, as it would be alone.
      { refused: EnvDataErrorType.VersionConflict, currentVersion: 2 },
      // A key created again after a delete goes on from its versions.
      { action: 'stored', key: 'f', version: 2 },
      { refused: EnvDataErrorType.NotFound, currentVersion: undefined },
      { refused: 'StaleEpochError' },
    ]);
    assert.deepEqual(
      batches.batchCounts,
      { batched: before.batched + 9, rerunAlone: before.rerunAlone },
      'every write after the first went in one call',
    );

    const entries = Object.fromEntries(
      await Promise.all(
        ['a', 'b', 'c', 'd', 'f', 'e', 's'].map(async (key) => [key, await batches.get(solver.rootThreadId, key)]),
      ),
    ) as Record<string, EnvEntry | undefined>;
    assert.deepEqual(
      Object.entries(entries).map(([key, entry]) => [key, entry?.value, entry?.version]),
      [
        ['a', 1, 2],
        ['b', 'again', 2],
        ['c', 0, 1],
        ['d', 6, 2],
        ['f', 'back', 2],
        ['e', undefined, undefined],
        ['s', undefined, undefined],
      ],
    );
    assert.deepEqual(
      [entries.b?.type, entries.b?.tags, entries.b?.shortDescription, entries.b?.storedBy],
      ['t2', ['x', 'y'], 'New, again.', actorOf(solver)],
    );
    const events = (await batches.events(solver.rootThreadId)).slice(seeded);
    // Logged in the order they took effect (stores and updates, the entries created, then the rest; refusals by the
    // full transaction after the call): each key's events in the order of its versions.
    const byKey = (key: string) => events.filter((event) => event.key === key);
    assert.deepEqual(
      byKey('b').map((event) => [event.version, event.actor.agent]),
      [
        [1, 'other'],
        [2, 'solver'],
      ],
    );
    assert.deepEqual(
      events
        .map((event) => [event.key, event.action, event.version, event.actor.agent])
        .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))),
      [
        ['a', 'stored', 2, 'solver'],
        ['b', 'stored', 1, 'other'],
        ['b', 'stored', 2, 'solver'],
        ['d', 'updated', 2, 'solver'],
        ['e', 'rejected', null, 'solver'],
        ['f', 'stored', 2, 'solver'],
        ['first', 'stored', 1, 'solver'],
        ['s', 'rejected', null, 'reclaimed'],
      ],
    );
    // Each change is announced once, as a write alone is (the refusals' transactions ran side by side, so their
    // announcements may come in either order).
    await batches.flushAnnouncements();
    assert.deepEqual(
      (await feed.until(events.length)).sort((x, y) => x.seq - y.seq),
      events.map((event) => ({
        rootThreadId: solver.rootThreadId,
        seq: event.seq,
        key: event.key,
        action: event.action,
      })),
    );
  } finally {
    await feed.close();
  }
});

test('env store: a batch that fails as a whole (an operation id seen before) is run write by write', async () => {
  const solver = await openRoot('solver');
  const batches = new EnvStore(pool);
  const first = await batches.store(solver, opId(solver, 'x'), { key: 'x', shortDescription: 'X.', value: 1 });
  // Past the first write's call: the writes below queue together.
  await new Promise((resolve) => setTimeout(resolve, 10));
  const before = batches.batchCounts;
  const outcomes = await Promise.all([
    batches.store(solver, opId(solver, 'alone'), { key: 'alone', shortDescription: 'Alone.', value: 0 }),
    // The retry of a write that committed: its event's operation id fails the whole call.
    batches.store(solver, opId(solver, 'x'), { key: 'x', shortDescription: 'X.', value: 1 }),
    batches.store(solver, opId(solver, 'y'), { key: 'y', shortDescription: 'Y.', value: 2 }),
    batches.update(solver, opId(solver, 'x2'), { key: 'x', value: 3 }),
  ]);
  assert.deepEqual(outcomes, [
    { action: 'stored', key: 'alone', version: 1 },
    first,
    { action: 'stored', key: 'y', version: 1 },
    { action: 'updated', key: 'x', version: 2 },
  ]);
  assert.deepEqual(
    batches.batchCounts,
    { batched: before.batched, rerunAlone: before.rerunAlone + 3 },
    'the call of the three queued writes failed, and each ran alone again',
  );
  // Run alone, side by side: each once, in no set order.
  assert.deepEqual(
    (await batches.events(solver.rootThreadId))
      .map((event) => [event.key, event.action, event.version])
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))),
    [
      ['alone', 'stored', 1],
      ['x', 'stored', 1],
      ['x', 'updated', 2],
      ['y', 'stored', 1],
    ],
  );
});

test('env store: a write waiting for a lock does not hold up the other writes of its store', async () => {
  const solver = await openRoot('solver');
  const batches = new EnvStore(pool);
  await batches.store(solver, opId(solver, 'seed'), { key: 'held', shortDescription: 'Held.', value: 0 });
  // Another session holds the entry's row, as a long transaction would.
  const holder = await pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM env_data WHERE root_thread_id = $1 AND key = 'held' FOR UPDATE`, [
      solver.rootThreadId,
    ]);
    let heldDone = false;
    const held = batches
      .store(solver, opId(solver, 'held'), { key: 'held', shortDescription: 'Held.', value: 1 })
      .finally(() => (heldDone = true));
    // Queued behind the held call, then sent in a call of its own once that one has stalled.
    const others = await Promise.all(
      ['one', 'two'].map((key) =>
        batches.store(solver, opId(solver, key), { key, shortDescription: `${key}.`, value: key }),
      ),
    );
    assert.deepEqual(
      others.map((result) => [result.key, result.version]),
      [
        ['one', 1],
        ['two', 1],
      ],
    );
    assert.equal(heldDone, false, 'the held write is still waiting for the row');
    await holder.query('ROLLBACK');
    assert.deepEqual(await held, { action: 'stored', key: 'held', version: 2 });
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Change feed

interface EnvNotification {
  rootThreadId: string;
  seq: number;
  key: string;
  action: EnvEvent['action'];
}

/**
 * A separate connection listening on the change feed, keeping only one root's notifications. The shared store's
 * announcements still gathering are sent first, so none of a write made before arrives after.
 */
async function listen(rootThreadId: string) {
  await store.flushAnnouncements();
  const client = new pg.Client({ connectionString: env.databaseUrl });
  await client.connect();
  const received: EnvNotification[] = [];
  const waiters: (() => void)[] = [];
  const fences = new Map<string, () => void>();
  client.on('notification', (message) => {
    if (message.channel !== ENV_EVENTS_CHANNEL || message.payload === undefined) return;
    const payload = JSON.parse(message.payload) as EnvNotification & { fence?: string };
    if (payload.fence !== undefined) return void fences.get(payload.fence)?.();
    if (payload.rootThreadId !== rootThreadId) return;
    received.push(payload);
    for (const wake of waiters.splice(0)) wake();
  });
  await client.query(`LISTEN ${ENV_EVENTS_CHANNEL}`);
  return {
    received,
    /** Waits until `count` notifications arrived (fails after a few seconds). */
    async until(count: number): Promise<EnvNotification[]> {
      const deadline = Date.now() + 5000;
      while (received.length < count) {
        const left = deadline - Date.now();
        assert.ok(left > 0, `expected ${count} notifications, got ${received.length}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return received.slice(0, count);
    },
    /**
     * Resolves once every announcement committed before the call has arrived: a notification of its own, committed
     * now, comes after them (Postgres delivers one listener's notifications in commit order). Fails after 5 s.
     */
    async fence(): Promise<void> {
      const token = randomUUID();
      const arrived = new Promise<void>((resolve) => fences.set(token, resolve));
      await pool.query('SELECT pg_notify($1, $2)', [ENV_EVENTS_CHANNEL, JSON.stringify({ fence: token })]);
      const timedOut = AbortSignal.timeout(5000);
      await Promise.race([
        arrived,
        new Promise((_resolve, reject) =>
          timedOut.addEventListener('abort', () => reject(new Error('the fence notification did not arrive'))),
        ),
      ]);
      fences.delete(token);
    },
    close: () => client.end(),
  };
}

test('env store: every change is announced once on baton_env_events with rootThreadId, seq, key and action', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  const feed = await listen(solver.rootThreadId);
  try {
    await store.store(solver, opId(solver, 's1'), { key: 'arc_task', shortDescription: 'The puzzle.', value: 1 });
    await store.store(solver, opId(solver, 's1'), { key: 'arc_task', shortDescription: 'The puzzle.', value: 1 });
    await store.update(observer, opId(observer, 'u1'), { key: 'arc_task', value: 2 });
    await store.store(observer, opId(observer, 's1'), { key: 'arc/patterns', shortDescription: 'Found.', value: [] });
    await store.delete(solver, opId(solver, 'd1'), 'arc_task');
    await assert.rejects(store.delete(solver, opId(solver, 'd2'), 'arc_task'));
    await assert.rejects(store.store(solver, opId(solver, 's2'), { key: 'bad key', shortDescription: 'x', value: 1 }));

    const events = await store.events(solver.rootThreadId);
    const expected = events.map((event) => ({
      rootThreadId: solver.rootThreadId,
      seq: event.seq,
      key: event.key,
      action: event.action,
    }));
    assert.deepEqual(
      expected.map((n) => [n.key, n.action]),
      [
        ['arc_task', 'stored'],
        ['arc_task', 'updated'],
        ['arc/patterns', 'stored'],
        ['arc_task', 'deleted'],
        ['arc_task', 'rejected'],
      ],
    );
    assert.deepEqual(await feed.until(expected.length), expected);
    // The duplicate operation and the invalid key announced nothing: had they, it would have arrived before the fence.
    await store.flushAnnouncements();
    await feed.fence();
    assert.equal(feed.received.length, expected.length);
  } finally {
    await feed.close();
  }
});

/**
 * The pool, except that each transaction waits at COMMIT until `gate` opens (and says it got there); the one-call write
 * (`env_replace`) is run in such a transaction.
 */
function poolHeldAtCommit(gate: Promise<void>, atCommit: () => void): pg.Pool {
  return new Proxy(pool, {
    get(target, property, receiver) {
      // A query of the pool itself (the store's announcements) is not held: only checked-out clients are.
      if (property === 'query') return target.query.bind(target);
      if (property !== 'connect') return Reflect.get(target, property, receiver) as unknown;
      return async () => {
        const client = await target.connect();
        return new Proxy(client, {
          get(clientTarget, clientProperty) {
            const member = Reflect.get(clientTarget, clientProperty, clientTarget) as unknown;
            if (clientProperty !== 'query' || typeof member !== 'function') {
              return typeof member === 'function'
                ? (member as (...args: unknown[]) => unknown).bind(clientTarget)
                : member;
            }
            const query = (...a: unknown[]) => (member as (...a: unknown[]) => Promise<unknown>).apply(clientTarget, a);
            return async (...args: unknown[]) => {
              if (args[0] === 'COMMIT') {
                atCommit();
                await gate;
              }
              // The one-call write commits as it returns: run it in a transaction held the same way.
              if ((args[0] as { name?: unknown } | undefined)?.name === 'baton-env-replace') {
                await query('BEGIN');
                try {
                  const result = await query(...args);
                  atCommit();
                  await gate;
                  await query('COMMIT');
                  return result;
                } catch (error) {
                  await query('ROLLBACK');
                  throw error;
                }
              }
              return query(...args);
            };
          },
        });
      };
    },
  });
}

/** Events of a root committed so far, counted directly (the store's reads wait for writers in flight). */
async function committedEventCount(rootThreadId: string): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(
    'SELECT count(*)::int AS count FROM env_events WHERE root_thread_id = $1',
    [rootThreadId],
  );
  return rows[0]?.count ?? -1;
}

/** Resolves once a session waits for the root's env lock (a reader of the log queued behind a writer in flight). */
async function waitingForEnvLock(rootThreadId: string): Promise<void> {
  for (;;) {
    const { rows } = await pool.query<{ waiting: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_locks l
                       WHERE l.locktype = 'advisory' AND NOT l.granted
                         AND ((l.classid::bigint << 32) | l.objid::bigint) = env_root_lock_key($1)) AS waiting`,
      [rootThreadId],
    );
    if (rows[0]?.waiting) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

for (const path of ['one call', 'full transaction'] as const) {
  test(`env store: a change is announced and visible only once it commits (${path})`, async () => {
    const solver = await openRoot('solver');
    // A new key's store takes the one-call path (migration 016); a delete always runs the full transaction.
    if (path === 'full transaction') {
      await store.store(solver, opId(solver, 'seed'), { key: 'arc_task', shortDescription: 'Seed.', value: 0 });
    }
    const before = await committedEventCount(solver.rootThreadId);
    const feed = await listen(solver.rootThreadId);
    let open!: () => void;
    let reached!: () => void;
    const atCommit = new Promise<void>((resolve) => (reached = resolve));
    const held = new EnvStore(poolHeldAtCommit(new Promise<void>((resolve) => (open = resolve)), reached));
    try {
      const writing =
        path === 'one call'
          ? held.store(solver, opId(solver, 's1'), { key: 'arc_task', shortDescription: 'Held.', value: 1 })
          : held.delete(solver, opId(solver, 'd1'), 'arc_task');
      await atCommit;
      // The event is written but not committed: nothing may be seen or announced yet (an announcement sent before
      // the commit would arrive before the fence).
      await feed.fence();
      assert.deepEqual(feed.received, []);
      assert.equal((await store.get(solver.rootThreadId, 'arc_task'))?.value, path === 'one call' ? undefined : 0);
      assert.equal(await committedEventCount(solver.rootThreadId), before);
      // A reader of the log waits for the writer in flight instead of reading past it.
      const reading = store.events(solver.rootThreadId, { since: 0 });
      await waitingForEnvLock(solver.rootThreadId);

      open();
      const action = path === 'one call' ? 'stored' : 'deleted';
      assert.deepEqual(await writing, { action, key: 'arc_task', version: 1 });
      const event = (await reading)[before];
      assert.ok(event);
      assert.deepEqual([event.key, event.action], ['arc_task', action]);
      assert.deepEqual(await feed.until(1), [
        { rootThreadId: solver.rootThreadId, seq: event.seq, key: 'arc_task', action },
      ]);
    } finally {
      open();
      await feed.close();
    }
  });
}

test('env store: events({ since }) returns exactly the later events, oldest first, up to the limit', async () => {
  const solver = await openRoot('solver');
  for (const key of ['one', 'two', 'three', 'four']) {
    await store.store(solver, opId(solver, key), { key, shortDescription: `Key ${key}.`, value: key });
  }
  const all = await store.events(solver.rootThreadId);
  assert.deepEqual(
    all.map((event) => event.key),
    ['one', 'two', 'three', 'four'],
  );
  const seqs = all.map((event) => event.seq);
  assert.deepEqual(
    seqs,
    [...seqs].sort((a, b) => a - b),
  );
  assert.ok(seqs.every((seq) => Number.isSafeInteger(seq)));
  const [first, second] = all;
  assert.ok(first && second);

  assert.deepEqual(await store.events(solver.rootThreadId, { since: first.seq }), all.slice(1));
  assert.deepEqual(await store.events(solver.rootThreadId, { since: second.seq }), all.slice(2));
  assert.deepEqual(await store.events(solver.rootThreadId, { since: all.at(-1)?.seq ?? 0 }), []);
  assert.deepEqual(await store.events(solver.rootThreadId, { since: first.seq, limit: 2 }), all.slice(1, 3));
  assert.deepEqual(await store.events(solver.rootThreadId, { since: 0 }), all);
});

test('env store: a key created again after a delete continues its versions, so a stale expectedVersion fails', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 'v1'), { key: 'k', shortDescription: 'First.', value: 1 });
  await store.delete(solver, opId(solver, 'del'), 'k');
  const again = await store.store(solver, opId(solver, 'v2'), { key: 'k', shortDescription: 'Again.', value: 2 });
  assert.equal(again.version, 2, 'versions keep rising across the delete: v1, deleted, v2');
  await assert.rejects(
    store.update(solver, opId(solver, 'stale'), { key: 'k', value: 9, expectedVersion: 1 }),
    (error: unknown) => error instanceof EnvDataError && error.type === 'EnvData.VersionConflict',
  );
  assert.equal((await store.get(solver.rootThreadId, 'k'))?.value, 2);
});

test('env store: a retried version conflict is checked again, reports the current version and logs nothing', async () => {
  const solver = await openRoot('solver');
  await store.store(solver, opId(solver, 's'), { key: 'k', shortDescription: 'K.', value: 1 });
  await store.store(solver, opId(solver, 's2'), { key: 'k', shortDescription: 'K.', value: 2 });
  const attempt = () => store.update(solver, opId(solver, 'u'), { key: 'k', value: 3, expectedVersion: 1 });
  for (let i = 0; i < 2; i++) {
    await assert.rejects(
      attempt(),
      (error: unknown) =>
        error instanceof EnvDataError && error.currentVersion === 2 && /at version 2/.test(error.message),
    );
  }
  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.version]),
    [
      ['stored', 1],
      ['stored', 2],
    ],
  );
});

test('env store: one operation id in two roots writes in each (operation ids are scoped by root)', async () => {
  const a = await openRoot('solver');
  const b = await openRoot('solver');
  await store.store(a, 'same-op', { key: 'k', shortDescription: 'In A.', value: 'a' });
  await store.store(b, 'same-op', { key: 'k', shortDescription: 'In B.', value: 'b' });
  assert.equal((await store.get(a.rootThreadId, 'k'))?.value, 'a');
  assert.equal((await store.get(b.rootThreadId, 'k'))?.value, 'b');
});

test('env store: Map and Set values are refused rather than stored as {}', async () => {
  const solver = await openRoot('solver');
  for (const value of [new Map([['a', 1]]), { nested: new Set([1]) }]) {
    await assert.rejects(
      store.store(solver, opId(solver, `m${Math.random()}`), { key: 'k', shortDescription: 'K.', value }),
      (error: unknown) => error instanceof EnvDataError && error.type === 'EnvData.NotSerializable',
    );
  }
  assert.equal(await store.get(solver.rootThreadId, 'k'), undefined);
});

test('env store: writers of one root do not wait for each other, and paging by seq never skips a late commit', async () => {
  const solver = await openRoot('solver');
  let open!: () => void;
  let reached!: () => void;
  const atCommit = new Promise<void>((resolve) => (reached = resolve));
  const held = new EnvStore(poolHeldAtCommit(new Promise<void>((resolve) => (open = resolve)), reached));
  try {
    // The first writer takes its sequence number, then stalls before COMMIT.
    const first = held.store(solver, opId(solver, 'a'), { key: 'a', shortDescription: 'A.', value: 1 });
    await atCommit;
    // A second writer of the same root does not wait for it: it takes a later number and commits first.
    assert.deepEqual(await store.store(solver, opId(solver, 'b'), { key: 'b', shortDescription: 'B.', value: 2 }), {
      action: 'stored',
      key: 'b',
      version: 1,
    });
    assert.equal(await committedEventCount(solver.rootThreadId), 1);
    // A reader now must not return b alone (paging on from b would skip a forever): it waits for the first writer.
    const reading = store.events(solver.rootThreadId);
    await waitingForEnvLock(solver.rootThreadId);
    open();
    await first;
    const events = await reading;
    assert.deepEqual(
      events.map((event) => event.key),
      ['a', 'b'],
    );
    assert.ok((events[0]?.seq ?? 0) < (events[1]?.seq ?? 0));
  } finally {
    open();
  }
});

test('env store: value_size is the compact JSON size for every action', async () => {
  const solver = await openRoot('solver');
  const value = {
    grid: [
      [1, 2],
      [3, 4],
    ],
    note: 'same value',
  };
  await store.store(solver, opId(solver, 's'), { key: 'k', shortDescription: 'K.', value });
  await store.update(solver, opId(solver, 'u'), { key: 'k', shortDescription: 'K, described again.' });
  await store.delete(solver, opId(solver, 'd'), 'k');
  const sizes = (await store.events(solver.rootThreadId)).map((event) => event.valueSize);
  assert.deepEqual(sizes, Array(3).fill(Buffer.byteLength(JSON.stringify(value))));
});
