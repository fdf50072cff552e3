/**
 * `baton mcp serve` driven by the MCP Inspector's command-line mode (`mcp-inspector --cli`), a client no one here
 * wrote: each call is one inspector process that spawns `node bin/baton.js mcp serve`, makes its one request and
 * prints the result as JSON. List the tools, start a thread and wait for its reply, answer a question.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AgentHarness } from '../../testing/harness';
import { collect, COMMAND_TIMEOUT_MS, exited, ROOT, stackEnv, waitFor, workDir } from './cli-process';
import {
  ASKER,
  ASKER_REPLY,
  BATON,
  GREETER,
  GREETING,
  QUESTION,
  startMcpHarness,
  structured,
  TOOL_NAMES,
} from './mcp-fixtures';

const INSPECTOR = path.join(ROOT, 'node_modules', '.bin', 'mcp-inspector');

let harness: AgentHarness;

before(async () => {
  harness = await startMcpHarness('mcp-inspector');
});
after(async () => {
  await harness?.close();
});

/**
 * `mcp-inspector --cli node bin/baton.js mcp serve <options>` with the test stack in its environment, which the
 * inspector hands to the server it spawns; what it printed, parsed.
 */
async function inspect(...options: string[]): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, [INSPECTOR, '--cli', process.execPath, BATON, 'mcp', 'serve', ...options], {
    cwd: workDir,
    env: stackEnv({ BATON_TASK_QUEUE: harness.taskQueue }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collect(child);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exit = await exited(child, COMMAND_TIMEOUT_MS);
  if (!exit) child.kill('SIGKILL');
  await closed;
  const run = `mcp-inspector ${options.join(' ')}: exit ${exit?.code ?? 'none'}\n${output.stdout()}\n${output.stderr()}`;
  assert.equal(exit?.code, 0, run);
  try {
    return JSON.parse(output.stdout()) as Record<string, unknown>;
  } catch {
    assert.fail(`not one JSON document: ${run}`);
  }
}

/** `--method tools/call --tool-name <tool> --tool-arg key=value …`: the tool's structured result. */
async function callTool(tool: string, args: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const pairs = Object.entries(args).flatMap(([key, value]) => ['--tool-arg', `${key}=${value}`]);
  return structured((await inspect('--method', 'tools/call', '--tool-name', tool, ...pairs)) as CallToolResult);
}

test('the inspector lists the tools', async () => {
  const { tools } = (await inspect('--method', 'tools/list')) as { tools: { name: string }[] };
  assert.deepEqual(
    tools.map((tool) => tool.name),
    TOOL_NAMES,
  );
  const { resources } = (await inspect('--method', 'resources/list')) as { resources: { uri: string }[] };
  assert.ok(resources.some((resource) => resource.uri === `baton://agents/${GREETER}`));
});

test('the inspector starts a thread and waits for its reply (wait=true arrives as a boolean)', async () => {
  const started = await callTool('start_thread', { agent: GREETER, message: 'Hello there', wait: 'true' });
  assert.equal(started.status, 'completed');
  assert.equal(started.reply, GREETING);
  const thread = await callTool('get_thread', { thread_id: String(started.threadId) });
  assert.equal(thread.turns, 1);
  assert.equal((thread.lastReply as { content: string }).content, GREETING);
});

test('the inspector answers a question, and the turn that asked it replies', async () => {
  const started = await callTool('start_thread', { agent: ASKER, message: 'Paint the door.' });
  assert.equal(started.status, 'running');
  const threadId = String(started.threadId);
  let questions: Record<string, unknown>[] = [];
  await waitFor(
    'the question',
    async () => {
      questions = (await callTool('list_questions', { thread_id: threadId })).questions as Record<string, unknown>[];
      return questions.length === 1;
    },
    { timeoutMs: 60_000 },
  );
  assert.deepEqual(
    questions.map((q) => [q.questionId, q.question]),
    [['q1', QUESTION]],
  );
  assert.deepEqual(await callTool('answer_question', { thread_id: threadId, question_id: 'q1', answer: 'green' }), {
    questionId: 'q1',
    status: 'answered',
  });
  const done = await callTool('get_thread', {
    thread_id: threadId,
    message_id: String(started.messageId),
    wait_seconds: '30',
  });
  assert.deepEqual(
    [(done.message as Record<string, unknown>).status, (done.message as Record<string, unknown>).reply],
    ['completed', ASKER_REPLY],
  );
  const transcript = await callTool('get_transcript', { thread_id: threadId });
  assert.ok(
    (transcript.messages as { role: string; content: string }[]).some(
      (m) => m.role === 'tool' && m.content === 'The human answered: green',
    ),
  );
});
