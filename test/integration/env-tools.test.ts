import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createToolRegistry } from '../../activities/tools';
import { createToolContext } from '../../activities/tools/context';
import { MAX_CONFLICT_VALUE_CHARS } from '../../activities/tools/env-data';
import { ToolError, type ToolOutput } from '../../activities/tools/types';
import { checkToolCall } from '../../activities/tools/validate';
import type { AgentDefinition } from '../../common/agent-definition';
import type { ThreadScope } from '../../common/types';
import { EnvStore } from '../../db/env-data';
import { createPool } from '../../db/pool';
import { openChildThread, openRootThread } from '../../testing/thread-fixtures';
import { readTestEnv } from '../../testing/test-env';
import {
  EnvDataError as PackageEnvDataError,
  EnvDataErrorType as PackageEnvDataErrorType,
  type EnvConflict,
} from '../../index';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl });
const store = new EnvStore(pool);
const registry = createToolRegistry({
  filesRoot: env.stateDir,
  arcDataDir: env.stateDir,
  describeAgent: () => undefined,
});

after(async () => {
  await pool.end();
});

function agentNamed(name: string): AgentDefinition {
  return {
    name,
    description: `The ${name}.`,
    capabilities: [],
    approval: [],
    max_steps: 25,
    delegation_context: 'standard',
    body: '',
    source: `${name}.md`,
  };
}

const openRoot = (agent: string) => openRootThread(pool, agent);

const openChild = (parent: ThreadScope, agent: string) => openChildThread(pool, parent, agent);

type CallOutcome = { ok: true; text: string } | { ok: false; error: string; kind: 'validation' | 'tool' };

/**
 * Makes one tool call the way the tool activity does: the model's raw JSON arguments are checked against the
 * agent's capabilities and the tool's schema, then the tool runs with a scope the workflow set. The text is what
 * the model would read.
 */
async function call(
  scope: ThreadScope,
  name: string,
  args: Record<string, unknown> | string,
  options: { operationId?: string; env?: EnvStore } = {},
): Promise<CallOutcome> {
  const checked = checkToolCall(
    { id: 'call_1', name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
    agentNamed(scope.agent),
    registry,
  );
  if (!checked.ok) return { ok: false, error: checked.error, kind: 'validation' };
  assert.ok(checked.kind === 'tool', `'${name}' is a tool`);
  const { tool } = checked;
  assert.ok(tool.run !== undefined, `'${name}' runs in the activity`);
  const context = createToolContext({
    scope,
    agent: agentNamed(scope.agent),
    operationId: options.operationId ?? `${scope.threadId}:${name}:${nextStep()}`,
    world: { name: 'default', variables: {} },
    envStore: options.env ?? store,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
  });
  try {
    return { ok: true, text: asText(await tool.run(checked.args, context)) };
  } catch (error) {
    if (error instanceof ToolError) return { ok: false, error: error.message, kind: 'tool' };
    throw error;
  }
}

let step = 0;
function nextStep(): number {
  step += 1;
  return step;
}

function asText(output: ToolOutput): string {
  return typeof output === 'string' ? output : JSON.stringify(output);
}

function okText(outcome: CallOutcome): string {
  assert.ok(outcome.ok, `expected success, got: ${outcome.ok ? '' : outcome.error}`);
  return outcome.text;
}

function toolError(outcome: CallOutcome): string {
  assert.ok(!outcome.ok, `expected a refusal, got: ${outcome.ok ? outcome.text : ''}`);
  assert.equal(outcome.kind, 'tool', `expected a tool error, got a validation error: ${outcome.error}`);
  return outcome.error;
}

function validationError(outcome: CallOutcome): string {
  assert.ok(!outcome.ok, `expected a refusal, got: ${outcome.ok ? outcome.text : ''}`);
  assert.equal(outcome.kind, 'validation', `expected a validation error, got a tool error: ${outcome.error}`);
  return outcome.error;
}

const ARC_TASK = {
  task_id: 'training-001',
  input_grid: [
    [0, 1, 2],
    [3, 4, 5],
  ],
  output_grid: [
    [5, 4, 3],
    [2, 1, 0],
  ],
};

test('env tools: store_env_data, get_env_data, update_env_data and delete_env_data answer with the documented texts', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');

  assert.equal(
    okText(
      await call(solver, 'store_env_data', {
        key: 'arc_task',
        short_description: 'The current ARC puzzle: training-001, 2x3 grids.',
        value: ARC_TASK,
      }),
    ),
    "Stored 'arc_task' in environment data.",
  );
  // The observer, deeper in the same tree, reads exactly the JSON the solver stored.
  assert.equal(okText(await call(observer, 'get_env_data', { key: 'arc_task' })), JSON.stringify(ARC_TASK));

  assert.equal(
    okText(await call(observer, 'store_env_data', { key: 'x', short_description: 'A note.', value: 'first' })),
    "Stored 'x' in environment data.",
  );
  assert.equal(
    okText(await call(solver, 'update_env_data', { key: 'x', value: { second: true }, expected_version: 1 })),
    "Updated 'x' (now version 2).",
  );
  assert.equal(okText(await call(observer, 'get_env_data', { key: 'x' })), '{"second":true}');
  assert.equal(
    okText(await call(observer, 'update_env_data', { key: 'x', short_description: 'A revised note.' })),
    "Updated 'x' (now version 3).",
  );
  const entry = await store.get(solver.rootThreadId, 'x');
  assert.deepEqual(entry?.value, { second: true }, 'the value left out is kept');
  assert.equal(entry?.shortDescription, 'A revised note.');
  assert.deepEqual(entry?.storedBy, { agent: 'observer', thread: observer.threadId });

  assert.equal(okText(await call(solver, 'delete_env_data', { key: 'x' })), "Deleted 'x' from environment data.");
  assert.equal(await store.get(solver.rootThreadId, 'x'), undefined);

  // Scalars come back as their JSON too.
  okText(await call(solver, 'store_env_data', { key: 'answer', short_description: 'A string.', value: 'forty-two' }));
  assert.equal(okText(await call(solver, 'get_env_data', { key: 'answer' })), '"forty-two"');
  okText(await call(solver, 'store_env_data', { key: 'nothing', short_description: 'Null.', value: null }));
  assert.equal(okText(await call(solver, 'get_env_data', { key: 'nothing' })), 'null');

  const events = await store.events(solver.rootThreadId);
  assert.deepEqual(
    events.map((event) => [event.action, event.key, event.actor.agent, event.actor.thread]),
    [
      ['stored', 'arc_task', 'solver', solver.threadId],
      ['stored', 'x', 'observer', observer.threadId],
      ['updated', 'x', 'solver', solver.threadId],
      ['updated', 'x', 'observer', observer.threadId],
      ['deleted', 'x', 'solver', solver.threadId],
      ['stored', 'answer', 'solver', solver.threadId],
      ['stored', 'nothing', 'solver', solver.threadId],
    ],
  );
});

test('env tools: list_env_data returns the manifest JSON without values, filtered, and exclude_self drops the caller’s own', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  okText(
    await call(solver, 'store_env_data', {
      key: 'arc/task',
      short_description: 'The puzzle.',
      value: ARC_TASK,
      type: 'task',
      tags: ['arc'],
    }),
  );
  okText(
    await call(observer, 'store_env_data', {
      key: 'arc/patterns',
      short_description: 'Patterns found so far.',
      value: ['rotation'],
      type: 'finding',
    }),
  );
  okText(await call(observer, 'store_env_data', { key: 'notes', short_description: 'Loose notes.', value: 'n' }));

  const text = okText(await call(observer, 'list_env_data', {}));
  assert.doesNotMatch(text, /rotation|training-001|"value"/, 'no value leaks into the manifest');
  const manifest = JSON.parse(text) as Record<string, unknown>[];
  const stored = await store.list(solver.rootThreadId);
  assert.deepEqual(
    manifest,
    stored.map((entry) => ({
      key: entry.key,
      short_description: entry.shortDescription,
      stored_by: entry.storedBy.agent,
      version: entry.version,
      updated_at: entry.updatedAt.toISOString(),
      ...(entry.type === null ? {} : { type: entry.type }),
      ...(entry.tags.length === 0 ? {} : { tags: entry.tags }),
    })),
  );
  assert.deepEqual(manifest[1], {
    key: 'arc/task',
    short_description: 'The puzzle.',
    stored_by: 'solver',
    version: 1,
    updated_at: stored[1]?.updatedAt.toISOString(),
    type: 'task',
    tags: ['arc'],
  });

  const keys = async (scope: ThreadScope, args: Record<string, unknown> | string) =>
    (JSON.parse(okText(await call(scope, 'list_env_data', args))) as { key: string }[]).map((entry) => entry.key);
  assert.deepEqual(await keys(observer, { exclude_self: true }), ['arc/task']);
  assert.deepEqual(await keys(solver, { exclude_self: true }), ['arc/patterns', 'notes']);
  assert.deepEqual(await keys(observer, { exclude_self: false }), ['arc/patterns', 'arc/task', 'notes']);
  assert.deepEqual(await keys(solver, { prefix: 'arc/' }), ['arc/patterns', 'arc/task']);
  assert.deepEqual(await keys(solver, { type: 'finding' }), ['arc/patterns']);
  assert.deepEqual(await keys(solver, { tag: 'arc' }), ['arc/task']);
  assert.deepEqual(await keys(solver, { stored_by: 'observer' }), ['arc/patterns', 'notes']);
  // An empty arguments string (some models send none) is an empty object.
  assert.deepEqual(await keys(solver, ''), ['arc/patterns', 'arc/task', 'notes']);

  const otherRoot = await openRoot('solver');
  assert.equal(okText(await call(otherRoot, 'list_env_data', {})), '[]');
});

test('env tools: refusals come back as tool errors the model can act on, and change nothing', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  okText(await call(solver, 'store_env_data', { key: 'plan', short_description: 'The plan.', value: 'v1' }));
  okText(await call(observer, 'update_env_data', { key: 'plan', value: 'v2', expected_version: 1 }));
  const before = { entry: await store.get(solver.rootThreadId, 'plan') };

  assert.equal(
    toolError(await call(solver, 'get_env_data', { key: 'missing' })),
    "No environment data under 'missing'. Call list_env_data() to see what exists.",
  );
  assert.equal(
    toolError(await call(solver, 'update_env_data', { key: 'missing', value: 1 })),
    "no entry 'missing' to update (use store_env_data to create it)",
  );
  assert.equal(toolError(await call(solver, 'delete_env_data', { key: 'missing' })), "no entry 'missing' to delete");
  // A conflict shows the entry's value, so the model can retry from it without reading the entry first ...
  assert.equal(
    toolError(await call(solver, 'update_env_data', { key: 'plan', value: 'stale', expected_version: 1 })),
    `'plan' is at version 2, not 1. Its value at version 2: "v2". To change it from there, update again with ` +
      'expected_version 2.',
  );
  // ... unless the value is long: then the model is told to read it again.
  const long = 'x'.repeat(MAX_CONFLICT_VALUE_CHARS);
  okText(await call(solver, 'store_env_data', { key: 'notes', short_description: 'Long notes.', value: 'short' }));
  okText(await call(observer, 'update_env_data', { key: 'notes', value: long, expected_version: 1 }));
  assert.equal(
    toolError(await call(solver, 'update_env_data', { key: 'notes', value: 'stale', expected_version: 1 })),
    "'notes' is at version 2, not 1: read it again and retry",
  );
  assert.equal((await store.get(solver.rootThreadId, 'notes'))?.value, long);
  assert.equal(
    toolError(await call(solver, 'update_env_data', { key: 'plan' })),
    'give a new short_description, a new value, or both',
  );
  const small = new EnvStore(pool, { maxValueBytes: 32 });
  assert.equal(
    toolError(
      await call(
        solver,
        'store_env_data',
        { key: 'plan', short_description: 'Too big.', value: 'x'.repeat(40) },
        { env: small },
      ),
    ),
    'the value is 42 bytes of JSON; the limit is 32 bytes (store a smaller part, or split it over several keys)',
  );
  assert.match(
    toolError(await call(solver, 'update_env_data', { key: 'plan', value: 'x'.repeat(40) }, { env: small })),
    /^the value is 42 bytes of JSON; the limit is 32 bytes/,
  );

  assert.deepEqual({ entry: await store.get(solver.rootThreadId, 'plan') }, before);
  assert.equal((await store.get(solver.rootThreadId, 'missing')) ?? 'absent', 'absent');
});

test('a tool of the user’s own reads a conflict from the package’s EnvDataError and retries from it', async () => {
  const solver = await openRoot('solver');
  const observer = await openChild(solver, 'observer');
  const contextOf = (scope: ThreadScope, step: string) =>
    createToolContext({
      scope,
      agent: agentNamed(scope.agent),
      operationId: `${scope.threadId}:${step}`,
      world: { name: 'default', variables: {} },
      envStore: store,
      signal: new AbortController().signal,
      heartbeat: () => undefined,
    });
  await contextOf(solver, 'seed').env.store({ key: 'tally', shortDescription: 'A tally.', value: { count: 1 } });
  await contextOf(observer, 'bump').env.update({ key: 'tally', value: { count: 2 }, expectedVersion: 1 });

  // What a tool's `run` does with `ctx.env`: an update from the version it read, retried from the conflict's entry.
  const tool = contextOf(solver, 'increment');
  const error = await tool.env.update({ key: 'tally', value: { count: 2 }, expectedVersion: 1 }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof PackageEnvDataError, 'the error is the one the package exports');
  assert.equal(error.type, PackageEnvDataErrorType.VersionConflict);
  const conflict: EnvConflict | undefined = error.conflict;
  assert.deepEqual(conflict, { key: 'tally', expectedVersion: 1, current: { version: 2, value: { count: 2 } } });
  const { current } = conflict;
  const written = await tool.env.update({
    key: 'tally',
    value: { count: current.value.count + 1 },
    expectedVersion: current.version,
  });
  assert.equal(written.version, 3);
  assert.deepEqual((await store.get(solver.rootThreadId, 'tally'))?.value, { count: 3 });
});

test('env tools: invented scope arguments are refused by validation and reach no store', async () => {
  const solver = await openRoot('solver');
  const other = await openRoot('solver');
  okText(await call(other, 'store_env_data', { key: 'secret', short_description: 'Not yours.', value: 42 }));
  const eventsBefore = await store.events(solver.rootThreadId);

  const valid: Record<string, Record<string, unknown>> = {
    store_env_data: { key: 'secret', short_description: 'Trying another scope.', value: 1 },
    get_env_data: { key: 'secret' },
    list_env_data: {},
    update_env_data: { key: 'secret', value: 2 },
    delete_env_data: { key: 'secret' },
  };
  for (const [name, args] of Object.entries(valid)) {
    for (const invented of ['root_thread_id', 'scope', 'thread_id']) {
      const error = validationError(await call(solver, name, { ...args, [invented]: other.rootThreadId }));
      assert.equal(error, `Invalid arguments for '${name}': unknown argument '${invented}'.`);
    }
    assert.equal(
      validationError(await call(solver, name, { ...args, root_thread_id: other.rootThreadId, agent: 'x' })),
      `Invalid arguments for '${name}': unknown arguments 'root_thread_id', 'agent'.`,
    );
  }
  const secret = await store.get(other.rootThreadId, 'secret');
  assert.equal(secret?.value, 42);
  assert.equal(secret?.version, 1);
  assert.deepEqual(await store.events(solver.rootThreadId), eventsBefore);
  assert.equal((await store.events(other.rootThreadId)).length, 1);
});

test('env tools: malformed arguments are refused by validation with the field named', async () => {
  const solver = await openRoot('solver');
  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['store_env_data', { key: 'k', value: 1 }, /'short_description'/],
    ['store_env_data', { key: 'k', short_description: '   ', value: 1 }, /'short_description' is required/],
    ['store_env_data', { key: 'k', short_description: 'd'.repeat(501), value: 1 }, /'short_description'/],
    ['store_env_data', { key: 'k', short_description: 'No value.' }, /'value'/],
    ['store_env_data', { key: 'bad key', short_description: 'd', value: 1 }, /'key' may hold only letters/],
    ['store_env_data', { key: 'a//b', short_description: 'd', value: 1 }, /'key' may hold only letters/],
    ['store_env_data', { key: 'k'.repeat(201), short_description: 'd', value: 1 }, /'key'/],
    ['get_env_data', {}, /'key'/],
    ['update_env_data', { key: 'k', value: 1, expected_version: 0 }, /'expected_version'/],
    ['update_env_data', { key: 'k', value: 1, expected_version: 1.5 }, /'expected_version'/],
    ['list_env_data', { exclude_self: 'yes' }, /'exclude_self'/],
  ];
  for (const [name, args, message] of refusals) {
    assert.match(validationError(await call(solver, name, args)), message, `${name} ${JSON.stringify(args)}`);
  }
  assert.deepEqual(await store.events(solver.rootThreadId), []);
  assert.deepEqual(await store.list(solver.rootThreadId), []);
});

test('env tools: a retried tool call with the same operation id writes once and answers the same', async () => {
  const solver = await openRoot('solver');
  const operationId = `${solver.threadId}:run-1:3:0`;
  const args = { key: 'arc_task', short_description: 'The puzzle.', value: ARC_TASK };
  const first = okText(await call(solver, 'store_env_data', args, { operationId }));
  const retried = okText(await call(solver, 'store_env_data', args, { operationId }));
  assert.equal(retried, first);
  assert.equal((await store.events(solver.rootThreadId)).length, 1);
  assert.equal((await store.get(solver.rootThreadId, 'arc_task'))?.version, 1);
});

test('env tools: a value with a NUL character comes back as a tool error, not a failed activity', async () => {
  const solver = await openRoot('solver');
  const outcome = await call(solver, 'store_env_data', { key: 'k', short_description: 'NUL.', value: 'a\u0000b' });
  assert.match(toolError(outcome), /not JSON-serialisable|cannot hold/);
  assert.equal(await store.get(solver.rootThreadId, 'k'), undefined);
});
