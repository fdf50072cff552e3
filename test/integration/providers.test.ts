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
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { formatTranscript, formatTree } from '../../client/format';
import { ErrorType } from '../../common/errors';
import { startExplorer } from '../../explorer';
import { threadPath } from '../../explorer/pages';
import { listMessages } from '../../db/transcripts';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readModelLog, startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
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
  ].map((a) => [a.name, a]),
);

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
`,
    'hosted',
  ),
  local: parseScript('agents:\n  worker:\n    - say: "nine cells"\n', 'local'),
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
