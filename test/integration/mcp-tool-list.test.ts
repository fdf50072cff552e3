/**
 * A turn keeps the MCP tools it started with: a server that adds a tool mid-turn (and says so with
 * `notifications/tools/list_changed`) changes what the worker lists at once, but only the next turn is offered it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { McpServers } from '../../activities/tools/mcp-servers';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { writeMcpConfig } from '../../testing/mcp-reference-servers';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { startMcpServers } from '../../worker/mcp';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'mcp-tool-list-'));
const modelLog = path.join(workDir, 'model.jsonl');
const config = writeMcpConfig(path.join(workDir, 'mcp.json'), {
  growing: { command: process.execPath, args: [path.join(__dirname, '..', 'fixtures', 'mcp-growing-server.mjs')] },
});

const agents: AgentRegistry = new Map([
  [
    'builder',
    parseAgentFile(
      '---\nname: builder\ndescription: Grows a server.\ncapabilities: [mcp:growing]\n---\nGrow it.\n',
      'builder.md',
    ),
  ],
]);
const script = parseScript(
  `
agents:
  builder:
    - call: growing__grow
    - call: wait
      args: { seconds: 2, reason: 'let the worker list the new tool' }
    - say: 'Grown.'
    - call: growing__added
    - say: 'Used the new tool.'
`,
  'mcp-tool-list.yaml',
);

let mcp: McpServers;
let harness: AgentHarness;
/** When the worker's connection listed the server's tools again after it said they changed. */
let relistedAt: number | undefined;

before(async () => {
  mcp = await startMcpServers(
    config,
    {},
    {
      log: (line) => {
        if (line.includes("MCP server 'growing' changed its tools")) relistedAt ??= Date.now();
      },
    },
  );
  harness = await startTestHarness('mcp-tool-list', { agents, script, modelLogFile: modelLog, mcp });
});

after(async () => {
  await harness?.close();
  await mcp?.close();
});

/** When each request of a thread reached the model, and the MCP tools it offered, in order. */
function requests(threadId: string): { at: number; tools: string[] }[] {
  return fs
    .readFileSync(modelLog, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { time: string; thread: string; tools?: { function: { name: string } }[] })
    .filter((entry) => entry.thread === threadId)
    .map((entry) => ({
      at: Date.parse(entry.time),
      tools: (entry.tools ?? []).map((tool) => tool.function.name).filter((name) => name.startsWith('growing__')),
    }));
}

test('a tool a server adds mid-turn is listed by the worker at once and offered from the next turn on', async () => {
  const threadId = uniqueThreadId('grow');
  const thread = await harness.client.startThread({ agent: 'builder', threadId, world: 'default' });
  const first = await thread.send('Grow the server.');
  assert.equal(first.reply, 'Grown.');
  assert.ok(mcp.tools().has('growing__added'), 'the worker listed the added tool');

  const second = await thread.send('Use what is new.');
  assert.equal(second.reply, 'Used the new tool.');
  const made = requests(threadId);
  assert.deepEqual(
    made.map((request) => request.tools),
    [
      ['growing__grow'],
      ['growing__grow'],
      // The last model call of the first turn came after the worker listed the new tool: the turn kept its own list.
      ['growing__grow'],
      ['growing__grow', 'growing__added'],
      ['growing__grow', 'growing__added'],
    ],
  );
  assert.ok(relistedAt !== undefined && relistedAt < (made[2]?.at ?? 0), 'the list changed before that call');
  const transcript = await harness.client.thread(threadId).transcript();
  assert.ok(
    transcript.some((message) => message.role === 'tool' && message.content === 'added ran'),
    'the added tool ran in the next turn',
  );
});
