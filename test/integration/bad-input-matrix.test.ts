/**
 * The bad-input matrix (issue 13): every input a model can send through a tool call, run the way the worker runs it
 * (a stored assistant message, then the tool activity), each asserting the error text the model receives and that
 * nothing stored changed: the tables of the conversation are snapshotted before and after every call.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities, type Activities } from '../../activities';
import { BatonClientError, WorldsClient, type WorldHandle } from '../../client';
import type { ThreadScope } from '../../common/types';
import { EnvStore } from '../../db/env-data';
import { createPool } from '../../db/pool';
import { appendMessage, listMessages } from '../../db/transcripts';
import { setWorldVariablesText } from '../../db/worlds';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { createModelClient } from '../../worker/model-client';

const env = readTestEnv();
const workDir = fs.realpathSync(fs.mkdtempSync(path.join(env.stateDir, 'matrix-')));
const pool = createPool({ connectionString: env.databaseUrl });
const world = `matrix-${process.pid}`;
const caller = parseAgentFile(
  '---\nname: caller\ndescription: Tries everything.\ncapabilities: [shell, read_file, list_files, helper]\n---\nGo.\n',
  'caller.md',
);
const helper = parseAgentFile('---\nname: helper\ndescription: Helps.\n---\nHelp.\n', 'helper.md');
const outsider = parseAgentFile('---\nname: outsider\ndescription: Not declared.\n---\nNo.\n', 'outsider.md');
const agents = new Map([
  ['caller', caller],
  ['helper', helper],
  ['outsider', outsider],
]);
let activities: Activities;
let scope: ThreadScope;
let agentVersion: string;

before(async () => {
  activities = createActivities({
    pool,
    // No model is called: tool calls are stored as if it had made them.
    openai: createModelClient({ baseURL: 'http://127.0.0.1:1/v1', apiKey: 'unused', model: 'unused' }),
    model: 'unused',
    agents: () => agents,
    tools: createAgentCatalog({ agents, filesRoot: workDir, arcDataDir: DEFAULT_ARC_DATA_DIR }).tools,
    heartbeatIntervalMs: 50,
  });
  fs.mkdirSync(path.join(workDir, 'inside'));
  fs.writeFileSync(path.join(workDir, 'inside', 'note.txt'), 'a note\n');
  await setWorldVariablesText(pool, world, `working_directory=${workDir}\n`);
  const threadId = uniqueThreadId('matrix');
  const { epoch } = await run(activities.ensureThread, { threadId, rootThreadId: threadId, agent: 'caller', world });
  agentVersion = (await run(activities.resolveAgent, { name: 'caller' })).version;
  scope = { rootThreadId: threadId, threadId, agent: 'caller', epoch };
  const store = new EnvStore(pool);
  await store.store(scope, `${threadId}:seed`, {
    key: 'seed',
    shortDescription: 'Seeded by the test.',
    value: { a: 1 },
  });
  await store.update(scope, `${threadId}:seed2`, { key: 'seed', value: { a: 2 } });
});

after(() => pool.end());

/** Runs an activity in a fresh mock context (typed: the SDK's generic signature loses the result type). */
function run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return new MockActivityEnvironment().run(fn, ...args);
}

/**
 * Every row of the conversation's tables (the transcript up to `maxSeq`), in a stable order, and the files of the
 * working directory. Logs of the call itself are left out: refused env writes in `env_events`, and the `tool_runs`
 * record of a shell call.
 */
async function snapshot(maxSeq: number): Promise<Record<string, unknown[]>> {
  const root = scope.rootThreadId;
  const query = async (sql: string, params: unknown[] = [root]): Promise<unknown[]> =>
    (await pool.query<Record<string, unknown>>(sql, params)).rows;
  return {
    env_data: await query('SELECT * FROM env_data WHERE root_thread_id = $1 ORDER BY scope, key'),
    // Refusals that reach the store are logged (that is the point of the log); what was stored is not touched.
    env_events: await query("SELECT * FROM env_events WHERE root_thread_id = $1 AND action <> 'rejected' ORDER BY seq"),
    threads: await query('SELECT * FROM threads WHERE root_thread_id = $1 ORDER BY thread_id'),
    questions: await query('SELECT * FROM questions WHERE root_thread_id = $1 ORDER BY number'),
    delegations: await query('SELECT * FROM delegations WHERE root_thread_id = $1 ORDER BY number'),
    worlds: await query('SELECT name, variables FROM worlds WHERE name = $1', [world]),
    transcript: await query('SELECT * FROM transcript_messages WHERE root_thread_id = $1 AND seq <= $2 ORDER BY seq', [
      root,
      maxSeq,
    ]),
    files: [fs.readdirSync(workDir).sort(), fs.readdirSync(path.join(workDir, 'inside')).sort()],
  };
}

interface Row {
  /** What the model sends. */
  readonly name: string;
  readonly tool: string;
  /** Arguments: an object (sent as JSON) or the raw arguments text. */
  readonly args: Record<string, unknown> | string;
  /** The tool result the model must receive. */
  readonly error: RegExp;
}

const BIG = 'x'.repeat(101 * 1024);
const rows: Row[] = [
  // Tools and agents the caller may not call.
  {
    name: 'an unknown tool',
    tool: 'no_such_tool',
    args: {},
    error: /^Error: Unknown tool or agent 'no_such_tool'\. You can call: .*shell/,
  },
  {
    name: 'an undeclared tool',
    tool: 'load_arc_task',
    args: { task_id: '007bbfb7' },
    error: /^Error: 'load_arc_task' is not one of your capabilities/,
  },
  {
    name: 'an undeclared agent',
    tool: 'outsider',
    args: { message: 'hi' },
    error: /^Error: 'outsider' is not one of your capabilities/,
  },
  {
    name: 'a declared agent with no message',
    tool: 'helper',
    args: {},
    error: /^Error: Invalid arguments for 'helper': .*message/,
  },
  // Argument shape.
  {
    name: 'arguments that are not JSON',
    tool: 'list_files',
    args: '{"path": ',
    error: /^Error: The arguments of 'list_files' are not valid JSON/,
  },
  {
    name: 'an invented argument',
    tool: 'get_env_data',
    args: { key: 'seed', extra: 1 },
    error: /^Error: Invalid arguments for 'get_env_data': unknown argument 'extra'/,
  },
  // Scope-forging arguments.
  {
    name: 'a root_thread_id argument',
    tool: 'store_env_data',
    args: { key: 'k', short_description: 'd', value: 1, root_thread_id: 'other' },
    error: /unknown argument 'root_thread_id'/,
  },
  {
    name: 'a thread_id argument',
    tool: 'list_env_data',
    args: { thread_id: 'other' },
    error: /unknown argument 'thread_id'/,
  },
  {
    name: 'a scope argument',
    tool: 'delete_env_data',
    args: { key: 'seed', scope: '' },
    error: /unknown argument 'scope'/,
  },
  // Keys and values.
  {
    name: 'a key with a space',
    tool: 'store_env_data',
    args: { key: 'a b', short_description: 'd', value: 1 },
    error: /^Error: Invalid arguments for 'store_env_data': .*key/,
  },
  {
    name: 'a key with a double slash',
    tool: 'store_env_data',
    args: { key: 'a//b', short_description: 'd', value: 1 },
    error: /key/,
  },
  {
    name: 'a key too long',
    tool: 'store_env_data',
    args: { key: 'k'.repeat(201), short_description: 'd', value: 1 },
    error: /key/,
  },
  {
    name: 'an empty description',
    tool: 'store_env_data',
    args: { key: 'k', short_description: '  ', value: 1 },
    error: /short_description.*required/,
  },
  { name: 'no value', tool: 'store_env_data', args: { key: 'k', short_description: 'd' }, error: /value.*required/ },
  {
    name: 'a value too large',
    tool: 'store_env_data',
    args: { key: 'k', short_description: 'd', value: BIG },
    error: /^Error: the value is \d+ bytes of JSON; the limit is 102400 bytes/,
  },
  {
    name: 'a value with a NUL',
    tool: 'store_env_data',
    args: { key: 'k', short_description: 'd', value: 'a\u0000b' },
    error: /NUL character/,
  },
  {
    name: 'a type with a NUL',
    tool: 'store_env_data',
    args: { key: 'k', short_description: 'd', value: 1, type: 'a\u0000' },
    error: /type holds a NUL character/,
  },
  {
    name: 'a tag with a lone surrogate',
    tool: 'store_env_data',
    args: { key: 'k', short_description: 'd', value: 1, tags: ['\ud800'] },
    error: /a tag holds a NUL character or a lone surrogate/,
  },
  {
    name: 'an update of a missing key',
    tool: 'update_env_data',
    args: { key: 'missing', value: 1 },
    error: /^Error: no entry 'missing' to update/,
  },
  {
    name: 'an update with a stale version',
    tool: 'update_env_data',
    args: { key: 'seed', value: 3, expected_version: 1 },
    error: /^Error: 'seed' is at version 2, not 1/,
  },
  {
    name: 'an update with nothing to change',
    tool: 'update_env_data',
    args: { key: 'seed' },
    error: /give a new short_description, a new value, or both/,
  },
  {
    name: 'a delete of a missing key',
    tool: 'delete_env_data',
    args: { key: 'missing' },
    error: /^Error: no entry 'missing' to delete/,
  },
  {
    name: 'a read of a missing key',
    tool: 'get_env_data',
    args: { key: 'missing' },
    error: /^Error: No environment data under 'missing'/,
  },
  {
    name: 'a list page of 0',
    tool: 'list_env_data',
    args: { limit: 0 },
    error: /^Error: Invalid arguments for 'list_env_data': .*limit/,
  },
  // Paths and shell escapes.
  {
    name: 'a path out of the root',
    tool: 'read_file',
    args: { path: '../../../etc/passwd' },
    error: /^Error: .*outside/,
  },
  { name: 'an absolute path elsewhere', tool: 'read_file', args: { path: '/etc/passwd' }, error: /^Error: .*outside/ },
  {
    name: 'a shell directory outside the root',
    tool: 'shell',
    args: { command: 'touch escaped', directory: '/tmp' },
    error: /^Error: Directory '\/tmp' is outside the world's working_directory.*No command was run\./,
  },
  {
    name: 'a shell directory climbing out',
    tool: 'shell',
    args: { command: 'touch escaped', directory: '../..' },
    error: /outside the world's working_directory/,
  },
  {
    name: 'a shell command with a NUL',
    tool: 'shell',
    args: { command: 'touch a\u0000b' },
    error: /^Error: Commands must not contain NUL bytes\./,
  },
  {
    name: 'a shell timeout of 0',
    tool: 'shell',
    args: { command: 'touch escaped', timeout_s: 0 },
    error: /^Error: Invalid arguments for 'shell': .*timeout_s/,
  },
  {
    name: 'a shell timeout past the maximum',
    tool: 'shell',
    args: { command: 'touch escaped', timeout_s: 100_000 },
    error: /timeout_s/,
  },
  // `wait` arguments (a time in the past and a wait beyond the world's limit are refused by the turn workflow, which
  // reads the clock: test/integration/wait.test.ts).
  {
    name: 'a wait with neither seconds nor until',
    tool: 'wait',
    args: { reason: 'r' },
    error: /^Error: Invalid arguments for 'wait': give exactly one of 'seconds' and 'until'\.$/,
  },
  {
    name: 'a wait with both seconds and until',
    tool: 'wait',
    args: { seconds: 5, until: '2030-01-31T09:00:00Z', reason: 'r' },
    error: /^Error: Invalid arguments for 'wait': give exactly one of 'seconds' and 'until'\.$/,
  },
  {
    name: 'a negative wait',
    tool: 'wait',
    args: { seconds: -5, reason: 'r' },
    error: /^Error: Invalid arguments for 'wait': 'seconds' must be at least 1\.$/,
  },
  {
    name: 'a wait that would end past any date (9,000,000,000,000 seconds)',
    tool: 'wait',
    args: { seconds: 9_000_000_000_000, reason: 'r' },
    error: /^Error: Invalid arguments for 'wait': 'seconds' must be at most 999999999 \(about 31 years;/,
  },
  {
    name: 'a wait without a reason',
    tool: 'wait',
    args: { seconds: 5 },
    error: /^Error: Invalid arguments for 'wait': 'reason' is required: say what you are waiting for\.$/,
  },
  {
    name: 'a wait until a time without a time zone',
    tool: 'wait',
    args: { until: '2030-01-31 09:00', reason: 'r' },
    error: /^Error: Invalid arguments for 'wait': 'until' must be an ISO 8601 time with a time zone/,
  },
];

for (const [index, row] of rows.entries()) {
  test(`bad input: ${row.name} gets a tool error and changes nothing`, async () => {
    // The row's own operation ids in the shared thread: no counter another test moves on.
    const step = index + 1;
    const messages = await listMessages(pool, scope.threadId);
    const maxSeq = messages.at(-1)?.seq ?? 0;
    const beforeRows = await snapshot(maxSeq);
    const call = {
      id: `call-${step}`,
      name: row.tool,
      arguments: typeof row.args === 'string' ? row.args : JSON.stringify(row.args),
    };
    const { message } = await appendMessage(pool, scope, `${scope.threadId}:model:${step}`, {
      role: 'assistant',
      content: null,
      toolCalls: [call],
    });
    const result = await run(activities.executeToolCall, {
      scope,
      world,
      agentVersion,
      operationId: `${scope.threadId}:tool:${step}`,
      messageSeq: message.seq,
      toolCallId: call.id,
    });
    assert.equal(result.ok, false);
    const stored = (await listMessages(pool, scope.threadId)).at(-1);
    assert.equal(stored?.role, 'tool');
    assert.match(stored?.content ?? '', row.error);
    assert.deepEqual(await snapshot(maxSeq), beforeRows, 'nothing stored changed');
  });
}

/** World-variable edits a user can send (`baton world …`, the client SDK): refused with the reason, text unchanged. */
const worldRows: { name: string; edit: (handle: WorldHandle) => Promise<unknown>; error: RegExp }[] = [
  { name: 'an invalid variable name', edit: (h) => h.set({ '1st': 'x' }), error: /variable name '1st' must start/ },
  { name: 'a name with a space', edit: (h) => h.set({ 'a b': 'x' }), error: /variable name 'a b'/ },
  { name: 'a value with a line break', edit: (h) => h.set({ A: 'x\ny' }), error: /must not contain a line break/ },
  { name: 'a value with a CR', edit: (h) => h.set({ A: 'x\ry' }), error: /must not contain a line break/ },
  { name: 'a value with a NUL', edit: (h) => h.set({ A: 'x\u0000y' }), error: /NUL character/ },
  {
    name: 'an imported text with a NUL',
    edit: (h) => h.setVariablesText('A=1\nB=\u0000\n'),
    error: /line 2 holds a NUL/,
  },
  {
    name: 'a working directory that does not exist',
    edit: (h) => h.setWorkingDirectory(path.join(workDir, 'no-such-dir')),
    error: /is not an existing directory; nothing was changed/,
  },
];

for (const row of worldRows) {
  test(`bad input: world edit with ${row.name} is refused and changes nothing`, async () => {
    const worlds = new WorldsClient(pool);
    const handle = worlds.world(world);
    const before = await handle.getVariablesText();
    await assert.rejects(row.edit(handle), (error: unknown) => {
      assert.ok(error instanceof BatonClientError, `expected a BatonClientError, got ${String(error)}`);
      assert.match(error.message, row.error);
      return true;
    });
    assert.equal(await handle.getVariablesText(), before);
  });
}

test('bad input: a world name that is not one is refused before anything is read', () => {
  const worlds = new WorldsClient(pool);
  for (const name of ['Upper', 'has space', '', '../etc', 'x'.repeat(65)]) {
    assert.throws(() => worlds.world(name), BatonClientError, name);
  }
});
