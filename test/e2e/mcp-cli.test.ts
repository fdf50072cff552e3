/**
 * MCP servers' tools from the command line, as a user runs them: `baton mcp list` on a configuration file naming
 * the published reference servers (and one that is down), `baton dev --mcp` with an agent granted `mcp:everything`
 * calling its tools, and a configuration `baton dev` refuses before it starts anything.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import { createPool } from '../../db/pool';
import { freePort, stdioServerEntry, writeMcpConfig } from '../../testing/mcp-reference-servers';
import { uniqueTaskQueue } from '../../testing/test-env';
import { baton, childEnv, describeRun, env, freshDir, parseJson, ROOT, startDev, type DevProcess } from './cli-process';

test('baton mcp list shows each server, its state and its tools as agents get them; a server that is down fails it', async () => {
  const dir = freshDir('mcp-list');
  const downPort = await freePort();
  const config = writeMcpConfig(path.join(dir, 'mcp.json'), {
    everything: stdioServerEntry('everything', ['stdio'], { deny: ['toggle-simulated-logging'] }),
    memory: stdioServerEntry('memory', [], { env: { MEMORY_FILE_PATH: '${MCP_TEST_MEMORY}' }, approval: 'writes' }),
    down: { url: `http://127.0.0.1:${downPort}/mcp` },
  });
  const listEnv = childEnv({ MCP_TEST_MEMORY: path.join(dir, 'memory.jsonl') });

  const text = await baton(['mcp', 'list', '--config', config], listEnv);
  assert.equal(text.code, 1, describeRun(text));
  assert.match(text.stdout, /^everything {2}stdio {2}.* {2}connected$/m);
  assert.match(text.stdout, /^ {2}everything__echo {2}\(read-only, retried\) {2}Echoes back the input string$/m);
  assert.doesNotMatch(text.stdout, /toggle-simulated-logging/, 'a denied tool is not listed');
  assert.match(text.stdout, /^ {2}memory__create_entities {2}\(side effects, runs once; needs approval\)/m);
  assert.match(
    text.stdout,
    new RegExp(
      `^down {2}http {2}http://127\\.0\\.0\\.1:${downPort}/mcp {2}failed: .*could not be started: fetch failed \\(ECONNREFUSED\\)$`,
      'm',
    ),
  );

  const json = await baton(['mcp', 'list', '--config', config, '--json'], listEnv);
  assert.equal(json.code, 1, describeRun(json));
  const listed = parseJson(json) as {
    source: string;
    servers: { name: string; state: string; tools: { name: string; readOnly: boolean }[] }[];
  };
  assert.equal(listed.source, config);
  assert.deepEqual(
    listed.servers.map((server) => [server.name, server.state]),
    [
      ['everything', 'connected'],
      ['memory', 'connected'],
      ['down', 'failed'],
    ],
  );
  const sum = listed.servers[0]?.tools.find((tool) => tool.name === 'everything__get-sum');
  assert.deepEqual(sum && { name: sum.name, readOnly: sum.readOnly }, { name: 'everything__get-sum', readOnly: true });
  // A server's environment may hold secrets: neither its names nor its values are printed.
  assert.ok(!json.stdout.includes('MEMORY_FILE_PATH') && !json.stdout.includes('memory.jsonl'), json.stdout);
  assert.ok(!text.stdout.includes('memory.jsonl'), text.stdout);
});

test('baton mcp list prints no secret: ${VAR} templates, not their values, and what a server said redacted', async () => {
  const dir = freshDir('mcp-secrets');
  const downPort = await freePort();
  const secret = `sk-${path.basename(dir)}`;
  const literal = `lit-${path.basename(dir)}`;
  const leaky = path.join(ROOT, 'test', 'fixtures', 'mcp-leaky-server.mjs');
  const config = writeMcpConfig(path.join(dir, 'mcp.json'), {
    vault: {
      url: `http://127.0.0.1:${downPort}/mcp?key=\${MCP_TEST_SECRET}`,
      headers: { Authorization: 'Bearer ${MCP_TEST_SECRET}' },
    },
    leaky: {
      command: process.execPath,
      args: [leaky, '--exit-at-start', '--token=${MCP_TEST_SECRET}'],
      env: { LEAKY_TOKEN: '${MCP_TEST_SECRET}', LEAKY_LITERAL: literal },
    },
  });
  const listEnv = childEnv({ MCP_TEST_SECRET: secret });
  const text = await baton(['mcp', 'list', '--config', config], listEnv);
  const json = await baton(['mcp', 'list', '--config', config, '--json'], listEnv);
  for (const run of [text, json]) {
    assert.equal(run.code, 1, describeRun(run));
    for (const value of [secret, literal]) {
      assert.ok(!run.stdout.includes(value) && !run.stderr.includes(value), `printed ${value}: ${describeRun(run)}`);
    }
  }
  assert.match(
    text.stdout,
    new RegExp(
      `^vault {2}http {2}http://127\\.0\\.0\\.1:${downPort}/mcp\\?key=\\$\\{MCP_TEST_SECRET\\} {2}failed: .*ECONNREFUSED`,
      'm',
    ),
  );
  const servers = (parseJson(json) as { servers: { name: string; target: string; error?: string }[] }).servers;
  assert.deepEqual(
    servers.map((server) => [server.name, server.target]),
    [
      ['vault', `http://127.0.0.1:${downPort}/mcp?key=\${MCP_TEST_SECRET}`],
      ['leaky', `${process.execPath} ${leaky} --exit-at-start --token=\${MCP_TEST_SECRET}`],
    ],
  );
  // What the server said as it failed is kept, its values redacted.
  assert.match(
    servers[1]?.error ?? '',
    /its last output: leaking --exit-at-start --token=\$\{MCP_TEST_SECRET\} \$\{MCP_TEST_SECRET\} \[env LEAKY_LITERAL\]$/,
  );
});

test('baton mcp list starts a server asking for a sandbox in one it probes, and refuses it where sandboxing is off', async () => {
  const dir = freshDir('mcp-sandboxed');
  const leaky = path.join(ROOT, 'test', 'fixtures', 'mcp-leaky-server.mjs');
  const config = writeMcpConfig(path.join(dir, 'mcp.json'), {
    boxed: { command: process.execPath, args: [leaky], cwd: ROOT, sandbox: true },
  });
  const listed = await baton(['mcp', 'list', '--config', config, '--json'], childEnv());
  assert.equal(listed.code, 0, describeRun(listed));
  const [boxed] = (parseJson(listed) as { servers: { state: string; tools: { name: string }[] }[] }).servers;
  assert.equal(boxed?.state, 'connected');
  assert.ok(
    boxed?.tools.some((tool) => tool.name === 'boxed__read_environ'),
    describeRun(listed),
  );

  const off = await baton(['mcp', 'list', '--config', config], childEnv({ BATON_SHELL_SANDBOX: 'none' }));
  assert.equal(off.code, 1, describeRun(off));
  assert.match(
    off.stdout,
    /^boxed {2}stdio {2}.* {2}failed: MCP server 'boxed' asks for a sandbox: this worker runs without one \(BATON_SHELL_SANDBOX=none\), so the server is not started$/m,
  );
});

test('baton mcp list without a file, and a file naming an unset variable, say what to do', async () => {
  const missing = await baton(['mcp', 'list'], childEnv());
  assert.equal(missing.code, 1, describeRun(missing));
  assert.equal(
    missing.stderr,
    'baton: give the MCP configuration file with --config <file>, or set BATON_MCP_CONFIG\n',
  );

  const dir = freshDir('mcp-unset');
  const config = writeMcpConfig(path.join(dir, 'mcp.json'), {
    tickets: { url: 'https://tickets.invalid/mcp', headers: { Authorization: 'Bearer ${MCP_TEST_UNSET_TOKEN}' } },
  });
  const unset = await baton(['mcp', 'list', '--config', config], childEnv());
  assert.equal(unset.code, 1, describeRun(unset));
  assert.equal(
    unset.stderr,
    `baton: ${config}: MCP server 'tickets': headers.Authorization names \${MCP_TEST_UNSET_TOKEN}, which is not set in the worker's environment\n`,
  );
});

test('baton dev refuses an MCP configuration with an unknown field, naming the file and the server, before starting anything', async () => {
  const dir = freshDir('mcp-dev-bad');
  const agentsDir = path.join(dir, 'agents');
  fs.mkdirSync(agentsDir);
  fs.writeFileSync(path.join(agentsDir, 'a.md'), '---\nname: a\ndescription: An agent.\n---\nYou act.\n');
  fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), 'agents:\n  a:\n    - say: "hi"\n');
  const config = writeMcpConfig(path.join(dir, 'mcp.json'), {
    everything: stdioServerEntry('everything', ['stdio'], { autoApprove: ['echo'] }),
  });
  const result = await baton(['--state-dir', dir, 'dev', '--agents', agentsDir, '--mcp', config], childEnv());
  assert.equal(result.code, 1, describeRun(result));
  assert.equal(
    result.stderr.trim().split('\n').at(-1),
    `baton: ${config}: MCP server 'everything': unknown field 'autoApprove'`,
  );
  assert.ok(!fs.existsSync(path.join(dir, 'stack.json')), 'nothing was started');
});

describe('with `baton dev --mcp` running', () => {
  const stateDir = freshDir('mcp-dev-state');
  const agentsDir = freshDir('mcp-dev-agents');
  const taskQueue = uniqueTaskQueue('mcp-cli');
  let dev: DevProcess | undefined;

  before(async () => {
    fs.writeFileSync(
      path.join(agentsDir, 'assistant.md'),
      '---\nname: assistant\ndescription: Uses the everything server.\ncapabilities: [mcp:everything]\n---\nHelp.\n',
    );
    fs.writeFileSync(
      path.join(agentsDir, 'model-script.yaml'),
      YAML.stringify({
        agents: {
          assistant: [
            {
              calls: [
                { call: 'everything__echo', args: { message: 'over the CLI' } },
                { call: 'everything__get-sum', args: { a: 19, b: 23 } },
              ],
            },
            { say: 'Both calls are done.' },
          ],
        },
      }),
    );
    const config = writeMcpConfig(path.join(agentsDir, 'mcp.json'), { everything: stdioServerEntry('everything') });
    dev = await startDev({ stateDir, args: ['--agents', agentsDir, '--task-queue', taskQueue, '--mcp', config] });
  });

  after(async () => {
    await dev?.stop();
  });

  test('an agent granted mcp:everything calls the server through baton dev, and the results are in its transcript', async () => {
    assert.match(dev?.output.stderr() ?? '', /MCP: servers everything \(\d+ tools\) from /);
    const result = await baton(['--state-dir', stateDir, 'run', 'assistant', 'Echo and add', '--json'], childEnv());
    assert.equal(result.code, 0, describeRun(result));
    const output = parseJson(result);
    assert.equal(output.reply, 'Both calls are done.');
    const pool = createPool({ connectionString: env.databaseUrl, applicationName: 'baton-e2e-mcp' });
    try {
      const { rows } = await pool.query<{ content: string }>(
        "SELECT content FROM transcript_messages WHERE thread_id = $1 AND role = 'tool' ORDER BY seq",
        [output.threadId],
      );
      // The two calls of one reply run at once: their results are stored in either order.
      assert.deepEqual(rows.map((row) => row.content).sort(), ['Echo: over the CLI', 'The sum of 19 and 23 is 42.']);
    } finally {
      await pool.end();
    }
  });
});
