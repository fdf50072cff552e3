import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities, type Activities } from '../../activities';
import type { ThreadScope } from '../../common/types';
import { createPool } from '../../db/pool';
import { listMessages } from '../../db/transcripts';
import { readModelLog } from '../../testing/harness';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { createModelClient } from '../../worker/model-client';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'activities-'));
const modelLog = path.join(workDir, 'model.jsonl');
const pool = createPool({ connectionString: env.databaseUrl });
const agent = parseAgentFile('---\nname: echo\ndescription: Echoes.\n---\nYou echo.\n', 'echo.md');
/** Mutable, so a test can change a definition the way a reload does. */
const agents = new Map([['echo', agent]]);
let model: ScriptedModelServer;
let activities: Activities;

before(async () => {
  model = await startScriptedModelServer({
    script: parseScript(
      'agents:\n  echo:\n    - say: "first"\n  sleepy:\n    - { say: "late", delay_ms: 30000 }\n',
      't',
    ),
    logFile: modelLog,
  });
  agents.set('sleepy', { ...agent, name: 'sleepy' });
  activities = createActivities({
    pool,
    openai: createModelClient({ baseURL: model.baseURL, apiKey: 'scripted', model: 'baton-scripted' }),
    model: 'baton-scripted',
    agents: () => agents,
    tools: createAgentCatalog({
      agents: new Map([['echo', agent]]),
      filesRoot: workDir,
      arcDataDir: DEFAULT_ARC_DATA_DIR,
    }).tools,
    heartbeatIntervalMs: 50,
  });
});

after(async () => {
  await model?.close();
  await pool.end();
});

async function openThread(agentName: string): Promise<ThreadScope & { agentVersion: string }> {
  const threadId = uniqueThreadId(agentName);
  const { epoch } = await run(activities.ensureThread, {
    threadId,
    rootThreadId: threadId,
    agent: agentName,
  });
  const agentVersion =
    agentName === 'ghost' ? 'no-such-version' : (await run(activities.resolveAgent, { name: agentName })).version;
  return { rootThreadId: threadId, threadId, agent: agentName, epoch, agentVersion };
}

/** Runs an activity in a fresh mock context (typed: the SDK's generic signature loses the result type). */
function run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return new MockActivityEnvironment().run(fn, ...args);
}

function scopeOf({ agentVersion: _version, ...scope }: ThreadScope & { agentVersion: string }): ThreadScope {
  return scope;
}

function requestsFor(threadId: string) {
  return readModelLog(modelLog).filter((entry) => entry.thread === threadId);
}

test('model activity: a retried call whose reply is stored returns it without calling the model again', async () => {
  const scope = await openThread('echo');
  const input = {
    scope: scopeOf(scope),
    world: 'default',
    agentVersion: scope.agentVersion,
    operationId: `${scope.threadId}:model:0`,
    step: 0,
  };
  await run(activities.recordMessage, {
    scope,
    operationId: `${scope.threadId}:in`,
    message: { role: 'user', content: 'hi' },
  });

  const first = await run(activities.callModel, input);
  const retried = await run(activities.callModel, input);

  assert.equal(first.reused, false);
  assert.equal(retried.reused, true);
  assert.deepEqual({ ...retried, reused: false }, first);
  assert.equal(requestsFor(scope.threadId).length, 1, 'the model was called once');
  const rows = await listMessages(pool, scope.threadId);
  assert.deepEqual(
    rows.map((row) => [row.role, row.content]),
    [
      ['user', 'hi'],
      ['assistant', 'first'],
    ],
  );
});

test('transcript write: a retried write with the same operation id stores one row', async () => {
  const scope = await openThread('echo');
  const write = { scope, operationId: `${scope.threadId}:in`, message: { role: 'user' as const, content: 'once' } };
  const results = await Promise.all([1, 2, 3].map(() => run(activities.recordMessage, write)));
  assert.deepEqual(
    results.map((r) => r.seq),
    [1, 1, 1],
  );
  assert.equal((await listMessages(pool, scope.threadId)).length, 1);
});

test('transcript write: a write under a stale epoch is refused as Thread.StaleEpoch and stores nothing', async () => {
  const scope = await openThread('echo');
  await run(activities.recordMessage, {
    scope,
    operationId: `${scope.threadId}:in`,
    message: { role: 'user', content: 'before reclaim' },
  });
  await pool.query('UPDATE threads SET epoch = epoch + 1 WHERE thread_id = $1', [scope.threadId]);

  await assert.rejects(
    run(activities.recordMessage, {
      scope,
      operationId: `${scope.threadId}:tool:0`,
      message: { role: 'tool', toolCallId: 'call_1', content: 'after reclaim' },
    }),
    (error: unknown) =>
      error instanceof ApplicationFailure &&
      error.type === 'Thread.StaleEpoch' &&
      error.nonRetryable &&
      /is at epoch 1; a write issued under epoch 0 was refused/.test(error.message),
  );
  await assert.rejects(
    run(activities.callModel, {
      scope: scopeOf(scope),
      world: 'default',
      agentVersion: scope.agentVersion,
      operationId: `${scope.threadId}:m`,
      step: 0,
    }),
    (error: unknown) => error instanceof ApplicationFailure && error.type === 'Thread.StaleEpoch',
  );
  const rows = await listMessages(pool, scope.threadId);
  assert.deepEqual(
    rows.map((row) => row.content),
    ['before reclaim'],
  );
});

test('model activity: an unknown agent fails fast as Agent.NotFound without calling the model', async () => {
  const scope = await openThread('ghost');
  await assert.rejects(
    run(activities.callModel, {
      scope: scopeOf(scope),
      world: 'default',
      agentVersion: scope.agentVersion,
      operationId: `${scope.threadId}:m`,
      step: 0,
    }),
    (error: unknown) =>
      error instanceof ApplicationFailure && error.type === 'Agent.NotFound' && error.nonRetryable === true,
  );
  assert.equal(requestsFor(scope.threadId).length, 0);
});

test('agent versions: a turn keeps the definition it resolved even after the agent changes', async () => {
  const scope = await openThread('echo');
  await run(activities.recordMessage, {
    scope: scopeOf(scope),
    operationId: `${scope.threadId}:in`,
    message: { role: 'user', content: 'hi' },
  });
  const original = agents.get('echo');
  assert.ok(original);
  agents.set('echo', { ...original, body: 'You echo, version two.' });
  try {
    const newer = await run(activities.resolveAgent, { name: 'echo' });
    assert.notEqual(newer.version, scope.agentVersion, 'a changed definition is a new version');

    await run(activities.callModel, {
      scope: scopeOf(scope),
      world: 'default',
      agentVersion: scope.agentVersion,
      operationId: `${scope.threadId}:model:0`,
      step: 0,
    });
    const [request] = requestsFor(scope.threadId);
    const system = request?.messages[0]?.content ?? '';
    assert.ok(system.startsWith('You echo.'), 'the model saw the version the turn started with');
    assert.ok(!system.includes('version two'));
  } finally {
    agents.set('echo', original);
  }
});

test('model activity: cancellation aborts the in-flight HTTP request and stores nothing', async () => {
  const scope = await openThread('sleepy');
  const environment = new MockActivityEnvironment();
  const call = environment.run(activities.callModel, {
    scope: scopeOf(scope),
    world: 'default',
    agentVersion: scope.agentVersion,
    operationId: `${scope.threadId}:m`,
    step: 0,
  });
  const deadline = Date.now() + 10_000;
  while (requestsFor(scope.threadId).length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(requestsFor(scope.threadId).length, 1, 'the request reached the model');
  const started = Date.now();
  environment.cancel();
  await assert.rejects(call, (error: unknown) => error instanceof CancelledFailure);
  assert.ok(Date.now() - started < 5000, 'cancelled well before the 30 s delay ended');
  assert.equal((await listMessages(pool, scope.threadId)).length, 0);
});
