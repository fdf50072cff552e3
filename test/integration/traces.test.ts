/**
 * Traces of a whole tree, read back from a real Jaeger (built from its Go module, stack/jaeger.ts) through its own
 * query API: a caller's `traceparent` is the parent of the turn's spans; a delegation that waits for an approval and
 * a fork of two tasks are one trace with Temporal's spans and Baton's GenAI spans where each call was made; an MCP
 * server's tool runs in a span naming the server; a watcher's wake-up is a trace linked to its write; replaying
 * the recorded histories with the traced workflow code exports nothing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Worker } from '@temporalio/worker';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { connect } from '../../client';
import { parseScript, startScriptedModelServer } from '../../scripted-model';
import { readModelLog, startAgentHarness, type AgentHarness } from '../../testing/harness';
import { writeHangOnceTool } from '../../testing/hang-once-tool';
import { startScriptedWorker, type WorkerProcess } from '../../testing/worker-process';
import { startJaeger, type Jaeger, type JaegerSpan } from '../../testing/jaeger';
import { readTestEnv, uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { bundleBatonWorkflows } from '../../worker/create-worker';
import { readTracingSettings, startTracing, tracedWorkerParts, type StartedTracing } from '../../worker/tracing';
import { pendingApprovals, waitFor } from '../chaos/waiting';
import type { McpServers } from '../../activities/tools/mcp-servers';
import { stdioServerEntry, writeMcpConfig } from '../../testing/mcp-reference-servers';
import { startMcpServers } from '../../worker/mcp';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'traces-'));
const service = `baton-traces-${randomBytes(4).toString('hex')}`;

const deployments: unknown[] = [];
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service.',
  parameters: z.object({ service: z.string() }),
  sideEffects: true,
  needsApproval: () => true,
  run: (args) => {
    deployments.push(args);
    return `deployed ${args.service}`;
  },
});
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a topic up.',
  parameters: z.object({ topic: z.string() }),
  run: (args) => `notes on ${args.topic}`,
});

function agent(name: string, capabilities: string): [string, ReturnType<typeof parseAgentFile>] {
  return [
    name,
    parseAgentFile(
      `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: ${capabilities}\n---\nAct.\n`,
      name,
    ),
  ];
}

const agents: AgentRegistry = new Map([
  agent('lead', '[releaser, fork_join, researcher]'),
  agent('releaser', '[deploy]'),
  agent('researcher', '[lookup]'),
  agent('noter', '[reader]'),
  agent('echoer', '[mcp:everything]'),
  [
    'reader',
    parseAgentFile(
      '---\nname: reader\ndescription: Reads notes.\nwatches:\n  - keys: ["notes/*"]\n    debounce_s: 0\n---\nRead.\n',
      'reader',
    ),
  ],
]);

const script = parseScript(
  `
agents:
  lead:
    - { call: releaser, args: { message: "Release the api." } }
    - call: fork_join
      args: { tasks: [ { agent: researcher, message: "Topic one." }, { agent: researcher, message: "Topic two." } ] }
    - say: "Released and researched."
  releaser:
    - { call: deploy, args: { service: "api" } }
    - say: "Deployed."
  researcher:
    - { call: lookup, args: { topic: "a topic" } }
    - say: "Looked it up."
  noter:
    - { call: reader, args: { message: "Get ready to read notes." } }
    - { call: store_env_data, args: { key: "notes/a", short_description: "A note.", value: 1 } }
    - say: "Noted."
  reader:
    - say: "Ready."
    - say: "Read the note."
  echoer:
    - { call: everything__echo, args: { message: "hello over MCP" } }
    - say: "Echoed."
`,
  'traces',
);

let jaeger: Jaeger;
let tracing: StartedTracing;
let harness: AgentHarness;
let mcp: McpServers;

before(async () => {
  jaeger = await startJaeger(path.join(workDir, 'jaeger'));
  const settings = readTracingSettings({
    OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
    OTEL_SERVICE_NAME: service,
  });
  assert.ok(settings, 'an endpoint turns tracing on');
  tracing = startTracing(settings);
  // server-everything over stdio, as a user's MCP configuration starts it.
  const mcpConfig = writeMcpConfig(path.join(workDir, 'mcp.json'), { everything: stdioServerEntry('everything') });
  mcp = await startMcpServers(mcpConfig, process.env, { log: () => undefined });
  harness = await startAgentHarness({
    temporalAddress: env.temporalAddress,
    databaseUrl: env.databaseUrl,
    taskQueue: uniqueTaskQueue('traces'),
    agents,
    script,
    tools: [deploy, lookup],
    mcp,
    tracing,
  });
});

after(async () => {
  await harness?.close();
  await mcp?.close();
  await tracing?.shutdown();
  await jaeger?.stop();
});

/** A directory for a `baton worker` process of one test, with one agent file in its `agents/`. */
function workerProject(name: string, agentFile: string): string {
  const dir = path.join(workDir, name);
  fs.mkdirSync(path.join(dir, 'agents'), { recursive: true });
  const agentName = /^name: (\S+)$/m.exec(agentFile)?.[1] ?? assert.fail('the agent file names its agent');
  fs.writeFileSync(path.join(dir, 'agents', `${agentName}.md`), agentFile);
  return dir;
}

/** The span's ancestors' names within its trace, nearest first. */
function ancestry(span: JaegerSpan, byId: ReadonlyMap<string, JaegerSpan>): string[] {
  const names: string[] = [];
  for (let parent = span.parentSpanId; parent !== undefined;) {
    const found = byId.get(parent);
    if (found === undefined) break;
    names.push(found.name);
    parent = found.parentSpanId;
  }
  return names;
}

test("traces: a delegation waiting for an approval and a fork are one trace under the caller's span", async () => {
  const traceId = randomBytes(16).toString('hex');
  const callerSpanId = randomBytes(8).toString('hex');
  const threadId = uniqueThreadId('traced');
  const running = harness.client.run({
    agent: 'lead',
    threadId,
    message: 'Release, then research two topics.',
    traceparent: `00-${traceId}-${callerSpanId}-01`,
  });
  const thread = harness.client.thread(threadId);
  const [pending] = await pendingApprovals(thread);
  assert.ok(pending);
  await thread.approve(pending.approvalId, { by: 'traces test' });
  const { result } = await running;
  assert.equal(result.reply, 'Released and researched.');
  assert.equal(deployments.length, 1);
  await tracing.tracerProvider.forceFlush();

  // Every chat span of the tree: lead (3 calls), releaser (2), each researcher (2 each).
  // The turn's Update span ends with the turn and may reach Jaeger in a later batch than the model calls.
  const spans = await waitFor('the tree in Jaeger', 60_000, async () => {
    await tracing.tracerProvider.forceFlush();
    const found = (await jaeger.spans(service)).filter((span) => span.traceId === traceId);
    const whole =
      found.filter((span) => span.name.startsWith('chat ')).length >= 9 &&
      found.some((span) => span.name === 'HandleUpdate:sendMessage');
    return whole ? found : undefined;
  });
  const byId = new Map(spans.map((span) => [span.spanId, span]));

  // The caller's span is the parent of the thread's run and of the turn's Update.
  const fromCaller = spans.filter((span) => span.parentSpanId === callerSpanId).map((span) => span.name);
  assert.ok(fromCaller.includes('HandleUpdate:sendMessage'), `children of the caller's span: ${fromCaller.join(', ')}`);

  const chats = spans.filter((span) => span.name.startsWith('chat '));
  for (const chat of chats) {
    assert.equal(chat.name, 'chat baton-scripted');
    assert.equal(chat.tags['gen_ai.operation.name'], 'chat');
    assert.equal(chat.tags['gen_ai.request.model'], 'baton-scripted');
    assert.equal(chat.tags['gen_ai.provider.name'], 'default');
    assert.equal(chat.tags['baton.root_thread_id'], threadId);
    assert.ok(Number(chat.tags['gen_ai.usage.input_tokens']) > 0, 'input tokens recorded');
    assert.ok(chat.tags['baton.operation_id'], 'the operation id is on the span');
    assert.equal(chat.tags['gen_ai.input.messages'], undefined, 'no content unless asked for');
    assert.ok(ancestry(chat, byId).includes('HandleUpdate:sendMessage'), `${chat.name} sits under the turn`);
  }
  const byAgent = (name: string) => chats.filter((chat) => chat.tags['baton.agent'] === name);
  assert.equal(byAgent('lead').length, 3);
  assert.equal(byAgent('releaser').length, 2);
  assert.equal(byAgent('researcher').length, 4);
  assert.equal(new Set(byAgent('researcher').map((chat) => chat.tags['baton.thread_id'])).size, 2, 'two fork tasks');

  // The delegated releaser's spans sit under the child workflow its caller started, the tool under its activity.
  const [deploySpan, ...moreDeploys] = spans.filter((span) => span.name === 'execute_tool deploy');
  assert.ok(deploySpan, 'the approved deploy ran in a span');
  assert.equal(moreDeploys.length, 0);
  assert.equal(deploySpan.tags['gen_ai.operation.name'], 'execute_tool');
  assert.equal(deploySpan.tags['gen_ai.tool.name'], 'deploy');
  assert.ok(deploySpan.tags['gen_ai.tool.call.id'], 'the call id is on the span');
  const deployAncestry = ancestry(deploySpan, byId);
  assert.ok(
    deployAncestry.some((name) => name.startsWith('StartChildWorkflow:')),
    `the delegation's child workflow is an ancestor: ${deployAncestry.join(' < ')}`,
  );
  for (const chat of byAgent('researcher')) {
    const names = ancestry(chat, byId);
    assert.ok(names.includes('RunActivity:callModel') || names.includes('RunActivity:runToolsThenCallModel'));
  }
  assert.equal(spans.filter((span) => span.name === 'execute_tool lookup').length, 2);

  // Baton's workflow spans: a turn per agent run, the approval's wait with its outcome, the fork around its tasks.
  const turns = spans.filter((span) => span.tags['gen_ai.operation.name'] === 'invoke_agent');
  assert.deepEqual(turns.map((span) => span.name).sort(), [
    'invoke_agent lead',
    'invoke_agent releaser',
    'invoke_agent researcher',
    'invoke_agent researcher',
  ]);
  const [approval, ...moreApprovals] = spans.filter((span) => span.name === 'approval deploy');
  assert.ok(approval, 'the wait for the approval is a span');
  assert.equal(moreApprovals.length, 0);
  assert.equal(approval.tags['baton.approval.status'], 'approved');
  assert.equal(approval.tags['baton.approval_id'], pending.approvalId);
  assert.ok(ancestry(approval, byId).includes('invoke_agent releaser'), 'the approval waits in the releaser turn');
  for (const task of turns.filter((span) => span.name === 'invoke_agent researcher')) {
    assert.ok(ancestry(task, byId).includes('fork_join'), 'each task sits under its fork');
    assert.ok(ancestry(task, byId).includes('invoke_agent lead'), "the fork sits under the lead's turn");
  }
});

test('traces: a watcher wake-up is a trace of its own, linked to the write that woke it', async () => {
  const threadId = uniqueThreadId('watched');
  const { result } = await harness.client.run({ agent: 'noter', threadId, message: 'Note it.' });
  assert.equal(result.reply, 'Noted.');

  // Baton's spans carry the thread's ids; Temporal's (a workflow run, a child's start) sit between them.
  const everySpan = await waitFor('the wake-up and its turn in Jaeger', 60_000, async () => {
    await tracing.tracerProvider.forceFlush();
    const found = await jaeger.spans(service);
    const wakeup = found.find(
      (span) => span.name === 'watch_wakeup reader' && span.tags['baton.root_thread_id'] === threadId,
    );
    const wakeupChats = found.filter((span) => span.name.startsWith('chat ') && span.traceId === wakeup?.traceId);
    return wakeupChats.length > 0 ? found : undefined;
  });
  const spans = everySpan.filter((span) => span.tags['baton.root_thread_id'] === threadId);
  const [write, ...moreWrites] = spans.filter((span) => span.name === 'execute_tool store_env_data');
  assert.ok(write, 'the write ran in a span');
  assert.equal(moreWrites.length, 0);
  assert.equal(write.tags['baton.agent'], 'noter');

  const [wakeup, ...moreWakeups] = spans.filter((span) => span.name === 'watch_wakeup reader');
  assert.ok(wakeup, 'the wake-up is a span');
  assert.equal(moreWakeups.length, 0, 'one write, one wake-up');
  assert.equal(wakeup.parentSpanId, undefined, 'the wake-up begins a trace');
  assert.notEqual(wakeup.traceId, write.traceId, "the wake-up is not in the writer's trace");
  assert.deepEqual(wakeup.links, [{ traceId: write.traceId, spanId: write.spanId }], 'it links to the write');
  assert.equal(wakeup.tags['baton.watcher'], 'reader');
  assert.equal(wakeup.tags['baton.watch.wakeup'], 1);
  assert.equal(wakeup.tags['baton.watch.keys'], 'notes/a');
  assert.equal(wakeup.tags['baton.watch.outcome'], 'completed');

  // The wake-up's turn, its model call among it, sits under the wake-up.
  const byId = new Map(everySpan.map((span) => [span.spanId, span]));
  const inWakeup = spans.filter((span) => span.traceId === wakeup.traceId);
  const [turn] = inWakeup.filter((span) => span.name === 'invoke_agent reader');
  assert.ok(turn, "the wake-up's turn is in its trace");
  assert.ok(ancestry(turn, byId).includes('watch_wakeup reader'));
  const [chat, ...moreChats] = inWakeup.filter((span) => span.name.startsWith('chat '));
  assert.ok(chat);
  assert.equal(moreChats.length, 0);
  assert.equal(chat.tags['baton.agent'], 'reader');
  const chatAncestry = ancestry(chat, byId);
  assert.ok(
    chatAncestry.includes('invoke_agent reader'),
    `the model call sits in the turn: ${chatAncestry.join(' < ')}`,
  );
  assert.equal(chatAncestry.at(-1), 'watch_wakeup reader', 'the wake-up is the root of its trace');

  // The root's turn came with no caller's context: a trace of its own, linked to the thread's workflow span, which is
  // exported when the thread's run ends.
  const [rootTurn] = spans.filter((span) => span.name === 'invoke_agent noter');
  assert.ok(rootTurn, "the root's turn is a span");
  assert.equal(rootTurn.traceId, write.traceId, 'the write is in its turn');
  const [threadLink, ...moreLinks] = rootTurn.links;
  assert.ok(threadLink, 'the turn links to its thread');
  assert.equal(moreLinks.length, 0);
  assert.notEqual(threadLink.traceId, rootTurn.traceId);
  await harness.client.thread(threadId).end();
  const threadRun = await waitFor("the thread's workflow span", 60_000, async () => {
    await tracing.tracerProvider.forceFlush();
    return (await jaeger.spans(service)).find((span) => span.spanId === threadLink.spanId);
  });
  assert.equal(threadRun.name, 'RunWorkflow:threadWorkflow');
  assert.equal(threadRun.traceId, threadLink.traceId);
});

test("traces: an MCP server's tool runs in an execute_tool span naming the server, under its turn", async () => {
  const threadId = uniqueThreadId('mcp');
  const { result } = await harness.client.run({ agent: 'echoer', threadId, message: 'Echo.' });
  assert.equal(result.reply, 'Echoed.');
  const everySpan = await waitFor('the MCP call in Jaeger', 60_000, async () => {
    await tracing.tracerProvider.forceFlush();
    const found = await jaeger.spans(service);
    return found.some(
      (span) => span.name === 'execute_tool everything__echo' && span.tags['baton.root_thread_id'] === threadId,
    )
      ? found
      : undefined;
  });
  const [echo, ...more] = everySpan.filter(
    (span) => span.name === 'execute_tool everything__echo' && span.tags['baton.root_thread_id'] === threadId,
  );
  assert.ok(echo);
  assert.equal(more.length, 0, 'one call, one span');
  assert.equal(echo.tags['gen_ai.operation.name'], 'execute_tool');
  assert.equal(echo.tags['gen_ai.tool.name'], 'everything__echo');
  assert.equal(echo.tags['baton.mcp.server'], 'everything');
  assert.ok(echo.tags['gen_ai.tool.call.id'], 'the call id is on the span');
  const byId = new Map(everySpan.map((span) => [span.spanId, span]));
  assert.ok(ancestry(echo, byId).includes('invoke_agent echoer'), 'the call sits in its turn');
});

test('traces: replaying the recorded histories with the traced workflow code exports no span', async () => {
  const threadId = uniqueThreadId('replayed');
  const { result } = await harness.client.run({ agent: 'researcher', threadId, message: 'Look it up.' });
  assert.equal(result.reply, 'Looked it up.');
  const replayService = `${service}-replay`;
  const replayTracing = startTracing({
    ...(readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint, OTEL_SERVICE_NAME: replayService }) ??
      assert.fail('tracing on')),
  });
  try {
    const parts = tracedWorkerParts(replayTracing);
    const bundle = await bundleBatonWorkflows({ tracing: true });
    const history = await harness.client.temporal.workflow.getHandle(`baton/${threadId}`).fetchHistory();
    await Worker.runReplayHistory(
      {
        workflowBundle: bundle,
        sinks: parts.sinks,
      },
      history,
      `baton/${threadId}`,
    );
    await replayTracing.tracerProvider.forceFlush();
    // The same history run live made spans: the live worker's service has this thread's.
    const live = await waitFor('the live spans', 30_000, async () => {
      await tracing.tracerProvider.forceFlush();
      const found = (await jaeger.spans(service)).filter((span) => span.tags['baton.root_thread_id'] === threadId);
      return found.length > 0 ? found : undefined;
    });
    assert.ok(live.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(await jaeger.spans(replayService), [], 'the replay exported nothing');
  } finally {
    await replayTracing.shutdown();
  }
});

test("metrics over OTLP: a worker with only the OTLP endpoint set sends the SDK's and Baton's metrics", async () => {
  const dir = workerProject(
    'otlp-metrics',
    '---\nname: metered\ndescription: Metered.\ncapabilities: []\n---\nAnswer.\n',
  );
  const model = await startScriptedModelServer({
    script: parseScript('agents:\n  metered:\n    - say: "Metered."\n', 'otlp-metrics'),
  });
  const bundleFile = path.join(dir, 'bundle.js');
  fs.writeFileSync(bundleFile, (await bundleBatonWorkflows({ tracing: true })).code);
  const taskQueue = uniqueTaskQueue('otlp-metrics');
  const client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
  let worker: WorkerProcess | undefined;
  try {
    worker = await startScriptedWorker('worker sending metrics over OTLP', {
      taskQueue,
      modelBaseUrl: model.baseURL,
      agentsDir: path.join(dir, 'agents'),
      env: {
        BATON_WORKFLOW_BUNDLE: bundleFile,
        OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
        OTEL_SERVICE_NAME: `${service}-metrics`,
        OTEL_METRIC_EXPORT_INTERVAL: '500',
      },
    });
    assert.match(worker.output(), /metrics to http:\/\/127\.0\.0\.1:\d+\/v1\/metrics every 500 ms/);
    const { result } = await client.run({ agent: 'metered', threadId: uniqueThreadId('otlp'), message: 'Go.' });
    assert.equal(result.reply, 'Metered.');
    const text = await waitFor("the worker's metrics at the collector", 30_000, async () => {
      const body = await (await fetch(jaeger.metricsUrl)).text();
      return /^baton_model_calls\S*\{[^}]*agent="metered"[^}]*\} 1$/m.test(body) ? body : undefined;
    });
    assert.match(text, /^temporal_\w+/m, "the SDK's own metrics came too");
  } finally {
    await client.close();
    await worker?.kill();
    await model.close();
  }
});

test('traces: a worker with its OpenTelemetry turned off, or with no OTLP endpoint, exports nothing', async () => {
  // `baton worker` exports to Jaeger with the endpoint set (the tests around this one); here one worker has the
  // endpoint and OTEL_SDK_DISABLED=true, the other a service name and no endpoint.
  const dir = workerProject(
    'off',
    '---\nname: quiet\ndescription: Quiet.\ncapabilities: [lookup_notes]\n---\nAnswer.\n',
  );
  const toolsFile = path.join(dir, 'tools.mjs');
  fs.writeFileSync(
    toolsFile,
    `import { z } from 'zod';
export default [{ name: 'lookup_notes', description: 'Notes.', parameters: z.object({}), run: () => 'notes' }];
`,
  );
  const model = await startScriptedModelServer({
    script: parseScript(
      'agents:\n  quiet:\n    - { call: lookup_notes, args: {} }\n    - say: "Quiet."\n    - { call: lookup_notes, args: {} }\n    - say: "Quiet."\n',
      'off',
    ),
  });
  const offService = `${service}-off`;
  const variants: [string, Record<string, string>][] = [
    ['OTEL_SDK_DISABLED=true', { OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint, OTEL_SDK_DISABLED: 'true' }],
    ['no OTLP endpoint', {}],
  ];
  try {
    for (const [label, otel] of variants) {
      const taskQueue = uniqueTaskQueue('traces-off');
      const client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
      let worker: WorkerProcess | undefined;
      try {
        worker = await startScriptedWorker(`worker with ${label}`, {
          taskQueue,
          modelBaseUrl: model.baseURL,
          agentsDir: path.join(dir, 'agents'),
          env: { BATON_TOOLS: toolsFile, OTEL_SERVICE_NAME: offService, ...otel },
        });
        const { result } = await client.run({ agent: 'quiet', threadId: uniqueThreadId('off'), message: 'Go.' });
        assert.equal(result.reply, 'Quiet.');
        worker.child.kill('SIGTERM');
        await worker.exited;
        assert.doesNotMatch(worker.output(), /traces to/, `${label}: the worker says it traces nothing`);
      } finally {
        await client.close();
        await worker?.kill();
      }
    }
    // Longer than the export batch delay and Jaeger's own batch: anything sent would be there by now.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.deepEqual(await jaeger.spans(offService), [], 'no span reached Jaeger');
    const services = (await (await fetch(`${jaeger.queryUrl}/api/services`)).json()) as { data: string[] | null };
    assert.ok(!(services.data ?? []).includes(offService), `no service ${offService} in ${services.data?.join(', ')}`);
  } finally {
    await model.close();
  }
});

test('traces: a batch of steps re-run after its worker was SIGKILLed shows no second call for the stored reply', async () => {
  // A `baton worker` process exporting to Jaeger runs a batched turn: the model's first reply is stored, then the
  // worker dies while the tool of that reply runs; the next worker re-runs the batch from its first step, which
  // returns the stored reply without asking the model again.
  const dir = workerProject(
    'killed',
    '---\nname: stepper\ndescription: Steps.\ncapabilities: [hang_once]\nsteps: batched\n---\nStep.\n',
  );
  const hangOnce = writeHangOnceTool(dir);
  const modelLog = path.join(dir, 'model.jsonl');
  const model = await startScriptedModelServer({
    script: parseScript('agents:\n  stepper:\n    - { call: hang_once, args: {} }\n    - say: "Stepped."\n', 'killed'),
    logFile: modelLog,
  });
  const bundleFile = path.join(dir, 'bundle.js');
  fs.writeFileSync(bundleFile, (await bundleBatonWorkflows({ tracing: true })).code);
  const killService = `${service}-killed`;
  const taskQueue = uniqueTaskQueue('traces-killed');
  const workerOptions = {
    taskQueue,
    modelBaseUrl: model.baseURL,
    agentsDir: path.join(dir, 'agents'),
    env: {
      BATON_WORKFLOW_BUNDLE: bundleFile,
      BATON_TOOLS: hangOnce.toolsFile,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      OTEL_SERVICE_NAME: killService,
    },
  };
  const client = await connect({ address: env.temporalAddress, taskQueue, databaseUrl: env.databaseUrl });
  let first: WorkerProcess | undefined;
  let second: WorkerProcess | undefined;
  try {
    first = await startScriptedWorker('traced worker A', workerOptions);
    const threadId = uniqueThreadId('killed');
    const running = client.run({ agent: 'stepper', threadId, message: 'Step.' });
    running.catch(() => undefined);
    await waitFor('the tool to start', 60_000, () => Promise.resolve(hangOnce.runs() > 0 ? true : undefined));
    // Longer than the export batch delay (1 s): the dead worker's span of the first model call reached Jaeger.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await first.kill();
    second = await startScriptedWorker('traced worker B', workerOptions);
    const { result } = await running;
    assert.equal(result.reply, 'Stepped.');
    // A SIGTERM'd worker flushes its spans before it exits.
    second.child.kill('SIGTERM');
    await second.exited;

    const requests = readModelLog(modelLog).filter((entry) => entry.agent === 'stepper');
    assert.equal(requests.length, 2, 'the model was asked once per step');
    const spans = await waitFor('both model calls in Jaeger', 30_000, async () => {
      const found = (await jaeger.spans(killService)).filter((span) => span.tags['baton.root_thread_id'] === threadId);
      return found.filter((span) => span.name.startsWith('chat ')).length >= 2 ? found : undefined;
    });
    const chats = spans.filter((span) => span.name.startsWith('chat '));
    const perOperation = new Map<unknown, number>();
    for (const chat of chats) {
      perOperation.set(chat.tags['baton.operation_id'], (perOperation.get(chat.tags['baton.operation_id']) ?? 0) + 1);
    }
    assert.deepEqual([...perOperation.values()], [1, 1], 'one chat span per model call, none for the stored reply');
    // The activity that re-ran the batch (its span names the workflow, not the thread) says it reused the reply.
    const activities = (await jaeger.spans(killService)).filter((span) =>
      (typeof span.tags.temporalWorkflowId === 'string' ? span.tags.temporalWorkflowId : '').startsWith(
        `baton/${threadId}`,
      ),
    );
    assert.ok(
      activities.some((span) => span.name.startsWith('RunActivity:') && span.tags['baton.model.reply_reused'] === true),
      `the re-run step says it reused the stored reply: ${activities.map((span) => span.name).join(', ')}`,
    );
    assert.equal(hangOnce.runs(), 2, 'the read-only tool ran again');
  } finally {
    await client.close();
    await first?.kill();
    await second?.kill();
    await model.close();
  }
});
