/**
 * Agents calling MCP servers' tools on a real worker, against the published reference servers: server-everything
 * over stdio and over Streamable HTTP, server-filesystem and server-memory over stdio. What the model is offered
 * (`<server>__<tool>` with the server's input schema), what the transcript stores (text, structured content, image
 * placeholders, never base64), side effects run once, state kept by a server across agents, servers that die or are
 * down, a server with a schema no validator takes, worlds narrowing servers, capabilities, and approvals.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import net from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { MCP_INHERITED_VARIABLES, McpConfigError } from '../../activities/tools/mcp-config';
import type { McpServers } from '../../activities/tools/mcp-servers';
import { probeShellSandbox } from '../../activities/tools/shell-sandbox';
import { claimToolRun } from '../../db/tool-runs';
import { appendMessage, listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import {
  referenceServerScript,
  startEverythingOverHttp,
  stdioServerEntry,
  writeMcpConfig,
} from '../../testing/mcp-reference-servers';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { startMcpServers } from '../../worker/mcp';
import { createModelClient } from '../../worker/model-client';
import { settle, waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.realpathSync(fs.mkdtempSync(path.join(env.stateDir, 'mcp-tools-')));
const ROOT = path.resolve(__dirname, '..', '..');

/** The base64 of server-everything's tiny image, read from the published package. */
const TINY_IMAGE = /MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"/.exec(
  fs.readFileSync(path.join(path.dirname(referenceServerScript('everything')), 'tools', 'get-tiny-image.js'), 'utf8'),
)?.[1];

/** A fresh directory of this file's work dir. */
function freshDir(name: string): string {
  return fs.mkdtempSync(path.join(workDir, `${name}-`));
}

/** An MCP configuration file of this test's own, started as a worker starts it (with `env` as its environment). */
function startServers(
  name: string,
  servers: Record<string, Record<string, unknown>>,
  options: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<McpServers> {
  return startMcpServers(writeMcpConfig(path.join(freshDir(name), 'mcp.json'), servers), options.env ?? process.env, {
    log: options.log ?? (() => undefined),
  });
}

function agents(definitions: Record<string, string[]>): AgentRegistry {
  return new Map(
    Object.entries(definitions).map(([name, capabilities]) => [
      name,
      parseAgentFile(
        `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n---\nYou act.\n`,
        `${name}.md`,
      ),
    ]),
  );
}

interface Run {
  harness: AgentHarness;
  /** The requests the scripted model received for a thread. */
  requests(threadId: string): ModelLogEntry[];
}

/** A harness on its own task queue with these MCP servers, agents and script, closed after `body`. */
async function withHarness(
  name: string,
  mcp: McpServers,
  definitions: Record<string, string[]>,
  script: string,
  body: (run: Run) => Promise<void>,
): Promise<void> {
  const modelLogFile = path.join(freshDir(name), 'model.jsonl');
  const harness = await startTestHarness(`mcp-${name}`, {
    agents: agents(definitions),
    script: parseScript(script, name),
    modelLogFile,
    mcp,
  });
  try {
    await body({
      harness,
      requests: (threadId) => harness.modelRequests().filter((request) => request.thread === threadId),
    });
  } finally {
    await harness.close();
  }
}

/** Each call of a thread with its stored result, in the order of the calls. */
async function callResults(run: Run, threadId: string): Promise<{ name: string; result: string }[]> {
  const transcript = await listMessages(run.harness.pool, threadId);
  const resultOf = new Map(transcript.map((message) => [message.toolCallId, message.content ?? '']));
  return transcript.flatMap((message) =>
    (message.toolCalls ?? []).map((call) => ({ name: call.name, result: resultOf.get(call.id) ?? '(no result)' })),
  );
}

/** The functions offered to the model in a request, by name. */
function offered(request: ModelLogEntry | undefined): Map<string, Record<string, unknown>> {
  const tools = (request?.tools ?? []) as { function: { name: string; parameters: Record<string, unknown> } }[];
  return new Map(tools.map((tool) => [tool.function.name, tool.function.parameters]));
}

/** Pids of processes whose command line holds `marker`. */
function pidsWith(marker: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('mcp tools over stdio, one set of servers', () => {
  const worldDir = freshDir('world');
  const gatedDir = freshDir('gated');
  let mcp: McpServers;

  before(async () => {
    mcp = await startServers('shared', {
      everything: stdioServerEntry('everything'),
      filesystem: stdioServerEntry('filesystem', [worldDir]),
      memory: stdioServerEntry('memory', [], { env: { MEMORY_FILE_PATH: path.join(workDir, 'memory.jsonl') } }),
      gated: stdioServerEntry('filesystem', [gatedDir], { approval: 'writes' }),
    });
  });

  after(async () => {
    await mcp?.close();
  });

  test("mcp tools: server-everything's tools in one turn: text, a sum, structured content, an image, progress", async () => {
    const script = `
agents:
  explorer:
    - calls:
        - { call: everything__echo, args: { message: "hello mcp" } }
        - { call: everything__get-sum, args: { a: 2, b: 40 } }
        - { call: everything__get-structured-content, args: { location: "New York" } }
        - { call: everything__get-tiny-image, args: {} }
        - { call: everything__trigger-long-running-operation, args: { duration: 2, steps: 4 } }
    - say: "All five done."
`;
    await withHarness('everything', mcp, { explorer: ['mcp:everything'] }, script, async (run) => {
      const threadId = uniqueThreadId('everything');
      const thread = await run.harness.client.startThread({ agent: 'explorer', threadId });
      const result = await thread.send('Try the tools.');
      assert.equal(result.reply, 'All five done.');

      assert.ok(TINY_IMAGE !== undefined && TINY_IMAGE.length > 100, 'the published image was found');
      const imageBytes = Buffer.from(TINY_IMAGE, 'base64').length;
      assert.deepEqual(await callResults(run, threadId), [
        { name: 'everything__echo', result: 'Echo: hello mcp' },
        { name: 'everything__get-sum', result: 'The sum of 2 and 40 is 42.' },
        {
          name: 'everything__get-structured-content',
          result: '{"temperature":33,"conditions":"Cloudy","humidity":82}',
        },
        {
          name: 'everything__get-tiny-image',
          result:
            `Here's the image you requested:\n[image: image/png, ${imageBytes} bytes, not shown]\n` +
            'The image above is the MCP logo.',
        },
        {
          name: 'everything__trigger-long-running-operation',
          result: 'Long running operation completed. Duration: 2 seconds, Steps: 4.',
        },
      ]);
      // No base64 anywhere in the transcript, nor in what the model was sent.
      const stored = JSON.stringify(await listMessages(run.harness.pool, threadId));
      const sent = JSON.stringify(run.requests(threadId));
      assert.ok(!stored.includes(TINY_IMAGE.slice(0, 40)), 'the transcript holds no image data');
      assert.ok(!sent.includes(TINY_IMAGE.slice(0, 40)), 'the model was sent no image data');

      // The model was offered the server's tools under Baton names, with the schemas the server gave.
      const tools = offered(run.requests(threadId)[0]);
      for (const name of [
        'echo',
        'get-sum',
        'get-structured-content',
        'get-tiny-image',
        'trigger-long-running-operation',
      ]) {
        assert.ok(tools.has(`everything__${name}`), `everything__${name} is offered`);
      }
      assert.ok(![...tools.keys()].some((name) => name.startsWith('memory__')), 'only the granted server');
      const echo = tools.get('everything__echo') as { properties: { message: { type: string } }; required: string[] };
      assert.equal(echo.properties.message.type, 'string');
      assert.deepEqual(echo.required, ['message']);
      assert.deepEqual(
        tools.get('everything__get-structured-content'),
        mcp.tools().get('everything__get-structured-content')?.inputSchema,
      );
      const sum = tools.get('everything__get-sum') as { properties: Record<string, { type: string }> };
      assert.deepEqual([sum.properties.a?.type, sum.properties.b?.type], ['number', 'number']);
    });
  });

  test('mcp tools: server-filesystem reads a file of its directory and writes one once, claimed as a side effect', async () => {
    const threadId = uniqueThreadId('files');
    fs.writeFileSync(path.join(worldDir, 'notes.txt'), 'the notes of the world\n');
    const target = path.join(worldDir, `${threadId}.txt`);
    const script = `
agents:
  archivist:
    - { call: filesystem__read_text_file, args: { path: ${JSON.stringify(path.join(worldDir, 'notes.txt'))} } }
    - { call: filesystem__write_file, args: { path: ${JSON.stringify(target)}, content: "written once" } }
    - say: "Filed."
`;
    await withHarness('filesystem', mcp, { archivist: ['mcp:filesystem'] }, script, async (run) => {
      const thread = await run.harness.client.startThread({ agent: 'archivist', threadId });
      assert.equal((await thread.send('Read, then write.')).reply, 'Filed.');
      const [read, write] = await callResults(run, threadId);
      // server-filesystem answers with structured content, which the transcript keeps as JSON.
      assert.equal(read?.result, JSON.stringify({ content: 'the notes of the world\n' }));
      assert.equal(write?.result, JSON.stringify({ content: `Successfully wrote to ${target}` }));
      assert.equal(fs.readFileSync(target, 'utf8'), 'written once');

      // The write (not read-only) was claimed before it ran and its outcome recorded; the read was not.
      const { rows } = await run.harness.pool.query<{ tool: string; status: string; ok: boolean }>(
        'SELECT tool, status, ok FROM tool_runs WHERE root_thread_id = $1',
        [threadId],
      );
      assert.deepEqual(rows, [{ tool: 'filesystem__write_file', status: 'done', ok: true }]);
      assert.equal(mcp.tools().get('filesystem__write_file')?.tool.sideEffects, true);
      assert.equal(mcp.tools().get('filesystem__read_text_file')?.tool.sideEffects, false);

      // A retried activity whose earlier attempt started the write (and whose worker died) does not write again.
      const catalog = createAgentCatalog({
        agents: agents({ archivist: ['mcp:filesystem'] }),
        filesRoot: workDir,
        arcDataDir: workDir,
        mcp,
      });
      const activities = createActivities({
        pool: run.harness.pool,
        openai: createModelClient({ baseURL: run.harness.model.baseURL, apiKey: 'scripted' }),
        model: 'baton-scripted',
        agents: () => catalog.agents(),
        tools: catalog.tools,
      });
      const activity = <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> =>
        new MockActivityEnvironment().run(fn, ...args);
      const retried = uniqueThreadId('retried');
      const { epoch } = await activity(activities.ensureThread, {
        threadId: retried,
        rootThreadId: retried,
        agent: 'archivist',
      });
      const { version } = await activity(activities.resolveAgent, { name: 'archivist' });
      const scope = { rootThreadId: retried, threadId: retried, agent: 'archivist', epoch };
      const again = path.join(worldDir, `${retried}.txt`);
      const {
        message: { seq },
      } = await appendMessage(run.harness.pool, scope, `${retried}:reply`, {
        role: 'assistant',
        content: null,
        toolCalls: [
          { id: 'call-1', name: 'filesystem__write_file', arguments: JSON.stringify({ path: again, content: 'x' }) },
        ],
        usage: null,
      });
      const operationId = `${retried}:tool:0:0`;
      await claimToolRun(run.harness.pool, scope, operationId, 'filesystem__write_file');
      await activity(activities.executeToolCall, {
        scope,
        world: 'default',
        agentVersion: version,
        operationId,
        messageSeq: seq,
        toolCallId: 'call-1',
      });
      const [outcome] = (await listMessages(run.harness.pool, retried)).filter((m) => m.role === 'tool');
      assert.match(outcome?.content ?? '', /^Error: an earlier attempt of this 'filesystem__write_file' call started/);
      assert.equal(fs.existsSync(again), false, 'the write did not run again');
    });
  });

  test("mcp tools: server-memory keeps what one agent stored for another agent's thread", async () => {
    const entity = uniqueThreadId('entity');
    const script = `
agents:
  recorder:
    - call: memory__create_entities
      args: { entities: [ { name: "${entity}", entityType: "person", observations: ["drinks green tea"] } ] }
    - say: "Recorded."
  recaller:
    - { call: memory__open_nodes, args: { names: ["${entity}"] } }
    - say: "Recalled."
`;
    const definitions = { recorder: ['mcp:memory'], recaller: ['mcp:memory'] };
    await withHarness('memory', mcp, definitions, script, async (run) => {
      const first = uniqueThreadId('recorder');
      const second = uniqueThreadId('recaller');
      await (await run.harness.client.startThread({ agent: 'recorder', threadId: first })).send('Remember.');
      const [created] = await callResults(run, first);
      assert.match(created?.result ?? '', new RegExp(entity));
      const reply = await (
        await run.harness.client.startThread({ agent: 'recaller', threadId: second })
      ).send('Recall.');
      assert.equal(reply.reply, 'Recalled.');
      const [opened] = await callResults(run, second);
      assert.ok(!opened?.result.startsWith('Error:'), opened?.result);
      const graph = JSON.parse(opened?.result ?? '{}') as {
        entities: { name: string; observations: string[] }[];
      };
      assert.deepEqual(
        graph.entities.map((e) => [e.name, e.observations]),
        [[entity, ['drinks green tea']]],
      );
    });
  });

  test('mcp tools: a world narrowing servers refuses and hides the others; an undeclared server is refused', async () => {
    const script = `
agents:
  narrowed:
    - calls:
        - { call: list_capabilities, args: {} }
        - { call: everything__echo, args: { message: "through the wall" } }
    - say: "Refused by the world."
  plain:
    - { call: everything__echo, args: { message: "not mine" } }
    - say: "Refused by my capabilities."
`;
    const definitions = { narrowed: ['mcp:everything', 'mcp:memory'], plain: ['mcp:memory'] };
    await withHarness('worlds', mcp, definitions, script, async (run) => {
      const world = `mcp-${uniqueThreadId('w').split('-')[1] ?? 'w'}`;
      await run.harness.client.world(world).set({ BATON_MCP_SERVERS: 'memory' });
      const narrowed = uniqueThreadId('narrowed');
      const thread = await run.harness.client.startThread({ agent: 'narrowed', threadId: narrowed, world });
      assert.equal((await thread.send('Echo.')).reply, 'Refused by the world.');
      const [listing, refusal] = await callResults(run, narrowed);
      // What the agent is told it can call, in list_capabilities and in its system prompt: the world's servers only.
      assert.match(listing?.result ?? '', /^- memory__read_graph: Read the entire knowledge graph$/m);
      assert.ok(!(listing?.result ?? '').includes('everything__'), listing?.result);
      const prompt = String(run.requests(narrowed)[0]?.messages[0]?.content ?? '');
      assert.match(prompt, /Declared capabilities: .*memory__read_graph/);
      assert.ok(!prompt.includes('everything__') && !prompt.includes('mcp:'), prompt);
      assert.equal(
        refusal?.result,
        "Error: 'everything__echo' is a tool of the MCP server 'everything', which this world does not offer " +
          '(its BATON_MCP_SERVERS: memory).',
      );
      const tools = offered(run.requests(narrowed)[0]);
      assert.ok(tools.has('memory__read_graph'), 'the world leaves memory in');
      assert.ok(![...tools.keys()].some((name) => name.startsWith('everything__')), 'no everything tool offered');

      const plain = uniqueThreadId('plain');
      const other = await run.harness.client.startThread({ agent: 'plain', threadId: plain });
      assert.equal((await other.send('Echo.')).reply, 'Refused by my capabilities.');
      const [undeclared] = await callResults(run, plain);
      assert.match(undeclared?.result ?? '', /^Error: 'everything__echo' is not one of your capabilities\./);
    });
  });

  test("mcp tools: a server's approval: writes makes a write wait for a person, and it runs once approved", async () => {
    const threadId = uniqueThreadId('gated');
    const target = path.join(gatedDir, `${threadId}.txt`);
    const script = `
agents:
  clerk:
    - { call: gated__write_file, args: { path: ${JSON.stringify(target)}, content: "approved text" } }
    - say: "Written after approval."
`;
    await withHarness('approvals', mcp, { clerk: ['mcp:gated'] }, script, async (run) => {
      assert.equal(mcp.tools().get('gated__read_text_file')?.tool.needsApproval, false, 'reads do not wait');
      const thread = await run.harness.client.startThread({ agent: 'clerk', threadId });
      const sending = settle(thread.send('Write it.'));
      const [pending] = await waitFor('a pending approval', 60_000, async () => {
        const rows = await thread.approvals();
        return rows.length > 0 ? rows : undefined;
      });
      assert.equal(pending?.tool, 'gated__write_file');
      assert.equal(pending?.status, 'pending');
      assert.equal(fs.existsSync(target), false, 'nothing was written while it waits');
      await thread.approve(pending?.approvalId ?? '', { by: 'alice' });
      const outcome = await sending;
      if (!outcome.ok) throw outcome.error;
      assert.equal(outcome.value.reply, 'Written after approval.');
      assert.equal(fs.readFileSync(target, 'utf8'), 'approved text');
      const [written] = await callResults(run, threadId);
      assert.equal(written?.result, JSON.stringify({ content: `Successfully wrote to ${target}` }));
    });
  });
});

test('mcp tools: server-everything over Streamable HTTP', async () => {
  const server = await startEverythingOverHttp();
  const mcp = await startServers('http', { remote: { url: server.url } }).catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  try {
    const script = `
agents:
  caller:
    - calls:
        - { call: remote__echo, args: { message: "over http" } }
        - { call: remote__get-sum, args: { a: 19, b: 23 } }
    - say: "Done over HTTP."
`;
    await withHarness('http', mcp, { caller: ['mcp:remote'] }, script, async (run) => {
      const threadId = uniqueThreadId('http');
      const thread = await run.harness.client.startThread({ agent: 'caller', threadId });
      assert.equal((await thread.send('Call over HTTP.')).reply, 'Done over HTTP.');
      assert.deepEqual(await callResults(run, threadId), [
        { name: 'remote__echo', result: 'Echo: over http' },
        { name: 'remote__get-sum', result: 'The sum of 19 and 23 is 42.' },
      ]);
    });
  } finally {
    await mcp.close();
    await server.stop();
  }
});

test('mcp tools: a stdio server killed between two calls is started again for the next turn', async () => {
  const marker = `--baton-test=${uniqueThreadId('killed')}`;
  const mcp = await startServers('killed', { everything: stdioServerEntry('everything', ['stdio', marker]) });
  try {
    const script = `
agents:
  survivor:
    - { call: everything__echo, args: { message: "before" } }
    - say: "First."
    - { call: everything__echo, args: { message: "after" } }
    - say: "Second."
`;
    await withHarness('killed', mcp, { survivor: ['mcp:everything'] }, script, async (run) => {
      const threadId = uniqueThreadId('survivor');
      const thread = await run.harness.client.startThread({ agent: 'survivor', threadId });
      assert.equal((await thread.send('Once.')).reply, 'First.');
      const [first] = pidsWith(marker);
      assert.ok(first !== undefined, 'the server process was found');
      process.kill(first, 'SIGKILL');
      await waitFor('the worker to see the server gone', 30_000, () =>
        mcp.status()[0]?.state === 'disconnected' ? true : undefined,
      );
      assert.equal((await thread.send('Twice.')).reply, 'Second.');
      assert.deepEqual(
        (await callResults(run, threadId)).map((call) => call.result),
        ['Echo: before', 'Echo: after'],
      );
      const [second] = pidsWith(marker);
      assert.ok(second !== undefined && second !== first, 'a new server process answered');
    });
  } finally {
    await mcp.close();
  }
});

test('mcp tools: an HTTP server down at call time gives an Error: result naming it, and the turn goes on', async () => {
  const server = await startEverythingOverHttp();
  const mcp = await startServers('down', { down: { url: server.url } }).catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  try {
    await server.stop();
    const script = `
agents:
  hopeful:
    - { call: down__echo, args: { message: "anyone there?" } }
    - say: "The server is down."
`;
    await withHarness('down', mcp, { hopeful: ['mcp:down'] }, script, async (run) => {
      const threadId = uniqueThreadId('down');
      const thread = await run.harness.client.startThread({ agent: 'hopeful', threadId });
      assert.equal((await thread.send('Echo.')).reply, 'The server is down.');
      const [failed] = await callResults(run, threadId);
      // A read-only tool: three attempts, then the model reads why.
      assert.match(
        failed?.result ?? '',
        /^Error: tool 'down__echo' failed \(after 3 attempts\): .*MCP server 'down' \(/,
      );
      assert.ok(failed?.result.includes(server.url), failed?.result);
    });
  } finally {
    await mcp.close();
  }
});

test('mcp tools: an HTTP server restarted between turns (its session gone) is connected again', async () => {
  let server = await startEverythingOverHttp();
  const port = Number(new URL(server.url).port);
  const mcp = await startServers('restarted', { restarted: { url: server.url } }).catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  try {
    const script = `
agents:
  patient:
    - { call: restarted__echo, args: { message: "first" } }
    - say: "One."
    - { call: restarted__echo, args: { message: "second" } }
    - say: "Two."
`;
    await withHarness('restarted', mcp, { patient: ['mcp:restarted'] }, script, async (run) => {
      const threadId = uniqueThreadId('restarted');
      const thread = await run.harness.client.startThread({ agent: 'patient', threadId });
      assert.equal((await thread.send('Once.')).reply, 'One.');
      await server.stop();
      server = await startEverythingOverHttp(port);
      assert.equal((await thread.send('Again.')).reply, 'Two.');
      assert.deepEqual(
        (await callResults(run, threadId)).map((call) => call.result),
        ['Echo: first', 'Echo: second'],
      );
    });
  } finally {
    await mcp.close();
    await server.stop();
  }
});

test('mcp tools: a server listing a tool whose input schema cannot compile is refused at start, naming it', async () => {
  const fixture = path.join(ROOT, 'test', 'fixtures', 'mcp-bad-schema-server.ts');
  await assert.rejects(
    startServers('bad-schema', {
      odd: { command: process.execPath, args: ['--import', 'tsx', fixture], cwd: ROOT },
    }),
    (error: unknown) => {
      assert.ok(error instanceof McpConfigError, String(error));
      assert.match(
        error.message,
        /MCP server 'odd': tool 'oddity' has an input schema that cannot be used: .*nonsense/,
      );
      return true;
    },
  );
});

test("mcp tools: progress keeps a call past the server's timeout_s alive, shows in the activity's heartbeat, and silence ends a call", async () => {
  // timeout_s is the time a call may go without its answer or progress: 2 s, against calls of 6 and 4 seconds.
  const mcp = await startServers('progress', {
    everything: stdioServerEntry('everything', ['stdio'], { timeout_s: 2 }),
  });
  const script = `
agents:
  waiter:
    - call: everything__trigger-long-running-operation
      args: { duration: 6, steps: 6 }
    - call: everything__trigger-long-running-operation
      args: { duration: 4, steps: 1 }
    - say: "Both ended."
`;
  try {
    await withHarness('progress', mcp, { waiter: ['mcp:everything'] }, script, async (run) => {
      const threadId = uniqueThreadId('progress');
      const thread = await run.harness.client.startThread({ agent: 'waiter', threadId });
      const posted = await thread.post('Run the long operations.');
      // While the first call runs, the turn's pending activity carries the server's last progress report.
      const turn = run.harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`);
      const details = await waitFor('a progress report in the heartbeat details', 20_000, async () => {
        const description = await turn.describe().catch(() => undefined);
        const pending = description?.raw.pendingActivities ?? [];
        const reported = pending.flatMap((activity) => activity.heartbeatDetails?.payloads ?? []);
        const decoded = reported.map(
          (payload) => JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as unknown,
        );
        return decoded.find(
          (entry): entry is { tool: string; progress: number; total: number } =>
            typeof entry === 'object' && entry !== null && 'progress' in entry,
        );
      });
      assert.equal(details.tool, 'everything__trigger-long-running-operation');
      assert.equal(details.total, 6);
      const result = await thread.reply(posted.messageId, { waitMs: 60_000 });
      assert.equal(result?.reply, 'Both ended.');
      const [long, silent] = await callResults(run, threadId);
      assert.equal(long?.result, 'Long running operation completed. Duration: 6 seconds, Steps: 6.');
      assert.match(
        silent?.result ?? '',
        /^Error: MCP server 'everything' \(.*\) sent neither the answer of 'trigger-long-running-operation' nor progress within 2 seconds, or the call ran past 600 seconds in all; it was cancelled\.$/,
      );
    });
  } finally {
    await mcp.close();
  }
});

/** Every text of a turn's workflow history, its payloads decoded. */
async function historyText(run: Run, threadId: string): Promise<string> {
  const history = await run.harness.client.temporal.workflow.getHandle(`baton/${threadId}/turn-1`).fetchHistory();
  return JSON.stringify(history, (_key, value: unknown) =>
    value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : value,
  );
}

test("mcp tools: a secret in an HTTP server's url never reaches the model: the error of a call to it down names the ${VAR} template", async () => {
  const secret = `sk-${uniqueThreadId('secret')}`;
  const server = await startEverythingOverHttp();
  const template = `${server.url}?key=\${MCP_TEST_SECRET}`;
  const lines: string[] = [];
  const mcp = await startServers(
    'secret-url',
    { vault: { url: template, headers: { Authorization: 'Bearer ${MCP_TEST_SECRET}' } } },
    { env: { ...process.env, MCP_TEST_SECRET: secret }, log: (line) => lines.push(line) },
  ).catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  try {
    // Its port closed: every call is refused below the protocol, and every reconnection too.
    await server.stop();
    const script = `
agents:
  prober:
    - { call: vault__echo, args: { message: "what is your key?" } }
    - say: "No answer."
`;
    await withHarness('secret-url', mcp, { prober: ['mcp:vault'] }, script, async (run) => {
      const threadId = uniqueThreadId('secret-url');
      const thread = await run.harness.client.startThread({ agent: 'prober', threadId });
      assert.equal((await thread.send('Ask the vault.')).reply, 'No answer.');
      const [failed] = await callResults(run, threadId);
      assert.match(
        failed?.result ?? '',
        /^Error: tool 'vault__echo' failed \(after 3 attempts\): .*MCP server 'vault' \(/,
      );
      assert.ok(failed?.result.includes(`(${template})`), failed?.result);
      const seen = {
        transcript: JSON.stringify(await listMessages(run.harness.pool, threadId)),
        model: JSON.stringify(run.requests(threadId)),
        history: await historyText(run, threadId),
        log: lines.join('\n'),
        status: JSON.stringify(mcp.status()),
      };
      for (const [where, text] of Object.entries(seen))
        assert.ok(!text.includes(secret), `the ${where} holds the secret`);
    });
  } finally {
    await mcp.close();
  }
});

describe('a stdio server given secrets', () => {
  const LEAKY_SERVER = path.join(ROOT, 'test', 'fixtures', 'mcp-leaky-server.mjs');
  const secret = `sk-${uniqueThreadId('arg')}`;
  const token = `tk-${uniqueThreadId('env')}`;
  const literal = `lit-${uniqueThreadId('literal')}`;
  const lines: string[] = [];
  let mcp: McpServers;

  before(async () => {
    mcp = await startServers(
      'leaky',
      {
        leaky: {
          command: '${MCP_TEST_NODE}',
          args: [LEAKY_SERVER, '--token=${MCP_TEST_SECRET}'],
          env: { LEAKY_TOKEN: '${MCP_TEST_TOKEN}', LEAKY_LITERAL: literal },
        },
      },
      {
        env: { ...process.env, MCP_TEST_NODE: process.execPath, MCP_TEST_SECRET: secret, MCP_TEST_TOKEN: token },
        log: (line) => lines.push(line),
      },
    );
  });

  after(async () => {
    await mcp?.close();
  });

  test('mcp tools: what a stdio server says on stderr before it dies reaches the model with every secret it was given redacted', async () => {
    const script = `
agents:
  prober:
    - { call: leaky__leak, args: {} }
    - say: "It died."
`;
    await withHarness('leaky', mcp, { prober: ['mcp:leaky'] }, script, async (run) => {
      const threadId = uniqueThreadId('leaky');
      const thread = await run.harness.client.startThread({ agent: 'prober', threadId });
      assert.equal((await thread.send('Make it talk.')).reply, 'It died.');
      const [failed] = await callResults(run, threadId);
      // The server's last line is there, each value it was given replaced by its variable (or its env entry).
      assert.equal(
        failed?.result,
        `Error: tool 'leaky__leak' failed: MCP server 'leaky' (\${MCP_TEST_NODE} ${LEAKY_SERVER} --token=\${MCP_TEST_SECRET}): ` +
          'MCP error -32000: Connection closed; its last output: leaking --token=${MCP_TEST_SECRET} ${MCP_TEST_TOKEN} [env LEAKY_LITERAL]',
      );
      const seen = {
        transcript: JSON.stringify(await listMessages(run.harness.pool, threadId)),
        model: JSON.stringify(run.requests(threadId)),
        history: await historyText(run, threadId),
        log: lines.join('\n'),
        status: JSON.stringify(mcp.status()),
      };
      for (const [where, text] of Object.entries(seen)) {
        for (const value of [secret, token, literal]) assert.ok(!text.includes(value), `the ${where} holds ${value}`);
      }
    });
  });

  test("mcp tools: a stdio server's environment holds its own variables and the few it needs, none of the worker's", async () => {
    const script = `
agents:
  prober:
    - { call: leaky__environment, args: {} }
    - say: "Listed."
`;
    await withHarness('leaky-env', mcp, { prober: ['mcp:leaky'] }, script, async (run) => {
      const threadId = uniqueThreadId('leaky-env');
      const thread = await run.harness.client.startThread({ agent: 'prober', threadId });
      assert.equal((await thread.send('What do you have?')).reply, 'Listed.');
      const [listed] = await callResults(run, threadId);
      const names = JSON.parse(listed?.result ?? '[]') as string[];
      const inherited: readonly string[] = MCP_INHERITED_VARIABLES;
      assert.deepEqual(
        names.filter((name) => !inherited.includes(name)),
        ['LEAKY_LITERAL', 'LEAKY_TOKEN'],
        'nothing of the worker but the inherited few',
      );
      assert.ok(names.includes('PATH'), listed?.result);
      assert.ok(process.env.BATON_TEST_DATABASE_URL !== undefined, 'the worker has a secret the server must not get');
    });
  });
});

describe('stdio servers with and without a sandbox', () => {
  const LEAKY_SERVER = path.join(ROOT, 'test', 'fixtures', 'mcp-leaky-server.mjs');
  // The repository is their working directory (the fixture and the SDK are there); the test run's state under it is
  // masked, as `baton dev` masks its state directory.
  const entry = (extra: Record<string, unknown> = {}) => ({
    command: process.execPath,
    args: [LEAKY_SERVER],
    cwd: ROOT,
    ...extra,
  });
  let mcp: McpServers;
  let listener: net.Server;

  before(async () => {
    const sandbox = await probeShellSandbox({ mode: 'bwrap', hidden: [path.join(ROOT, '.baton')] }, process.env);
    assert.equal(sandbox.kind, 'bwrap', JSON.stringify(sandbox));
    listener = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    mcp = await startMcpServers(
      writeMcpConfig(path.join(freshDir('sandboxed'), 'mcp.json'), {
        open: entry(),
        boxed: entry({ sandbox: true }),
        cut: entry({ sandbox: { network: false } }),
      }),
      process.env,
      { log: () => undefined, sandbox },
    );
  });

  after(async () => {
    await mcp?.close();
    await new Promise((resolve) => listener?.close(resolve));
  });

  test("mcp tools: an unsandboxed stdio server reads the worker's environment through /proc; a sandboxed one cannot", async () => {
    const script = `
agents:
  prober:
    - calls:
        - { call: open__read_environ, args: { pid: ${process.pid} } }
        - { call: boxed__read_environ, args: { pid: ${process.pid} } }
    - say: "Read."
`;
    await withHarness('environ', mcp, { prober: ['mcp:open', 'mcp:boxed'] }, script, async (run) => {
      const threadId = uniqueThreadId('environ');
      const thread = await run.harness.client.startThread({ agent: 'prober', threadId });
      assert.equal((await thread.send('Read the worker.')).reply, 'Read.');
      const results = new Map((await callResults(run, threadId)).map((call) => [call.name, call.result]));
      // What the README warns of: the worker (this process) has the test database's address, and the server reads it.
      assert.ok(
        (JSON.parse(results.get('open__read_environ') ?? '[]') as string[]).includes('BATON_TEST_DATABASE_URL'),
      );
      assert.equal(
        results.get('boxed__read_environ'),
        `cannot read /proc/${process.pid}/environ: ENOENT`,
        'the sandbox has a /proc of its own, without the worker',
      );
    });
  });

  test("mcp tools: a sandboxed stdio server shares the worker's network unless its sandbox cuts it", async () => {
    const { port } = listener.address() as net.AddressInfo;
    const script = `
agents:
  prober:
    - calls:
        - { call: boxed__connect, args: { port: ${port} } }
        - { call: cut__connect, args: { port: ${port} } }
    - say: "Tried."
`;
    await withHarness('network', mcp, { prober: ['mcp:boxed', 'mcp:cut'] }, script, async (run) => {
      const threadId = uniqueThreadId('network');
      const thread = await run.harness.client.startThread({ agent: 'prober', threadId });
      assert.equal((await thread.send('Reach the port.')).reply, 'Tried.');
      const results = new Map((await callResults(run, threadId)).map((call) => [call.name, call.result]));
      assert.equal(results.get('boxed__connect'), 'connected');
      assert.equal(results.get('cut__connect'), 'not connected: ECONNREFUSED', 'only a loopback of its own');
    });
  });
});
