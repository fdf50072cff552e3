/**
 * `baton mcp serve` as an MCP client runs it, with the official SDK's own client: over stdio (the SDK spawns
 * `node bin/baton.js mcp serve`, which finds Baton through stack.json as the other commands do) and over Streamable
 * HTTP (`--http`, found through TEMPORAL_ADDRESS and DATABASE_URL), against a worker on the test stack.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { writeStackFile } from '../../stack/stack-file';
import type { AgentHarness } from '../../testing/harness';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';
import {
  baton,
  childEnv,
  describeRun,
  env,
  freshDir,
  ROOT,
  stackEnv,
  startBaton,
  waitFor,
  workDir,
  type BackgroundCommand,
} from './cli-process';
import {
  ASKER,
  ASKER_REPLY,
  BATON,
  BROKEN,
  COLOUR,
  deployed,
  GREETER,
  GREETER_FILE,
  GREETING,
  KEEPER,
  KEEPER_REPLY,
  QUESTION,
  SECOND_GREETING,
  SHIPPER,
  SHIPPER_REPLY,
  SLOW,
  SLOW_GATE,
  SLOW_REPLY,
  startMcpHarness,
  structured,
  TOOL_NAMES,
  toolError,
} from './mcp-fixtures';

let harness: AgentHarness;

before(async () => {
  harness = await startMcpHarness('mcp-server');
});
after(async () => {
  await harness?.close();
});

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  assert.equal(child.status, 0);
  return child.pid ?? 0;
}

function mcpClient(): Client {
  return new Client({ name: 'mcp-test-client', version: '1.0.0' });
}

/** Calls a tool; its result as the SDK client got it. */
async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

describe('over stdio, found through stack.json', () => {
  const stateDir = freshDir('mcp-state');
  const client = mcpClient();
  let transport: StdioClientTransport;
  let stderr = '';
  let stderrBeforeStack = '';
  let refusalBeforeStack = '';
  const stack = () => ({
    temporalAddress: env.temporalAddress,
    namespace: 'default',
    taskQueue: harness.taskQueue,
    databaseUrl: env.databaseUrl,
    scriptedModel: true,
    // This test process: stack.json is live while the process that wrote it runs.
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    structured(await callTool(client, name, args));
  const refusal = async (name: string, args: Record<string, unknown> = {}) =>
    toolError(await callTool(client, name, args));

  before(async () => {
    // The server starts before Baton's stack.json exists, as an MCP client may start it before `baton dev`.
    transport = new StdioClientTransport({
      command: process.execPath,
      args: [BATON, '--state-dir', stateDir, 'mcp', 'serve'],
      env: childEnv() as Record<string, string>,
      cwd: workDir,
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    await client.connect(transport);
    // What it said before Baton ran, kept for the first test; then Baton is there for every test, each run alone too.
    stderrBeforeStack = stderr;
    refusalBeforeStack = await refusal('list_agents');
    // As `baton dev` leaves it: stack.json, and the stack's token, with which its worker checks decisions (here the
    // harness's key) and which a CLI that finds the stack signs them with.
    fs.writeFileSync(path.join(stateDir, 'token'), `${harness.decisionKey ?? ''}\n`, { mode: 0o600 });
    writeStackFile(stateDir, stack());
  });

  // Its last test closes the client; one run alone (`--test-name-pattern`) must still end the server.
  after(() => client.close());

  test('it starts before Baton runs, says so on every call, and connects once stack.json is there', async () => {
    assert.match(
      stderrBeforeStack,
      /^baton mcp: serving on stdio; Baton is not reachable yet \(no Baton stack is running/,
    );
    assert.match(refusalBeforeStack, /^no Baton stack is running \(no live .*stack\.json\): start one/);
    assert.ok(((await call('list_agents')).agents as unknown[]).length > 0);
    // It looks at every call: a stack that stopped is gone for the next call, one that started again is found.
    writeStackFile(stateDir, { ...stack(), pid: deadPid() });
    assert.match(await refusal('list_agents'), /^no Baton stack is running/);
    writeStackFile(stateDir, stack());
    const { agents } = (await call('list_agents')) as { agents: Record<string, unknown>[] };
    const greeter = agents.find((agent) => agent.name === GREETER);
    assert.deepEqual(greeter, {
      name: GREETER,
      description: 'Greets whoever writes.',
      capabilities: [],
      approval: [],
      max_steps: 25,
      delegation_context: 'standard',
      version: greeter?.version,
      uri: `baton://agents/${GREETER}`,
    });
    assert.match(String(greeter?.version), /^[0-9a-f]{16}$/);
    assert.ok(agents.some((agent) => agent.name === SHIPPER && String(agent.capabilities) === 'deploy'));
  });

  test('the tools, with their schemas and instructions, and the agents as resources', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.deepEqual([client.getServerVersion()?.name, client.getServerVersion()?.version], ['baton', version]);
    assert.match(client.getInstructions() ?? '', /get_thread with the message_id/);
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((tool) => tool.name),
      TOOL_NAMES,
    );
    const start = tools.find((tool) => tool.name === 'start_thread');
    assert.deepEqual(start?.inputSchema.required, ['agent', 'message']);
    assert.deepEqual(Object.keys(start?.inputSchema.properties ?? {}), [
      'agent',
      'message',
      'thread_id',
      'world',
      'wait',
      'wait_seconds',
    ]);
    assert.equal(tools.find((tool) => tool.name === 'get_thread')?.annotations?.readOnlyHint, true);
    assert.equal(start?.annotations?.readOnlyHint, false);

    const { resources } = await client.listResources();
    const greeter = resources.find((resource) => resource.uri === `baton://agents/${GREETER}`);
    assert.deepEqual(greeter && { name: greeter.name, mimeType: greeter.mimeType }, {
      name: GREETER,
      mimeType: 'text/markdown',
    });
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(
      resourceTemplates.map((template) => template.uriTemplate),
      ['baton://agents/{name}'],
    );
    const { contents } = await client.readResource({ uri: `baton://agents/${GREETER}` });
    const text = contents[0] && 'text' in contents[0] ? contents[0].text : '';
    // The definition read back as an agent file is the agent the worker loaded.
    const { source: _source, ...loaded } = parseAgentFile(GREETER_FILE, 'greeter.md');
    const { source: _again, ...served } = parseAgentFile(text, 'resource.md');
    assert.deepEqual(served, loaded);
    assert.match(text, /\n---\n\nYou greet warmly\.\n$/);
    await assert.rejects(client.readResource({ uri: 'baton://agents/nobody' }), /unknown agent 'nobody'/);
    await assert.rejects(client.readResource({ uri: 'file:///etc/passwd' }), /no resource at 'file:\/\/\/etc\/passwd'/);
  });

  test('start_thread with wait gives the reply; get_thread, send_message and get_transcript follow the thread', async () => {
    const threadId = uniqueThreadId('mcp-greet');
    const started = await call('start_thread', { agent: GREETER, message: 'Hi!', thread_id: threadId, wait: true });
    assert.equal(started.threadId, threadId);
    assert.equal(started.status, 'completed');
    assert.equal(started.reply, GREETING);
    assert.equal(started.turn, 1);
    assert.match(String(started.messageId), /^[0-9a-f-]{36}$/);

    const sent = await call('send_message', {
      thread_id: threadId,
      message: 'Again!',
      message_id: 'greet-2',
      wait: true,
      wait_seconds: 30,
    });
    assert.deepEqual([sent.messageId, sent.turn, sent.reply], ['greet-2', 2, SECOND_GREETING]);
    // The same message id again is the same turn, not a third one.
    const again = await call('send_message', {
      thread_id: threadId,
      message: 'Again!',
      message_id: 'greet-2',
      wait: true,
    });
    assert.deepEqual([again.turn, again.reply], [2, SECOND_GREETING]);

    const thread = await call('get_thread', { thread_id: threadId, message_id: started.messageId });
    assert.equal(thread.agent, GREETER);
    assert.equal(thread.turns, 2);
    assert.equal(thread.busy, false);
    assert.deepEqual(thread.waits, []);
    assert.deepEqual((thread.lastReply as { content: string }).content, SECOND_GREETING);
    assert.equal((thread.usage as { modelCalls: number }).modelCalls, 2);
    assert.deepEqual([thread.openQuestions, thread.pendingApprovals], [[], []]);
    assert.deepEqual(
      [(thread.message as Record<string, unknown>).status, (thread.message as Record<string, unknown>).reply],
      ['completed', GREETING],
    );

    const first = await call('get_transcript', { thread_id: threadId, limit: 3 });
    const firstMessages = first.messages as { seq: number; role: string; content: string }[];
    assert.deepEqual(
      firstMessages.map((m) => [m.seq, m.role, m.content]),
      [
        [1, 'user', 'Hi!'],
        [2, 'assistant', GREETING],
        [3, 'user', 'Again!'],
      ],
    );
    assert.equal(first.nextAfter, 3);
    const rest = await call('get_transcript', { thread_id: threadId, after: first.nextAfter, limit: 3 });
    assert.deepEqual(
      (rest.messages as { seq: number; content: string }[]).map((m) => [m.seq, m.content]),
      [[4, SECOND_GREETING]],
    );
    assert.equal(rest.nextAfter, undefined);
  });

  test('a long turn holds no request beyond its bounded wait: the client polls get_thread for the reply', async () => {
    const began = Date.now();
    const started = await call('start_thread', {
      agent: SLOW,
      message: 'Take your time.',
      wait: true,
      wait_seconds: 2,
    });
    assert.ok(Date.now() - began < 15_000, `start_thread came back after ${Date.now() - began} ms`);
    assert.equal(started.status, 'running');
    assert.deepEqual([started.openQuestions, started.pendingApprovals], [[], []]);
    assert.match(String(started.next), /call get_thread with thread_id '.+', message_id '.+' and wait_seconds/);
    const threadId = String(started.threadId);
    const polled = await call('get_thread', { thread_id: threadId, message_id: started.messageId, wait_seconds: 1 });
    assert.equal(polled.busy, true);
    assert.equal(polled.lastReply, null);
    assert.deepEqual(polled.message, { messageId: started.messageId, status: 'running' });

    assert.equal(harness.model.release(SLOW_GATE), 1, 'the slow reply was waiting');
    const done = await call('get_thread', { thread_id: threadId, message_id: started.messageId, wait_seconds: 30 });
    const message = done.message as Record<string, unknown>;
    assert.deepEqual([message.status, message.reply, message.turn], ['completed', SLOW_REPLY, 1]);
    assert.equal((done.lastReply as { content: string }).content, SLOW_REPLY);
  });

  test('a question: the turn waits, list_questions shows it, answer_question lets it go on', async () => {
    const started = await call('start_thread', { agent: ASKER, message: 'Paint the door.' });
    assert.equal(started.status, 'running');
    const threadId = String(started.threadId);
    const questions = await waitFor(
      'the question',
      async () => ((await call('list_questions', { thread_id: threadId })).questions as unknown[]).length === 1,
      { timeoutMs: 60_000 },
    ).then(async () => (await call('list_questions', { thread_id: threadId })).questions as Record<string, unknown>[]);
    assert.deepEqual(
      questions.map((q) => [q.questionId, q.agent, q.question, q.status]),
      [['q1', ASKER, QUESTION, 'open']],
    );
    const waiting = await call('get_thread', { thread_id: threadId });
    assert.deepEqual(
      (waiting.openQuestions as Record<string, unknown>[]).map((q) => [q.questionId, q.question]),
      [['q1', QUESTION]],
    );

    assert.deepEqual(await call('answer_question', { thread_id: threadId, question_id: 'q1', answer: 'blue' }), {
      questionId: 'q1',
      status: 'answered',
    });
    const done = await call('get_thread', { thread_id: threadId, message_id: started.messageId, wait_seconds: 30 });
    assert.equal((done.message as Record<string, unknown>).reply, ASKER_REPLY);
    const transcript = await call('get_transcript', { thread_id: threadId });
    assert.ok(
      (transcript.messages as { role: string; content: string }[]).some(
        (m) => m.role === 'tool' && m.content === 'The human answered: blue',
      ),
    );
    const all = (await call('list_questions', { thread_id: threadId, all: true })).questions as Record<
      string,
      unknown
    >[];
    assert.deepEqual(
      all.map((q) => [q.questionId, q.status, q.answer]),
      [['q1', 'answered', 'blue']],
    );
    assert.equal(
      await refusal('answer_question', { thread_id: threadId, question_id: 'q1', answer: 'red' }),
      "question 'q1' is already answered",
    );
  });

  test('env data the agents stored: the manifest and one value, read-only', async () => {
    const started = await call('start_thread', { agent: KEEPER, message: 'Remember blue.', wait: true });
    assert.equal(started.reply, KEEPER_REPLY);
    const threadId = String(started.threadId);
    const manifest = await call('list_env_data', { thread_id: threadId });
    assert.deepEqual(
      (manifest.entries as Record<string, unknown>[]).map((entry) => [
        entry.key,
        entry.shortDescription,
        entry.version,
        (entry.storedBy as { agent: string }).agent,
        'value' in entry,
      ]),
      [['palette/colour', 'The colour chosen', 1, KEEPER, false]],
    );
    assert.equal(manifest.more, 0);
    assert.deepEqual((await call('list_env_data', { thread_id: threadId, prefix: 'other/' })).entries, []);
    const entry = await call('get_env_data', { thread_id: threadId, key: 'palette/colour' });
    assert.deepEqual(entry.value, COLOUR);
    assert.equal(
      await refusal('get_env_data', { thread_id: threadId, key: 'palette/size' }),
      `no entry 'palette/size' in thread '${threadId}'`,
    );
    assert.equal(
      await refusal('list_env_data', { thread_id: `${threadId}/nobody-1` }),
      `thread '${threadId}/nobody-1' does not exist`,
    );
  });

  test('an approval: list_approvals shows the call, decide_approval runs it and records who decided', async () => {
    const started = await call('start_thread', { agent: SHIPPER, message: 'Ship billing.' });
    const threadId = String(started.threadId);
    await waitFor(
      'the approval',
      async () => ((await call('list_approvals', { thread_id: threadId })).approvals as unknown[]).length === 1,
      { timeoutMs: 60_000 },
    );
    const waiting = await call('get_thread', { thread_id: threadId, message_id: started.messageId });
    assert.deepEqual(
      (waiting.pendingApprovals as Record<string, unknown>[]).map((a) => [a.approvalId, a.tool, a.arguments]),
      [['a1', 'deploy', '{"service":"billing"}']],
    );
    assert.deepEqual(waiting.message, { messageId: started.messageId, status: 'running' });
    assert.deepEqual(deployed, [], 'nothing ran before the approval');
    assert.equal(
      await refusal('decide_approval', { thread_id: threadId, approval_id: 'a1', decision: 'approve', reason: 'ok' }),
      "'reason' goes with a rejection: an approval has none",
    );
    assert.deepEqual(await call('decide_approval', { thread_id: threadId, approval_id: 'a1', decision: 'approve' }), {
      approvalId: 'a1',
      status: 'approved',
    });
    const done = await call('get_thread', { thread_id: threadId, message_id: started.messageId, wait_seconds: 30 });
    assert.equal((done.message as Record<string, unknown>).reply, SHIPPER_REPLY);
    assert.deepEqual(deployed, ['billing']);
    const all = (await call('list_approvals', { thread_id: threadId, all: true })).approvals as Record<
      string,
      unknown
    >[];
    assert.deepEqual(
      all.map((a) => [a.approvalId, a.status, a.decidedBy]),
      [['a1', 'approved', 'mcp-test-client (over MCP)']],
    );
  });

  test("errors are tool errors in Baton's one-line words: unknown agents, threads and messages, bad arguments, a failed turn", async () => {
    assert.match(
      await refusal('start_thread', { agent: 'nobody', message: 'Hello?' }),
      /^unknown agent 'nobody': no worker on this database has defined it \(known: .*mcp_greeter/,
    );
    assert.equal(
      await refusal('start_thread', { agent: 'No Body', message: 'Hello?' }),
      "agent name 'No Body' must be lowercase letters, digits, '_' or '-' (at most 64)",
    );
    assert.equal(
      await refusal('get_thread', { thread_id: 'mcp-no-such-thread' }),
      "thread 'mcp-no-such-thread' does not exist or has ended",
    );
    assert.equal(
      await refusal('send_message', { thread_id: 'mcp-no-such-thread', message: 'Anyone?' }),
      "thread 'mcp-no-such-thread' does not exist or has ended",
    );
    assert.equal(
      await refusal('get_transcript', { thread_id: 'mcp-no-such-thread' }),
      "thread 'mcp-no-such-thread' does not exist",
    );
    assert.equal(
      await refusal('answer_question', { thread_id: 'mcp-no-such-thread', question_id: 'q9', answer: 'yes' }),
      "thread 'mcp-no-such-thread' has no question 'q9'",
    );
    assert.equal(
      await refusal('start_thread', { agent: GREETER }),
      "invalid arguments for 'start_thread': 'message' Invalid input: expected string, received undefined",
    );
    assert.equal(
      await refusal('start_thread', { agent: GREETER, message: 'Hi', colour: 'blue' }),
      "invalid arguments for 'start_thread': unknown argument 'colour'",
    );
    assert.equal(
      await refusal('start_thread', { agent: GREETER, message: 'Hi', wait: true, wait_seconds: 3600 }),
      "invalid arguments for 'start_thread': 'wait_seconds' Too big: expected number to be <=50",
    );
    assert.equal(
      await refusal('start_thread', { agent: GREETER, message: 'Hi', wait_seconds: 5 }),
      "'wait_seconds' goes with 'wait: true'",
    );
    assert.equal(
      await refusal('get_thread', { thread_id: 'mcp-no-such-thread', wait_seconds: 5 }),
      "'wait_seconds' waits for one message's reply: give its 'message_id' too",
    );
    assert.equal(
      await refusal('answer_question', { thread_id: 'x', question_id: 'question-1', answer: 'yes' }),
      "invalid arguments for 'answer_question': 'question_id' must be a question id such as q1",
    );
    assert.match(
      await refusal('no_such_tool'),
      /^unknown tool 'no_such_tool'; the tools are list_agents, start_thread/,
    );

    // A message the thread refuses (blank), a message id it never got, and a turn that fails.
    const threadId = uniqueThreadId('mcp-errors');
    assert.equal(
      await refusal('start_thread', { agent: BROKEN, message: '   ', thread_id: threadId }),
      'message must be a non-empty string [Input.Invalid]',
    );
    assert.equal(
      await refusal('start_thread', { agent: BROKEN, message: 'Again', thread_id: threadId }),
      `thread '${threadId}' already exists; send it a message to continue it`,
    );
    assert.match(
      await refusal('get_thread', { thread_id: threadId, message_id: 'never-sent' }),
      new RegExp(`^thread '${threadId}' has no message 'never-sent' in its current run`),
    );
    assert.match(
      await refusal('send_message', { thread_id: threadId, message: 'Work!', message_id: 'broken-1', wait: true }),
      new RegExp(`^the turn answering message 'broken-1' of thread '${threadId}' failed: .*${BROKEN}`),
    );
    const failed = await call('get_thread', { thread_id: threadId, message_id: 'broken-1' });
    const message = failed.message as Record<string, unknown>;
    assert.equal(message.status, 'failed');
    assert.match(String(message.error), /^the turn answering message 'broken-1'/);
  });

  test('closing stdin ends the server at once', async () => {
    const began = Date.now();
    await client.close();
    // The SDK's client waits 2 s for the process to end by itself before it sends SIGTERM.
    assert.ok(Date.now() - began < 2_000, `the server ended ${Date.now() - began} ms after its stdin closed`);
    assert.doesNotMatch(stderr, /Error|error:/);
  });
});

describe('with no worker on its task queue', () => {
  const client = mcpClient();
  const call = async (name: string, args: Record<string, unknown> = {}) => callTool(client, name, args);
  /**
   * The server's waits for a worker, set below their defaults (20 s and 10 s, which test/unit/mcp-server.test.ts
   * pins): what is checked is that each call ends at its bound with the error naming it, whatever the bound.
   */
  const ACCEPT_WAIT_S = 3;
  const STATUS_WAIT_S = 2;

  before(async () => {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [BATON, 'mcp', 'serve', '--accept-wait', String(ACCEPT_WAIT_S), '--status-wait', String(STATUS_WAIT_S)],
        env: stackEnv({ BATON_TASK_QUEUE: uniqueTaskQueue('mcp-no-worker') }) as Record<string, string>,
        cwd: workDir,
        stderr: 'pipe',
      }),
    );
  });
  after(async () => {
    await client.close();
  });

  test('a message nobody accepts and a thread nobody answers for are bounded errors, not hung requests', async () => {
    const threadId = uniqueThreadId('mcp-no-worker');
    let began = Date.now();
    const start = toolError(await call('start_thread', { agent: GREETER, message: 'Hello?', thread_id: threadId }));
    const startMs = Date.now() - began;
    assert.match(
      start,
      new RegExp(
        `^thread '${threadId}' has not accepted the message within ${ACCEPT_WAIT_S} s \\(is a worker polling its task queue\\?\\); ` +
          `it may still run once one does: post it again under message id '[0-9a-f-]{36}' to be sure it runs, and only once$`,
      ),
    );
    // It waited out its bound, and came back well before the 55 s every call is cut off at.
    assert.ok(
      startMs >= ACCEPT_WAIT_S * 1000 - 1_000 && startMs < 30_000,
      `start_thread came back after ${startMs} ms`,
    );
    began = Date.now();
    assert.equal(
      toolError(await call('get_thread', { thread_id: threadId })),
      `thread '${threadId}' did not answer within ${STATUS_WAIT_S} s (is a worker polling its task queue?)`,
    );
    const statusMs = Date.now() - began;
    assert.ok(
      statusMs >= STATUS_WAIT_S * 1000 - 1_000 && statusMs < 30_000,
      `get_thread came back after ${statusMs} ms`,
    );
  });
});

describe('over Streamable HTTP on loopback, found through TEMPORAL_ADDRESS and DATABASE_URL', () => {
  const stateDir = freshDir('mcp-http-state');
  let server: BackgroundCommand;
  let url: URL;
  let token = '';
  /** What a client sends with every request: the header `baton mcp serve --http --json` printed. */
  let headers: Record<string, string> = {};

  before(async () => {
    server = startBaton(
      ['--state-dir', stateDir, 'mcp', 'serve', '--http', '--port', '0', '--json'],
      // The workers' decision key, which a deployment gives whatever decides its approvals.
      stackEnv({ BATON_TASK_QUEUE: harness.taskQueue, BATON_DECISION_KEY: harness.decisionKey ?? '' }),
    );
    await waitFor('the MCP server to listen', () => server.output.stdout().includes('\n'), {
      timeoutMs: 60_000,
      child: server.child,
      describe: server.output.stderr,
    });
    const printed = JSON.parse(server.output.stdout()) as {
      url: string;
      token: string;
      headers: Record<string, string>;
    };
    url = new URL(printed.url);
    token = printed.token;
    headers = printed.headers;
  });
  after(() => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  });

  /** The SDK's client over HTTP, sending `requestHeaders` with every request. */
  async function httpClient(requestHeaders: Record<string, string>): Promise<Client> {
    const client = mcpClient();
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: requestHeaders } }));
    return client;
  }

  test('the token: generated into the state directory (mode 600) and printed as the header a client sends', () => {
    const file = path.join(stateDir, 'token');
    assert.equal(fs.readFileSync(file, 'utf8').trim(), token);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.match(token, /^[A-Za-z0-9_-]{43}$/, '256 random bits, base64url');
    assert.deepEqual(headers, { Authorization: `Bearer ${token}` });
  });

  test("the SDK's client lists the tools, starts a thread and gets its reply", async () => {
    assert.match(url.href, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await httpClient(headers);
    try {
      assert.deepEqual(
        (await client.listTools()).tools.map((tool) => tool.name),
        TOOL_NAMES,
      );
      const started = structured(
        await callTool(client, 'start_thread', { agent: GREETER, message: 'Hi!', wait: true }),
      );
      assert.equal(started.reply, GREETING);
      const thread = structured(await callTool(client, 'get_thread', { thread_id: started.threadId }));
      assert.equal(thread.turns, 1);
      assert.match(
        toolError(await callTool(client, 'get_thread', { thread_id: 'mcp-no-such-thread' })),
        /^thread 'mcp-no-such-thread' does not exist or has ended$/,
      );
    } finally {
      await client.close();
    }
  });

  test('without the token nothing is served: decide_approval decides nothing, and the SDK client cannot connect', async () => {
    const client = await httpClient(headers);
    try {
      const started = structured(await callTool(client, 'start_thread', { agent: SHIPPER, message: 'Ship billing.' }));
      const threadId = String(started.threadId);
      const pending = async () => (await call(client, 'list_approvals', { thread_id: threadId, all: true })).approvals;
      await waitFor('the approval', async () => ((await pending()) as unknown[]).length === 1, { timeoutMs: 60_000 });
      const deployedBefore = deployed.length;
      const decide = (decision: string) =>
        JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: {
            name: 'decide_approval',
            arguments: { thread_id: threadId, approval_id: 'a1', decision, by: 'erin' },
          },
        });
      for (const authorization of [undefined, `Bearer ${'x'.repeat(43)}`, `Basic ${token}`, token]) {
        const refused = await request({ authorization: authorization ?? null, body: decide('approve') });
        assert.equal(refused.status, 401, `${authorization ?? 'no header'}: ${refused.body}`);
        assert.match((JSON.parse(refused.body) as { error: { message: string } }).error.message, /needs its token/);
      }
      assert.deepEqual(
        ((await pending()) as Record<string, unknown>[]).map((a) => [a.approvalId, a.status, a.decidedBy]),
        [['a1', 'pending', null]],
        'the approval still waits',
      );
      assert.equal(deployed.length, deployedBefore, 'nothing ran');
      await assert.rejects(httpClient({}), (error: Error) => {
        assert.match(error.message, /this MCP server needs its token/);
        assert.equal((error as Error & { code?: number }).code, 401);
        return true;
      });
      await assert.rejects(httpClient({ Authorization: `Bearer ${'x'.repeat(43)}` }), /needs its token/);

      // With the token the same call decides it, recorded as the name given and that it came over MCP.
      const approved = await request({ body: decide('approve') });
      assert.equal(approved.status, 200, approved.body);
      await call(client, 'get_thread', { thread_id: threadId, message_id: started.messageId, wait_seconds: 30 });
      assert.deepEqual(
        ((await pending()) as Record<string, unknown>[]).map((a) => [a.approvalId, a.status, a.decidedBy]),
        [['a1', 'approved', 'erin (over MCP)']],
      );
      assert.equal(deployed.length, deployedBefore + 1);
    } finally {
      await client.close();
    }
  });

  /** Calls a tool over `client`; its structured result. */
  async function call(client: Client, name: string, args: Record<string, unknown>) {
    return structured(await callTool(client, name, args));
  }

  /**
   * One raw request to the server: its status and body. It carries the token unless `authorization` says otherwise
   * (`null`: no header).
   */
  function request(options: {
    method?: string;
    path?: string;
    headers?: http.OutgoingHttpHeaders;
    authorization?: string | null;
    body?: string;
  }): Promise<{ status: number; body: string }> {
    const authorization = options.authorization === undefined ? `Bearer ${token}` : options.authorization;
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: options.method ?? 'POST',
          path: options.path ?? url.pathname,
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(authorization === null ? {} : { authorization }),
            ...options.headers,
          },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end(options.body ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    });
  }

  test('a foreign Host (DNS rebinding) is a 421, another site a 403, a body over 1 MiB a 413', async () => {
    const plain = await request({});
    assert.equal(plain.status, 200, plain.body);
    assert.ok((JSON.parse(plain.body) as { result: { tools: unknown[] } }).result.tools.length === TOOL_NAMES.length);

    const refusals: [string, Promise<{ status: number; body: string }>, number, RegExp][] = [
      ['a foreign Host', request({ headers: { host: `evil.example:${url.port}` } }), 421, /answers to 127\.0\.0\.1:/],
      [
        'an Origin of another site',
        request({ headers: { origin: 'http://evil.example' } }),
        403,
        /a page from another site \(http:\/\/evil\.example\) cannot use this MCP server/,
      ],
      [
        'a cross-site fetch',
        request({ headers: { 'sec-fetch-site': 'cross-site' } }),
        403,
        /a cross-site request cannot use this MCP server/,
      ],
      ['a GET', request({ method: 'GET', body: '' }), 405, /GET is not served/],
      ['another path', request({ path: '/other' }), 404, /nothing at \/other: the MCP endpoint is \/mcp/],
      [
        'a body over 1 MiB',
        request({
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _: 'x'.repeat(1024 * 1024) } }),
        }),
        413,
        /too large|exceed/i,
      ],
    ];
    for (const [what, response, status, message] of refusals) {
      const { status: got, body } = await response;
      assert.equal(got, status, `${what}: ${body}`);
      assert.match((JSON.parse(body) as { error: { message: string } }).error.message, message, what);
    }
    // The same origin, as a page the server itself served would send it, is served.
    const sameOrigin = await request({ headers: { origin: `http://127.0.0.1:${url.port}` } });
    assert.equal(sameOrigin.status, 200, sameOrigin.body);
  });

  test('a configured token: BATON_MCP_TOKEN or --token-file, never printed in full; one that is too short stops it', async () => {
    const configured = `configured-${'k'.repeat(32)}`;
    const other = startBaton(
      ['--state-dir', freshDir('mcp-http-configured'), 'mcp', 'serve', '--http', '--port', '0'],
      stackEnv({ BATON_TASK_QUEUE: harness.taskQueue, BATON_MCP_TOKEN: configured }),
    );
    try {
      await waitFor('the MCP server to listen', () => other.output.stdout().includes('\n'), {
        timeoutMs: 60_000,
        child: other.child,
        describe: other.output.stderr,
      });
      const line = other.output.stdout();
      assert.match(
        line,
        /^Baton MCP server: http:\/\/127\.0\.0\.1:\d+\/mcp with the header 'Authorization: Bearer <the token of BATON_MCP_TOKEN>'/,
      );
      assert.ok(!line.includes(configured), 'the configured token is not printed');
      const otherUrl = new URL(/(http:\S+\/mcp)/.exec(line)?.[1] ?? '');
      const client = mcpClient();
      await client.connect(
        new StreamableHTTPClientTransport(otherUrl, {
          requestInit: { headers: { Authorization: `Bearer ${configured}` } },
        }),
      );
      assert.equal((await client.listTools()).tools.length, TOOL_NAMES.length);
      await client.close();
    } finally {
      other.child.kill('SIGINT');
      await other.finished(30_000);
    }

    const short = path.join(freshDir('mcp-short-token'), 'token');
    fs.writeFileSync(short, 'too-short\n');
    for (const [args, message] of [
      [['--http', '--token-file', short], `the token in ${short} is 9 characters long; a token needs at least 32`],
      [['--token-file', short], '--token-file goes with --http'],
    ] as const) {
      const refused = await baton(['mcp', 'serve', ...args], stackEnv());
      assert.equal(refused.code, 1, describeRun(refused));
      assert.ok(refused.stderr.includes(message), describeRun(refused));
    }
  });

  test('SIGINT stops it cleanly', async () => {
    server.child.kill('SIGINT');
    const result = await server.finished(30_000);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /^baton mcp: Baton at \S+:\d+, task queue 'test-mcp-server-/);
  });
});
