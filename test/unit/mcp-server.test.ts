import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { BatonClientError, type BatonClient, type ThreadHandle } from '../../client';
import { createBatonMcpServer } from '../../mcp-server';
import { agentMarkdown, agentNameOfUri, agentResourceUri } from '../../mcp-server/resources';
import { parseAgentFile } from '../../worker/agents';

test('mcp resources: an agent URI names one agent, nothing else', () => {
  assert.equal(agentResourceUri('solver'), 'baton://agents/solver');
  assert.equal(agentNameOfUri('baton://agents/solver'), 'solver');
  assert.equal(agentNameOfUri('baton://agents/my%5Fagent'), 'my_agent');
  for (const uri of [
    'baton://agents/',
    'baton://agents/a/b',
    'baton://agents/%zz',
    'file:///agents/solver',
    'solver',
  ]) {
    assert.equal(agentNameOfUri(uri), undefined, uri);
  }
});

test('mcp resources: an agent served as markdown parses back into the same definition', () => {
  const file = [
    '---',
    'name: operator',
    'description: "Runs: maintenance commands."',
    'capabilities: [shell, observer]',
    'approval: [{ tool: shell, timeout_s: 3600 }, read_file]',
    'temperature: 0.2',
    'max_steps: 7',
    'delegation_context: false',
    'context: { max_messages: 40 }',
    '---',
    '',
    'You run maintenance.',
    '',
    '---',
    'A rule below a line, {{ working_directory }} kept as written.',
    '',
  ].join('\n');
  const parsed = parseAgentFile(file, '/somewhere/operator.md');
  // Postgres hands a stored definition back with its keys in an order of its own (jsonb): shortest first.
  const definition = Object.fromEntries(
    Object.entries(parsed).sort(([a], [b]) => a.length - b.length || a.localeCompare(b)),
  ) as typeof parsed;
  const markdown = agentMarkdown({ version: 'v1', definition, storedAt: new Date() });
  assert.match(markdown, /^---\nname: operator\ndescription: "Runs: maintenance commands."\ncapabilities:/);
  assert.doesNotMatch(markdown, /somewhere/, 'the worker’s path stays out');
  const { source: _source, ...expected } = definition;
  const { source: _again, ...served } = parseAgentFile(markdown, 'served.md');
  assert.deepEqual(served, expected);
});

/** A server whose Baton client must never be asked for: what these calls check needs none. */
async function connectedWithoutBaton(): Promise<{ client: Client; asked: () => number }> {
  let asked = 0;
  const server = createBatonMcpServer({
    client: () => {
      asked += 1;
      return Promise.reject(new Error('Baton is not reachable in this test'));
    },
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return { client, asked: () => asked };
}

test('mcp tools: plain JSON types for every argument; bad arguments refused in one line before anything reaches Baton', async () => {
  const { client, asked } = await connectedWithoutBaton();
  const { tools } = await client.listTools();
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    assert.equal(tool.inputSchema.additionalProperties, false, tool.name);
    for (const [name, schema] of Object.entries(tool.inputSchema.properties ?? {})) {
      assert.ok(
        ['string', 'boolean', 'integer'].includes(String((schema as { type?: unknown }).type)),
        `${tool.name}.${name}`,
      );
    }
  }
  const refusal = async (name: string, args: Record<string, unknown>) => {
    const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
    assert.equal(result.isError, true);
    return result.content.map((item) => (item.type === 'text' ? item.text : '')).join('');
  };
  assert.equal(
    await refusal('get_transcript', { thread_id: 't', limit: 0 }),
    "invalid arguments for 'get_transcript': 'limit' Too small: expected number to be >=1",
  );
  assert.equal(
    await refusal('decide_approval', { thread_id: 't', approval_id: 'a1', decision: 'maybe' }),
    `invalid arguments for 'decide_approval': 'decision' Invalid option: expected one of "approve"|"reject"`,
  );
  assert.equal(
    await refusal('answer_question', { thread_id: 't', question_id: 'q1', answer: '  ' }),
    "invalid arguments for 'answer_question': 'answer' must not be empty",
  );
  assert.equal(asked(), 0, 'no call reached for Baton');
  // A call that gets past its arguments says why Baton cannot be reached, as a tool error too.
  assert.equal(await refusal('list_agents', {}), 'Baton is not reachable in this test');
  assert.equal(asked(), 1);
  await client.close();
});

test('mcp server: a message waits 20 s for a worker to accept it and get_thread 10 s for its answer, unless told otherwise', async () => {
  const cases = [
    { options: {}, acceptWaitMs: 20_000, timeoutMs: 10_000 },
    { options: { acceptWaitSeconds: 3, statusWaitSeconds: 2 }, acceptWaitMs: 3_000, timeoutMs: 2_000 },
  ];
  for (const { options, acceptWaitMs, timeoutMs } of cases) {
    const asked: { post: unknown[]; status: unknown[] } = { post: [], status: [] };
    const noWorker = () => Promise.reject(new BatonClientError('no worker in this test'));
    const thread: Pick<ThreadHandle, 'threadId' | 'post' | 'status'> = {
      threadId: 't',
      post: (_message, given) => {
        asked.post.push(given);
        return noWorker();
      },
      status: (given) => {
        asked.status.push(given);
        return noWorker();
      },
    };
    // Only what these three calls reach before the worker would answer.
    const baton = {
      temporal: { connection: { withDeadline: <T>(_deadline: number, call: () => Promise<T>) => call() } },
      agent: () => Promise.resolve(undefined),
      startThread: () => Promise.resolve(thread),
      thread: () => thread,
    } as unknown as BatonClient;
    const server = createBatonMcpServer({ client: () => Promise.resolve(baton), ...options });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const client = new Client({ name: 'unit', version: '1' });
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    for (const [name, args] of [
      ['start_thread', { agent: 'a', message: 'Hi' }],
      ['send_message', { thread_id: 't', message: 'Hi', message_id: 'm1' }],
      ['get_thread', { thread_id: 't' }],
    ] as const) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      assert.deepEqual(result.content, [{ type: 'text', text: 'no worker in this test' }], name);
    }
    assert.deepEqual(asked.post, [{ acceptWaitMs }, { acceptWaitMs, messageId: 'm1' }]);
    assert.deepEqual(asked.status, [{ timeoutMs }]);
    await client.close();
  }
  for (const wait of [0, 0.5, 51]) {
    assert.throws(
      () => createBatonMcpServer({ client: () => Promise.reject(new Error('unused')), statusWaitSeconds: wait }),
      new RegExp(`^RangeError: statusWaitSeconds must be a whole number of seconds from 1 to 50, not ${wait}$`),
    );
  }
});
