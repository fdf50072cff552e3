/**
 * Several model endpoints (issue 21, item 4): an agent's `model: provider/model` reaches that provider's endpoint with
 * the prefix stripped, a plain model (or `default/…`) the default endpoint, and every stored reply says which
 * provider answered. Three scripted-model servers over HTTP, each with its own request log, stand in for a hosted
 * model, a local one and the default endpoint.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { formatTranscript, formatTree } from '../../client/format';
import { ErrorType } from '../../common/errors';
import { startExplorer } from '../../explorer';
import { threadPath } from '../../explorer/pages';
import { listMessages } from '../../db/transcripts';
import { readRunFeed } from '../../db/run-events';
import { runEventsOf, type StoredRunEvent } from '../../common/run-events';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readModelLog, startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { writeHangOnceTool } from '../../testing/hang-once-tool';
import { startScriptedWorker, type WorkerProcess } from '../../testing/worker-process';
import { connect } from '../../client';
import { waitFor } from '../chaos/waiting';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { createModelClient } from '../../worker/model-client';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'providers-'));
const logs = {
  default: path.join(workDir, 'default.jsonl'),
  hosted: path.join(workDir, 'hosted.jsonl'),
  local: path.join(workDir, 'local.jsonl'),
};

function agent(name: string, model: string, capabilities: string[] = []) {
  const text = `---\nname: ${name}\ndescription: The ${name}.\ncapabilities: [${capabilities.join(', ')}]\nmodel: ${model}\n---\nYou are the ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('lead', 'hosted/big-model-1', ['worker', 'reviewer']),
    agent('worker', 'local/llama3.1:8b'),
    // A gateway-style name with '/' goes to the default endpoint as it is.
    agent('reviewer', 'default/openai/gpt-4o'),
    // The faults of the hosted endpoint: what the default endpoint's tests prove, through a provider.
    agent('flaky', 'hosted/big-model-1'),
    agent('throttled', 'hosted/big-model-1'),
    agent('locked', 'hosted/big-model-1'),
    // Fallback chains: the hosted endpoint first, the local one when it fails in a way that moves on.
    agent('burst', '[hosted/big-model-1, local/llama3.1:8b]'),
    agent('revoked', '[hosted/big-model-1, local/llama3.1:8b]'),
    agent('burst2', '[hosted/big-model-1, local/llama3.1:8b]\nfallback_after_attempts: 1'),
  ].map((a) => [a.name, a]),
);

/** What the hosted endpoint's 429 asks for: longer than Temporal's first retry interval (1 s), so it shows. */
const RETRY_AFTER_S = 3;

/** Each endpoint scripts only the agents meant for it: a request that reaches the wrong one fails the turn. */
const scripts = {
  hosted: parseScript(
    `
agents:
  lead:
    - calls:
        - { call: worker, args: { message: "Count the cells." } }
        - { call: reviewer, args: { message: "Check the count." } }
    - say: "The team counted nine cells."
  flaky:
    - { fail: 503, times: 1 }
    - say: "Recovered."
  throttled:
    - { fail: 429, times: 1, retry_after_s: ${RETRY_AFTER_S} }
    - say: "Waited."
  locked:
    - { fail: 401, message: "the hosted key was revoked" }
    - say: "Never reached."
  burst:
    - { fail: 429, times: 10 }
    - say: "Never reached: the burst outlasts the hosted model's attempts."
  burst2:
    - { fail: 503, times: 10 }
    - say: "Never reached."
  revoked:
    - { fail: 401, message: "the hosted key was revoked" }
    - say: "Never reached."
`,
    'hosted',
  ),
  local: parseScript(
    `
agents:
  worker:
    - say: "nine cells"
  burst:
    - say: "Served by the local model."
  burst2:
    - say: "Served by the local model at once."
  revoked:
    - say: "Served by the local model after the 401."
`,
    'local',
  ),
  default: parseScript('agents:\n  reviewer:\n    - say: "the count holds"\n', 'default'),
};

let hosted: ScriptedModelServer;
let local: ScriptedModelServer;
let harness: AgentHarness;

before(async () => {
  hosted = await startScriptedModelServer({ script: scripts.hosted, logFile: logs.hosted });
  local = await startScriptedModelServer({ script: scripts.local, logFile: logs.local });
  harness = await startTestHarness('providers', {
    agents,
    script: scripts.default,
    modelLogFile: logs.default,
    providers: {
      hosted: createModelClient({ baseURL: hosted.baseURL, apiKey: 'hosted-key' }),
      local: createModelClient({ baseURL: local.baseURL, apiKey: 'unused' }),
    },
  });
});

after(async () => {
  await harness?.close();
  await hosted?.close();
  await local?.close();
});

/** Runs an activity in a fresh mock context (typed: the SDK's generic signature loses the result type). */
function run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> {
  return new MockActivityEnvironment().run(fn, ...args);
}

/** What one endpoint received for one root thread: agent, model name sent, provider header. */
function received(log: string, root: string): [string, string, string | undefined][] {
  return readModelLog(log)
    .filter((entry: ModelLogEntry) => entry.headers['x-baton-root-thread'] === root)
    .map((entry) => [entry.agent, entry.model, entry.headers['x-baton-provider']]);
}

test('providers: each agent reaches its own endpoint with the prefix stripped, and the stored replies say which answered', async () => {
  const root = uniqueThreadId('providers');
  const thread = await harness.client.startThread({ agent: 'lead', threadId: root });
  const result = await thread.send('How many cells are coloured?');
  assert.equal(result.status, 'completed');
  assert.equal(result.reply, 'The team counted nine cells.');

  assert.deepEqual(received(logs.hosted, root), [
    ['lead', 'big-model-1', 'hosted'],
    ['lead', 'big-model-1', 'hosted'],
  ]);
  assert.deepEqual(received(logs.local, root), [['worker', 'llama3.1:8b', 'local']]);
  assert.deepEqual(received(logs.default, root), [['reviewer', 'openai/gpt-4o', 'default']]);

  const stored = async (threadId: string) =>
    (await listMessages(harness.pool, threadId))
      .filter((message) => message.role === 'assistant')
      .map((message) => [message.agent, message.provider, message.model]);
  assert.deepEqual(await stored(root), [
    ['lead', 'hosted', 'big-model-1'],
    ['lead', 'hosted', 'big-model-1'],
  ]);
  assert.deepEqual(await stored(`${root}/worker-1`), [['worker', 'local', 'llama3.1:8b']]);
  assert.deepEqual(await stored(`${root}/reviewer-1`), [['reviewer', 'default', 'openai/gpt-4o']]);
  const humanAndTools = (await listMessages(harness.pool, root)).filter((message) => message.role !== 'assistant');
  assert.ok(humanAndTools.length > 0 && humanAndTools.every((m) => m.provider === null && m.model === null));

  // Usage by provider: the calls each endpoint answered, with the tokens it reported.
  const usage = await thread.usage();
  assert.deepEqual(
    usage.byProvider.map((row) => [row.provider, row.modelCalls]),
    [
      ['default', 1],
      ['hosted', 2],
      ['local', 1],
    ],
  );
  assert.ok(usage.byProvider.every((row) => row.totalTokens > 0 && row.promptTokens > 0));
  assert.equal(usage.modelCalls, 4);
  assert.equal(
    usage.totalTokens,
    usage.byProvider.reduce((sum, row) => sum + row.totalTokens, 0),
  );

  // The tree and the transcript, as `baton tree` and `baton transcript` print them.
  const tree = await thread.tree();
  const nodeOf = (agentName: string) =>
    agentName === 'lead' ? tree : tree.children.find((child) => child.agent === agentName);
  for (const [agentName, provider] of [
    ['lead', 'hosted'],
    ['worker', 'local'],
    ['reviewer', 'default'],
  ] as const) {
    assert.deepEqual(
      nodeOf(agentName)?.providers.map((row) => row.provider),
      [provider],
      `${agentName}'s calls by provider`,
    );
  }
  const treeText = formatTree(tree);
  assert.match(treeText, new RegExp(`^lead  completed  2 model calls  \\d+ tokens  via hosted  \\(${root}\\)$`, 'm'));
  assert.match(treeText, /worker {2}completed {2}1 model call {2}\d+ tokens {2}via local {2}\(/);
  const byProvider = usage.byProvider.map((row) => `${row.provider} ${row.totalTokens}`).join(', ');
  assert.match(treeText, new RegExp(`^total: ${usage.totalTokens} tokens \\(${byProvider}\\)$`, 'm'));
  const transcriptText = formatTranscript(await thread.transcript());
  assert.match(transcriptText, /^\[2\] assistant \(lead via hosted\/big-model-1\): → worker\(/m);

  // The explorer: each reply's provider and model in the transcript, providers in the tree and the usage line.
  const explorer = await startExplorer({ client: harness.client, port: 0 });
  try {
    const page = async (pathname: string) =>
      (await fetch(new URL(pathname, explorer.url), { headers: { authorization: `Bearer ${explorer.token}` } })).text();
    const workerPage = await page(threadPath(`${root}/worker-1`, '/transcript'));
    assert.match(workerPage, /<span class="muted provider">· via local\/llama3\.1:8b<\/span>/);
    const overview = await page(threadPath(root));
    assert.match(overview, new RegExp(`tokens\\s+\\(${byProvider}\\) in the whole tree · world`));
    assert.match(overview, /tokens · via hosted · started/);
    assert.match(overview, /tokens · via local · started/);
  } finally {
    await explorer.close();
  }
  await thread.end();
});

test('providers: an agent version naming a provider this worker lacks fails its model call, sending nothing', async () => {
  const stray = agent('stray', 'elsewhere/some-model');
  const strayAgents: AgentRegistry = new Map([['stray', stray]]);
  const activities = createActivities({
    pool: harness.pool,
    openai: createModelClient({ baseURL: harness.model.baseURL, apiKey: 'scripted' }),
    model: 'baton-scripted',
    providers: { local: createModelClient({ baseURL: local.baseURL, apiKey: 'unused' }) },
    agents: () => strayAgents,
    // Activities built by hand, as another worker's agent version would reach them: no catalog checked this one.
    tools: createAgentCatalog({ agents: new Map(), filesRoot: workDir, arcDataDir: workDir }).tools,
  });
  const threadId = uniqueThreadId('stray');
  const { epoch } = await run(activities.ensureThread, { threadId, rootThreadId: threadId, agent: 'stray' });
  const { version } = await run(activities.resolveAgent, { name: 'stray' });
  const scope = { rootThreadId: threadId, threadId, agent: 'stray', epoch };
  await run(activities.recordMessage, {
    scope,
    operationId: `${threadId}:in`,
    message: { role: 'user', content: 'hello' },
  });
  const before = [logs.default, logs.local, logs.hosted].map((log) => readModelLog(log).length);
  await assert.rejects(
    run(activities.callModel, {
      scope,
      world: 'default',
      agentVersion: version,
      operationId: `${threadId}:model:0`,
      step: 0,
    }),
    (error: unknown) =>
      error instanceof ApplicationFailure &&
      error.type === ErrorType.ModelUnknownProvider &&
      error.nonRetryable &&
      error.message ===
        "agent 'stray' on this worker: model 'elsewhere/some-model' names provider 'elsewhere', which is not " +
          "configured (providers: local); to send a name with '/' to the default endpoint as it is, write " +
          "'default/elsewhere/some-model'",
  );
  assert.deepEqual(
    [logs.default, logs.local, logs.hosted].map((log) => readModelLog(log).length),
    before,
    'no endpoint was called',
  );
  assert.equal((await listMessages(harness.pool, threadId)).length, 1, 'no reply was stored');
});

/** The history of a root thread's first turn, whose steps run as activities. */
async function turnEvents(root: string): Promise<temporal.api.history.v1.IHistoryEvent[]> {
  return (await harness.client.temporal.workflow.getHandle(`baton/${root}/turn-1`).fetchHistory()).events ?? [];
}

/** The one `callModel` a turn scheduled, and the attempt that completed it with the failure before it. */
function onlyModelCall(events: readonly temporal.api.history.v1.IHistoryEvent[]) {
  const scheduled = events.filter(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'callModel',
  );
  assert.equal(scheduled.length, 1, 'the workflow scheduled one model call');
  const started = events.find(
    (event) =>
      String(event.activityTaskStartedEventAttributes?.scheduledEventId ?? '') === String(scheduled[0]?.eventId),
  )?.activityTaskStartedEventAttributes;
  assert.ok(started, 'the model call started');
  return started;
}

/** The assistant replies stored in a thread: agent, provider and model. */
async function storedReplies(threadId: string): Promise<(string | null)[][]> {
  return (await listMessages(harness.pool, threadId))
    .filter((message) => message.role === 'assistant')
    .map((message) => [message.agent, message.provider, message.model]);
}

test('providers: a provider answering 503 is retried by Temporal, its failure classified, and the reply stored once', async () => {
  const root = uniqueThreadId('flaky');
  const thread = await harness.client.startThread({ agent: 'flaky', threadId: root });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Recovered.');
  assert.deepEqual(received(logs.hosted, root), [
    ['flaky', 'big-model-1', 'hosted'],
    ['flaky', 'big-model-1', 'hosted'],
  ]);
  assert.deepEqual(received(logs.default, root), [], 'the retry went to the same provider');
  assert.deepEqual(await storedReplies(root), [['flaky', 'hosted', 'big-model-1']]);
  // Temporal's retry, not the client's: one scheduled call, completed on its attempt 2 after a typed failure.
  const started = onlyModelCall(await turnEvents(root));
  assert.equal(started.attempt, 2);
  assert.equal(started.lastFailure?.applicationFailureInfo?.type, 'Model.Unavailable');
  assert.equal(started.lastFailure?.applicationFailureInfo?.nonRetryable ?? false, false);
  assert.match(
    started.lastFailure?.message ?? '',
    /^model endpoint answered 503 \(provider 'hosted', model 'big-model-1'\): /,
  );
  await thread.end();
});

test("providers: a provider's 429 is retried after its retry-after, classified, and the reply stored once", async () => {
  const root = uniqueThreadId('throttled');
  const thread = await harness.client.startThread({ agent: 'throttled', threadId: root });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Waited.');
  const requests = readModelLog(logs.hosted).filter((entry) => entry.headers['x-baton-root-thread'] === root);
  assert.equal(requests.length, 2, 'one refused, one answered');
  assert.deepEqual(await storedReplies(root), [['throttled', 'hosted', 'big-model-1']]);
  const started = onlyModelCall(await turnEvents(root));
  assert.equal(started.attempt, 2);
  const failure = started.lastFailure?.applicationFailureInfo;
  assert.equal(failure?.type, 'Model.RateLimited');
  assert.equal(
    Number(failure?.nextRetryDelay?.seconds ?? 0),
    RETRY_AFTER_S,
    'the next retry waits as the endpoint asked',
  );
  // A lower bound, not a speed: Temporal's own backoff would have retried after 1 s.
  const gap = Date.parse(requests[1]?.time ?? '') - Date.parse(requests[0]?.time ?? '');
  assert.ok(gap >= RETRY_AFTER_S * 1000 - 50, `the retry came ${gap} ms after the 429`);
  await thread.end();
});

test('providers: a provider answering 401 fails the turn at once as Model.AuthFailed, naming the provider', async () => {
  const root = uniqueThreadId('locked');
  const thread = await harness.client.startThread({ agent: 'locked', threadId: root });
  const failure = await thread.send('Try.').then(
    () => assert.fail('the turn should fail'),
    (error: unknown) => error,
  );
  assert.ok(failure instanceof WorkflowUpdateFailedError, String(failure));
  let cause: unknown = failure;
  while (cause instanceof Error && cause.cause instanceof Error) cause = cause.cause;
  assert.ok(cause instanceof ApplicationFailure, String(cause));
  assert.equal(cause.type, 'Model.AuthFailed');
  assert.equal(cause.nonRetryable, true);
  assert.match(
    cause.message,
    /^model endpoint answered 401 \(provider 'hosted', model 'big-model-1'\): 401 the hosted key was revoked$/,
  );
  assert.equal(received(logs.hosted, root).length, 1, 'non-retryable: one request');
  assert.deepEqual(await storedReplies(root), [], 'no reply stored');
  const { rows } = await harness.pool.query<{ status: string }>('SELECT status FROM threads WHERE thread_id = $1', [
    root,
  ]);
  assert.equal(rows[0]?.status, 'failed');
  await thread.end();
});

/** A root's run feed as stored, read once. */
async function feed(root: string): Promise<StoredRunEvent[]> {
  return (await readRunFeed(harness.pool, root)).flatMap(runEventsOf);
}

test("model fallback: a 429 burst outlasting the first model's attempts moves the call to the next model, which is recorded", async () => {
  const root = uniqueThreadId('burst');
  const thread = await harness.client.startThread({ agent: 'burst', threadId: root });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Served by the local model.');
  // fallback_after_attempts defaults to 2: two refused attempts at the hosted model, the third at the local one.
  assert.deepEqual(received(logs.hosted, root), [
    ['burst', 'big-model-1', 'hosted'],
    ['burst', 'big-model-1', 'hosted'],
  ]);
  assert.deepEqual(received(logs.local, root), [['burst', 'llama3.1:8b', 'local']]);
  assert.deepEqual(await storedReplies(root), [['burst', 'local', 'llama3.1:8b']], 'the model that served');
  const started = onlyModelCall(await turnEvents(root));
  assert.equal(started.attempt, 3);
  assert.equal(started.lastFailure?.applicationFailureInfo?.type, 'Model.RateLimited');
  // The run feed and usage name the model that served.
  const ended = (await feed(root)).filter((event) => event.type === 'model_call_ended');
  assert.deepEqual(
    ended.map((event) => [event.provider, event.model]),
    [['local', 'llama3.1:8b']],
  );
  await thread.end();
});

test('model fallback: fallback_after_attempts sets how many attempts one model gets', async () => {
  const root = uniqueThreadId('burst2');
  const thread = await harness.client.startThread({ agent: 'burst2', threadId: root });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Served by the local model at once.');
  assert.equal(received(logs.hosted, root).length, 1);
  assert.deepEqual(await storedReplies(root), [['burst2', 'local', 'llama3.1:8b']]);
  assert.equal(onlyModelCall(await turnEvents(root)).attempt, 2);
  await thread.end();
});

test("model fallback: a 401 of the first model's provider moves to the next model within the same attempt", async () => {
  const root = uniqueThreadId('revoked');
  const thread = await harness.client.startThread({ agent: 'revoked', threadId: root });
  const result = await thread.send('Try.');
  assert.equal(result.reply, 'Served by the local model after the 401.');
  assert.deepEqual(received(logs.hosted, root), [['revoked', 'big-model-1', 'hosted']]);
  assert.deepEqual(received(logs.local, root), [['revoked', 'llama3.1:8b', 'local']]);
  assert.deepEqual(await storedReplies(root), [['revoked', 'local', 'llama3.1:8b']]);
  const started = onlyModelCall(await turnEvents(root));
  assert.equal(started.attempt, 1, 'no retry: the next model was asked at once');
  // The feed shows both requests, the second under a stream of its own.
  const calls = (await feed(root)).filter((event) => event.type === 'model_call_started');
  assert.deepEqual(
    calls.map((event) => [event.provider, event.model]),
    [
      ['hosted', 'big-model-1'],
      ['local', 'llama3.1:8b'],
    ],
  );
  assert.equal(new Set(calls.map((event) => event.stream)).size, 2);
  await thread.end();
});

test('model fallback: a batch of steps re-run after its worker was SIGKILLed returns the fallback reply stored, asking no model again', async () => {
  // A `baton worker` process with both providers runs a batched turn whose first model refuses its key: the local
  // model answers with a tool call, and the worker dies while that tool runs. The next worker re-runs the batch from
  // its first step, which returns the stored reply (the local model's) without asking either model again.
  const dir = path.join(workDir, 'killed');
  fs.mkdirSync(path.join(dir, 'agents'), { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'agents', 'stepper.md'),
    '---\nname: stepper\ndescription: Steps.\ncapabilities: [hang_once]\nsteps: batched\n' +
      'model: [hosted/big-model-1, local/llama3.1:8b]\n---\nStep.\n',
  );
  const hangOnce = writeHangOnceTool(dir);
  const hostedLog = path.join(dir, 'hosted.jsonl');
  const localLog = path.join(dir, 'local.jsonl');
  const refusing = await startScriptedModelServer({
    script: parseScript(
      'agents:\n  stepper:\n    - { fail: 401, times: 5 }\n    - say: "Never."\n    - { fail: 401, times: 5 }\n    - say: "Never."\n',
      'refusing',
    ),
    logFile: hostedLog,
  });
  const serving = await startScriptedModelServer({
    script: parseScript('agents:\n  stepper:\n    - { call: hang_once, args: {} }\n    - say: "Stepped."\n', 'serving'),
    logFile: localLog,
  });
  const workerOptions = {
    taskQueue: uniqueTaskQueue('fallback-killed'),
    modelBaseUrl: serving.baseURL,
    agentsDir: path.join(dir, 'agents'),
    env: {
      BATON_TOOLS: hangOnce.toolsFile,
      BATON_PROVIDERS: JSON.stringify({
        hosted: { base_url: refusing.baseURL, api_key_env: 'HOSTED_API_KEY' },
        local: { base_url: serving.baseURL, api_key_env: 'LOCAL_API_KEY' },
      }),
      HOSTED_API_KEY: 'revoked',
      LOCAL_API_KEY: 'unused',
    },
  };
  const client = await connect({
    address: env.temporalAddress,
    taskQueue: workerOptions.taskQueue,
    databaseUrl: env.databaseUrl,
  });
  let first: WorkerProcess | undefined;
  let second: WorkerProcess | undefined;
  try {
    first = await startScriptedWorker('worker A with a fallback chain', workerOptions);
    const threadId = uniqueThreadId('fallback-killed');
    const running = client.run({ agent: 'stepper', threadId, message: 'Step.' });
    running.catch(() => undefined);
    await waitFor('the tool to start', 60_000, () => Promise.resolve(hangOnce.runs() > 0 ? true : undefined));
    await first.kill();
    second = await startScriptedWorker('worker B with a fallback chain', workerOptions);
    const { result } = await running;
    assert.equal(result.reply, 'Stepped.');

    const asked = (log: string) => readModelLog(log).filter((entry) => entry.thread === threadId).length;
    assert.equal(asked(hostedLog), 2, 'the refusing model was asked once per step, not again for the stored reply');
    assert.equal(asked(localLog), 2, 'the serving model was asked once per step');
    assert.deepEqual(await storedReplies(threadId), [
      ['stepper', 'local', 'llama3.1:8b'],
      ['stepper', 'local', 'llama3.1:8b'],
    ]);
    assert.equal(hangOnce.runs(), 2, 'the tool ran again');
  } finally {
    await client.close();
    await first?.kill();
    await second?.kill();
    await refusing.close();
    await serving.close();
  }
});
