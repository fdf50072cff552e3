/**
 * Regression tests for the audit defects of issue 13 that live in activities and stores: text Postgres refuses,
 * tools re-run by retries, the fence checked only at the final write, operation ids shared across roots, and env
 * writes trusting their scope. Activities run in a mock activity context against the test stack's Postgres.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities, type Activities } from '../../activities';
import { createEnvDataTools } from '../../activities/tools/env-data';
import { ErrorType } from '../../common/errors';
import type { ThreadScope, ToolCallRequest } from '../../common/types';
import { openDelegation } from '../../db/delegations';
import { EnvStore } from '../../db/env-data';
import { ThreadNotFoundError } from '../../db/errors';
import { createPool } from '../../db/pool';
import { openQuestion } from '../../db/questions';
import { appendMessage, listMessages } from '../../db/transcripts';
import { setWorldVariablesText } from '../../db/worlds';
import { readModelLog } from '../../testing/harness';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { fakeToolContext } from '../../testing/tool-context';
import { parseAgentFile } from '../../worker/agents';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { createModelClient } from '../../worker/model-client';

const env = readTestEnv();
const workDir = fs.realpathSync(fs.mkdtempSync(path.join(env.stateDir, 'audit-')));
const modelLog = path.join(workDir, 'model.jsonl');
/**
 * While this file exists, the activities' pool refuses new transactions and the transcript's append (one statement,
 * migration 015), as if the connection had been lost.
 */
const failWrites = path.join(workDir, 'fail-writes');
const realPool = createPool({ connectionString: env.databaseUrl });
const lost = () => Promise.reject(new Error('connection terminated unexpectedly'));
const pool = new Proxy(realPool, {
  get(target, property) {
    if (property === 'connect') return () => (fs.existsSync(failWrites) ? lost() : target.connect());
    if (property === 'query') {
      const query = target.query.bind(target) as (...args: unknown[]) => unknown;
      const isAppend = (config: unknown) => (config as { name?: unknown } | null)?.name === 'baton-append-message';
      return (...args: unknown[]): unknown =>
        fs.existsSync(failWrites) && isAppend(args[0]) ? lost() : query(...args);
    }
    const value: unknown = Reflect.get(target, property);
    return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
  },
});
const world = `audit-${process.pid}`;
const agent = parseAgentFile(
  '---\nname: worker\ndescription: Runs commands.\ncapabilities: [shell]\n---\nYou run commands.\n',
  'worker.md',
);
let model: ScriptedModelServer;
let activities: Activities;

before(async () => {
  model = await startScriptedModelServer({
    script: parseScript('agents:\n  worker:\n    - say: "nul \\0 and lone \\uD800 here"\n', 't'),
    logFile: modelLog,
  });
  activities = createActivities({
    pool,
    openai: createModelClient({ baseURL: model.baseURL, apiKey: 'scripted', model: 'baton-scripted' }),
    model: 'baton-scripted',
    agents: () => new Map([['worker', agent]]),
    tools: createAgentCatalog({
      agents: new Map([['worker', agent]]),
      filesRoot: workDir,
      arcDataDir: DEFAULT_ARC_DATA_DIR,
    }).tools,
    heartbeatIntervalMs: 50,
  });
  await setWorldVariablesText(realPool, world, `working_directory=${workDir}\n`);
});

after(async () => {
  await model?.close();
  await realPool.end();
});

function run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return new MockActivityEnvironment().run(fn, ...args);
}

interface Thread extends ThreadScope {
  agentVersion: string;
}

async function openThread(name = 'audit'): Promise<Thread> {
  const threadId = uniqueThreadId(name);
  const { epoch } = await run(activities.ensureThread, { threadId, rootThreadId: threadId, agent: 'worker', world });
  const { version } = await run(activities.resolveAgent, { name: 'worker' });
  return { rootThreadId: threadId, threadId, agent: 'worker', epoch, agentVersion: version };
}

function scopeOf({ agentVersion: _version, ...scope }: Thread): ThreadScope {
  return scope;
}

/** Stores an assistant message asking for one shell command and returns the input that executes it. */
async function shellCall(thread: Thread, command: string, tag: string) {
  const call: ToolCallRequest = { id: `call-${tag}`, name: 'shell', arguments: JSON.stringify({ command }) };
  const { message } = await appendMessage(realPool, scopeOf(thread), `${thread.threadId}:model:${tag}`, {
    role: 'assistant',
    content: null,
    toolCalls: [call],
  });
  return {
    scope: scopeOf(thread),
    world,
    agentVersion: thread.agentVersion,
    operationId: `${thread.threadId}:tool:${tag}`,
    messageSeq: message.seq,
    toolCallId: call.id,
  };
}

function countLines(file: string): number {
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
}

async function bumpEpoch(threadId: string): Promise<void> {
  await realPool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [threadId]);
}

function isFailure(type: string, nonRetryable = true) {
  return (error: unknown) => {
    assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`);
    assert.equal(error.type, type);
    assert.equal(error.nonRetryable, nonRetryable);
    return true;
  };
}

test('defect 1: tool output with U+0000 and lone surrogates is stored cleaned, and the tool runs once', async () => {
  const thread = await openThread();
  const counter = path.join(workDir, `${thread.threadId.replaceAll('/', '_')}.count`);
  const input = await shellCall(thread, `echo ran >> '${counter}'; printf 'a\\000b'`, 'nul');
  const result = await run(activities.executeToolCall, input);
  assert.equal(result.ok, true);
  const stored = (await listMessages(realPool, thread.threadId)).at(-1);
  assert.equal(stored?.content, 'exit code: 0\na\uFFFDb');
  assert.equal(countLines(counter), 1);
  // A retry returns the stored result without running the command again.
  assert.deepEqual(await run(activities.executeToolCall, input), result);
  assert.equal(countLines(counter), 1);
});

test('defect 1: a failed transcript write after the tool ran does not run the tool again on retry', async () => {
  const thread = await openThread();
  const counter = path.join(workDir, `${thread.threadId.replaceAll('/', '_')}.count`);
  // The command itself makes the next transaction fail, as a lost connection between the run and the write would.
  const input = await shellCall(thread, `echo ran >> '${counter}'; touch '${failWrites}'; echo done`, 'lost');
  try {
    await assert.rejects(run(activities.executeToolCall, input), /connection terminated unexpectedly/);
    assert.equal(countLines(counter), 1);
    fs.rmSync(failWrites, { force: true });
    const retried = await run(activities.executeToolCall, input);
    assert.equal(retried.ok, true);
    assert.equal(countLines(counter), 1, 'the retry stored the first run instead of running the command again');
    assert.equal((await listMessages(realPool, thread.threadId)).at(-1)?.content, 'exit code: 0\ndone\n');
  } finally {
    fs.rmSync(failWrites, { force: true });
  }
});

test('defect 1: a run interrupted before its outcome was recorded is reported, not run again', async () => {
  const thread = await openThread();
  const counter = path.join(workDir, `${thread.threadId.replaceAll('/', '_')}.count`);
  const input = await shellCall(thread, `echo ran >> '${counter}'`, 'interrupted');
  // An earlier attempt claimed the run and its worker died before recording how it ended.
  await realPool.query(
    `INSERT INTO tool_runs (root_thread_id, operation_id, thread_id, tool, epoch) VALUES ($1, $2, $3, 'shell', $4)`,
    [thread.rootThreadId, input.operationId, thread.threadId, thread.epoch],
  );
  const result = await run(activities.executeToolCall, input);
  assert.equal(result.ok, false);
  assert.match(
    (await listMessages(realPool, thread.threadId)).at(-1)?.content ?? '',
    /^Error: an earlier attempt of this 'shell' call .* It was not run again/,
  );
  assert.equal(countLines(counter), 0);
});

test('defect 1: a model reply with U+0000 and a lone surrogate is stored cleaned', async () => {
  const thread = await openThread();
  await run(activities.recordMessage, {
    scope: scopeOf(thread),
    operationId: `${thread.threadId}:in`,
    message: { role: 'user', content: 'go' },
  });
  const input = {
    scope: scopeOf(thread),
    world,
    agentVersion: thread.agentVersion,
    operationId: `${thread.threadId}:model:0`,
    step: 0,
  };
  const reply = await run(activities.callModel, input);
  assert.equal(reply.content, 'nul \uFFFD and lone \uFFFD here');
  assert.deepEqual(await run(activities.callModel, input), { ...reply, reused: true });
  assert.equal(readModelLog(modelLog).filter((entry) => entry.thread === thread.threadId).length, 1);
});

test('defect 1: data Postgres refuses is a non-retryable Input.Invalid failure with a clear message', async () => {
  const thread = await openThread();
  const write = {
    scope: scopeOf(thread),
    operationId: `${thread.threadId}:in`,
    message: { role: 'user' as const, content: 'a\u0000b' },
  };
  await assert.rejects(run(activities.recordMessage, write), (error: unknown) => {
    isFailure(ErrorType.InvalidInput)(error);
    assert.match((error as Error).message, /SQLSTATE 22021.*NUL character \(U\+0000\)/);
    return true;
  });
  assert.deepEqual(await listMessages(realPool, thread.threadId), []);
});

test('defect 4: a reclaimed turn runs no tool with side effects', async () => {
  const thread = await openThread();
  const marker = path.join(workDir, `${thread.threadId.replaceAll('/', '_')}.zombie`);
  const input = await shellCall(thread, `echo zombie >> '${marker}'`, 'zombie');
  await bumpEpoch(thread.threadId);
  await assert.rejects(run(activities.executeToolCall, input), isFailure(ErrorType.ThreadStaleEpoch));
  assert.equal(fs.existsSync(marker), false, 'the command did not run');
});

test('defect 4: a stored tool result or model reply is not handed back to a reclaimed turn', async () => {
  const thread = await openThread();
  const input = await shellCall(thread, 'echo once', 'stored');
  await run(activities.executeToolCall, input);
  await bumpEpoch(thread.threadId);
  await assert.rejects(run(activities.executeToolCall, input), isFailure(ErrorType.ThreadStaleEpoch));

  const talker = await openThread();
  await run(activities.recordMessage, {
    scope: scopeOf(talker),
    operationId: `${talker.threadId}:in`,
    message: { role: 'user', content: 'go' },
  });
  const modelInput = {
    scope: scopeOf(talker),
    world,
    agentVersion: talker.agentVersion,
    operationId: `${talker.threadId}:model:0`,
    step: 0,
  };
  await run(activities.callModel, modelInput);
  await bumpEpoch(talker.threadId);
  await assert.rejects(run(activities.callModel, modelInput), isFailure(ErrorType.ThreadStaleEpoch));
  assert.equal(readModelLog(modelLog).filter((entry) => entry.thread === talker.threadId).length, 1);
});

test('defect 5: an operation id used in one root returns nothing of it in another root', async () => {
  const a = await openThread('root-a');
  const b = await openThread('root-b');
  const operationId = `shared-op-${process.pid}-${Date.now()}`;

  const inA = await appendMessage(realPool, scopeOf(a), operationId, { role: 'user', content: 'secret of A' });
  const inB = await appendMessage(realPool, scopeOf(b), operationId, { role: 'user', content: 'message of B' });
  assert.equal(inB.reused, false);
  assert.equal(inB.message.threadId, b.threadId);
  assert.equal(inB.message.content, 'message of B');
  assert.deepEqual(
    (await listMessages(realPool, a.threadId)).map((row) => row.content),
    [inA.message.content],
  );

  const question = { workflowId: 'wf', toolCallId: 'call', question: 'question of A' };
  await openQuestion(realPool, scopeOf(a), operationId, question);
  const asked = await openQuestion(realPool, scopeOf(b), operationId, { ...question, question: 'question of B' });
  assert.equal(asked.rootThreadId, b.rootThreadId);
  assert.equal(asked.question, 'question of B');

  const delegation = (message: string) => ({
    callee: 'worker',
    mode: 'new' as const,
    chain: ['worker'],
    callerMessageSeq: 1,
    buildMessage: () => message,
  });
  await openDelegation(realPool, scopeOf(a), operationId, delegation('task of A'));
  const delegated = await openDelegation(realPool, scopeOf(b), operationId, delegation('task of B'));
  assert.equal(delegated.message, 'task of B');
  assert.ok(delegated.threadId.startsWith(`${b.rootThreadId}/`), delegated.threadId);
});

test('defect 5: an operation id one thread used is refused for another thread of the same root', async () => {
  const root = await openThread('root');
  const child = uniqueThreadId('child');
  await realPool.query(
    `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent) VALUES ($1, $2, $2, 'worker')`,
    [child, root.rootThreadId],
  );
  const childScope: ThreadScope = { rootThreadId: root.rootThreadId, threadId: child, agent: 'worker', epoch: 0 };
  const operationId = `op-${child}`;
  await appendMessage(realPool, scopeOf(root), operationId, { role: 'user', content: 'of the root' });
  await assert.rejects(
    appendMessage(realPool, childScope, operationId, { role: 'user', content: 'of the child' }),
    /operation '.*' already wrote to thread/,
  );
  assert.deepEqual(await listMessages(realPool, child), []);
});

test('defect 7: an env write is refused for a thread outside the scope root and for a root that does not exist', async () => {
  const store = new EnvStore(realPool);
  const a = await openThread('env-a');
  const b = await openThread('env-b');
  const entry = { key: 'forged', shortDescription: 'Written with a forged scope.', value: 1 };
  const before = await realPool.query('SELECT * FROM env_data WHERE root_thread_id IN ($1, $2)', [
    a.threadId,
    b.threadId,
  ]);

  // Thread A claims to write into root B.
  await assert.rejects(
    store.store({ ...scopeOf(a), rootThreadId: b.rootThreadId }, `${a.threadId}:forged`, entry),
    (error: unknown) => error instanceof ThreadNotFoundError && /is not in root/.test(error.message),
  );
  // A root that does not exist, named by the thread itself and by the write.
  const orphan = uniqueThreadId('orphan');
  const ghost = uniqueThreadId('ghost');
  await realPool.query(`INSERT INTO threads (thread_id, root_thread_id, agent) VALUES ($1, $2, 'worker')`, [
    orphan,
    ghost,
  ]);
  await assert.rejects(
    store.store({ rootThreadId: ghost, threadId: orphan, agent: 'worker', epoch: 0 }, `${orphan}:w`, entry),
    (error: unknown) => error instanceof ThreadNotFoundError && /root thread '.*' does not exist/.test(error.message),
  );

  const afterRows = await realPool.query('SELECT * FROM env_data WHERE root_thread_id IN ($1, $2, $3)', [
    a.threadId,
    b.threadId,
    ghost,
  ]);
  assert.deepEqual(afterRows.rows, before.rows);
  const events = await realPool.query('SELECT 1 FROM env_events WHERE root_thread_id IN ($1, $2)', [b.threadId, ghost]);
  assert.equal(events.rowCount, 0, 'nothing was logged into the forged scope either');
  // The legitimate write still works.
  assert.equal((await store.store(scopeOf(b), `${b.threadId}:ok`, entry)).action, 'stored');
});

test('defect 8: list_env_data pages its manifest: a default that fits a context, "N more", and a cursor', async () => {
  const thread = await openThread('many');
  await realPool.query(
    `INSERT INTO env_data (root_thread_id, key, short_description, value, stored_by_agent, stored_by_thread, version)
     SELECT $1, 'k/' || lpad(n::text, 4, '0'), repeat('A description of moderate length. ', 8), to_jsonb(n),
            'worker', $1, 1
       FROM generate_series(1, 300) n`,
    [thread.threadId],
  );
  const list = createEnvDataTools().find((tool) => tool.name === 'list_env_data');
  if (!list?.run) throw new Error('list_env_data runs in the activity');
  const context = fakeToolContext({ scope: scopeOf(thread), envStore: new EnvStore(realPool) });
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const output = await list.run(list.parameters.parse(cursor === undefined ? {} : { cursor }), context);
    const text = typeof output === 'string' ? output : JSON.stringify(output);
    assert.ok(text.length < 40_000, `a page is ${text.length} characters`);
    const items = JSON.parse(text) as { key?: string; more?: number; next_cursor?: string; note?: string }[];
    const last = items.at(-1);
    pages += 1;
    if (last?.more !== undefined) {
      seen.push(...items.slice(0, -1).map((item) => item.key ?? ''));
      assert.equal(last.more, 300 - seen.length);
      assert.match(last.note ?? '', new RegExp(`^${last.more} more entries`));
      cursor = last.next_cursor;
    } else {
      seen.push(...items.map((item) => item.key ?? ''));
      break;
    }
  }
  assert.ok(pages > 1, 'the default page does not hold 300 entries');
  assert.equal(seen.length, 300);
  assert.equal(new Set(seen).size, 300, 'every entry shows up exactly once across the pages');
  // An explicit limit, bounded.
  const small = JSON.parse(JSON.stringify(await list.run(list.parameters.parse({ limit: 5 }), context))) as unknown[];
  assert.equal(small.length, 6);
  assert.equal(list.parameters.safeParse({ limit: 100_000 }).success, false);
});
