/**
 * The MCP client's configuration file and its tools, without servers: what `parseMcpConfig` accepts and refuses (every
 * refusal naming the file and the server), how a server's listed tools become Baton tools (`toMcpTools`: names,
 * allow/deny, read-only and approval rules, schemas) and how a call's result becomes transcript text
 * (`formatMcpResult`).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  DEFAULT_MCP_MAX_TIMEOUT_S,
  DEFAULT_MCP_TIMEOUT_S,
  McpConfigError,
  mcpRedactor,
  parseMcpConfig,
  type McpServerConfig,
  type McpStdioServer,
} from '../../activities/tools/mcp-config';
import { connectMcpServers } from '../../activities/tools/mcp-servers';
import { formatMcpResult, toMcpTools, type McpCall } from '../../activities/tools/mcp-tools';
import { fakeToolContext } from '../../testing/tool-context';

const SOURCE = path.join(path.sep, 'etc', 'baton', 'mcp.json');

function parse(servers: unknown, env: Record<string, string | undefined> = {}) {
  return parseMcpConfig(JSON.stringify({ mcpServers: servers }), SOURCE, env);
}

/** Asserts that parsing refuses with an McpConfigError whose message names the file and matches `reason`. */
function refuses(servers: unknown, reason: RegExp, env: Record<string, string | undefined> = {}) {
  assert.throws(
    () => parse(servers, env),
    (error: unknown) => {
      assert.ok(error instanceof McpConfigError, String(error));
      assert.ok(error.message.startsWith(`${SOURCE}: `), error.message);
      assert.match(error.message, reason);
      return true;
    },
  );
}

test('mcp config: a stdio entry and an http entry, with defaults and ${VAR} resolved', () => {
  const config = parse(
    {
      files: {
        command: '${NODE}',
        args: ['server.js', '--root=${HOME_DIR}/data'],
        env: { TOKEN: 'secret-${SUFFIX}' },
        cwd: 'servers',
      },
      remote: {
        type: 'http',
        url: 'https://mcp.example.test/${PATH_PART}',
        headers: { Authorization: 'Bearer ${TOKEN}' },
        allow: ['search'],
        deny: ['delete'],
        timeout_s: 20,
        readOnly: ['search'],
        approval: 'writes',
      },
    },
    { NODE: '/usr/bin/node', HOME_DIR: '/home/u', SUFFIX: 'x1', PATH_PART: 'mcp', TOKEN: 't0k' },
  );
  assert.equal(config.source, SOURCE);
  assert.deepEqual(config.servers, [
    {
      name: 'files',
      target: '${NODE} server.js --root=${HOME_DIR}/data',
      secrets: [
        { value: '/usr/bin/node', placeholder: '${NODE}' },
        { value: '/home/u', placeholder: '${HOME_DIR}' },
        { value: 'x1', placeholder: '${SUFFIX}' },
        { value: 'secret-x1', placeholder: '[env TOKEN]' },
      ],
      deny: [],
      timeoutS: DEFAULT_MCP_TIMEOUT_S,
      maxTimeoutS: DEFAULT_MCP_MAX_TIMEOUT_S,
      readOnly: 'hints',
      approval: 'none',
      transport: 'stdio',
      command: '/usr/bin/node',
      args: ['server.js', '--root=/home/u/data'],
      env: { TOKEN: 'secret-x1' },
      inheritedEnv: {},
      cwd: path.join(path.dirname(SOURCE), 'servers'),
    },
    {
      name: 'remote',
      target: 'https://mcp.example.test/${PATH_PART}',
      secrets: [
        { value: 'mcp', placeholder: '${PATH_PART}' },
        { value: 't0k', placeholder: '${TOKEN}' },
        { value: 'Bearer t0k', placeholder: '[header Authorization]' },
      ],
      allow: ['search'],
      deny: ['delete'],
      timeoutS: 20,
      maxTimeoutS: DEFAULT_MCP_MAX_TIMEOUT_S,
      readOnly: ['search'],
      approval: 'writes',
      transport: 'http',
      url: 'https://mcp.example.test/mcp',
      headers: { Authorization: 'Bearer t0k' },
    },
  ]);
});

test('mcp config: an unset ${VAR} is refused, naming the server, the field and the variable', () => {
  refuses(
    { remote: { url: 'https://h.test/mcp', headers: { Authorization: 'Bearer ${API_TOKEN}' } } },
    /MCP server 'remote': headers\.Authorization names \$\{API_TOKEN\}, which is not set/,
  );
  refuses({ local: { command: 'node', args: ['${NOPE}'] } }, /MCP server 'local': args\[0\] names \$\{NOPE\}/);
});

test('mcp config: unknown fields, bad names, both or neither of command and url, sse and bad urls are refused', () => {
  refuses({ s: { command: 'node', colour: 'red' } }, /MCP server 's': .*colour/);
  refuses({ s: { url: 'http://h.test/', command2: 'x' } }, /MCP server 's': .*command2/);
  refuses({ a__b: { command: 'node' } }, /MCP server 'a__b': the name must be letters, digits, '-' and single '_'/);
  refuses({ 'a.b': { command: 'node' } }, /MCP server 'a\.b': the name must be/);
  refuses({ both: { command: 'node', url: 'http://h.test/' } }, /MCP server 'both': give either "command".*not both/);
  refuses({ none: { args: [] } }, /MCP server 'none': give either "command"/);
  refuses({ old: { type: 'sse', url: 'http://h.test/sse' } }, /MCP server 'old': the SSE transport is not supported/);
  refuses({ bad: { url: 'not a url' } }, /MCP server 'bad': 'url' is not a URL: not a url/);
  // The URL as the file writes it: the value of a variable may be a secret.
  refuses({ bad: { url: '${BAD_URL}' } }, /MCP server 'bad': 'url' is not a URL: \$\{BAD_URL\}$/, {
    BAD_URL: 'not-a-url-but-a-secret',
  });
  refuses({ ftp: { url: 'ftp://h.test/' } }, /MCP server 'ftp': 'url' must be http or https/);
  refuses({ slow: { command: 'node', timeout_s: 0 } }, /MCP server 'slow': .*timeout_s/);
  refuses(
    { slow: { command: 'node', timeout_s: 120, max_timeout_s: 60 } },
    /MCP server 'slow': 'timeout_s' \(without progress\) must not exceed 'max_timeout_s' \(in all\)/,
  );
  refuses({ odd: { command: 'node', approval: 'sometimes' } }, /MCP server 'odd': .*approval/);
  assert.throws(
    () => parseMcpConfig('{"servers": {}}', SOURCE, {}),
    new McpConfigError(SOURCE, "unknown field 'servers' (only 'mcpServers')"),
  );
  assert.throws(() => parseMcpConfig('{', SOURCE, {}), /^McpConfigError: .*mcp\.json: not valid JSON/);
});

test('mcp config: a stdio server inherits only the few harmless variables of the worker, and may ask for a sandbox', () => {
  const worker = {
    PATH: '/usr/bin',
    HOME: '/home/u',
    LANG: 'C.UTF-8',
    DATABASE_URL: 'postgres://secret',
    API_KEY: 'k',
  };
  const servers = parse(
    {
      plain: { command: 'node' },
      boxed: { command: 'node', sandbox: true },
      offline: { command: 'node', sandbox: { network: false } },
      unboxed: { command: 'node', sandbox: false },
    },
    worker,
  ).servers as McpStdioServer[];
  assert.deepEqual(servers[0]?.inheritedEnv, { HOME: '/home/u', LANG: 'C.UTF-8', PATH: '/usr/bin' });
  assert.deepEqual(
    servers.map((server) => server.sandbox),
    [undefined, { network: true }, { network: false }, undefined],
  );
  refuses({ remote: { url: 'http://h.test/', sandbox: true } }, /MCP server 'remote': .*sandbox/);
  refuses({ odd: { command: 'node', sandbox: { network: 'egress' } } }, /MCP server 'odd': .*sandbox/);
});

test('mcp servers: a server asking for a sandbox on a worker without one is refused before anything starts', async () => {
  const config = parse({ boxed: { command: 'node', args: ['-e', 'process.exit(9)'], sandbox: true } });
  for (const sandbox of [undefined, { kind: 'none' } as const]) {
    await assert.rejects(
      connectMcpServers(config, { strict: true, log: () => undefined, ...(sandbox === undefined ? {} : { sandbox }) }),
      new McpConfigError(
        SOURCE,
        "MCP server 'boxed' asks for a sandbox: this worker runs without one (BATON_SHELL_SANDBOX=none), so the server is not started",
      ),
    );
  }
  const unavailable = { kind: 'unavailable', reason: 'bubblewrap is not installed', remedy: 'install it' } as const;
  await assert.rejects(
    connectMcpServers(config, { strict: true, log: () => undefined, sandbox: unavailable }),
    /MCP server 'boxed' asks for a sandbox: this worker cannot make one: bubblewrap is not installed$/,
  );
});

test('mcp redaction: every value given a server, longest first, as it is, percent-encoded or JSON-escaped', () => {
  const [files] = parse(
    {
      files: {
        command: 'node',
        args: ['--key=${KEY}', '--prefix=${PREFIX}', '--flag=${FLAG}'],
        env: { GIVEN: 'literal-token', PLAIN: 'x' },
      },
    },
    { KEY: 'k3y with space/"quote"', PREFIX: 'k3y', FLAG: 'on' },
  ).servers;
  assert.ok(files !== undefined);
  const redact = mcpRedactor(files.secrets);
  assert.equal(
    redact('k3y with space/"quote" k3y%20with%20space%2F%22quote%22 "k3y with space/\\"quote\\"" literal-token x on'),
    '${KEY} ${KEY} "${KEY}" [env GIVEN] x on',
    'values under 4 characters (k3y, x, on) are left: redaction could not hide them',
  );
  // One pass: a placeholder is never redacted again, even when it holds a value.
  assert.equal(mcpRedactor([{ value: 'NAME', placeholder: '${NAME}' }])('NAME'), '${NAME}');
  assert.equal(mcpRedactor([])('nothing to hide'), 'nothing to hide');
});

test('mcp results: text, structured content, images as placeholders with their size, resources', () => {
  assert.equal(
    formatMcpResult({
      content: [
        { type: 'text', text: 'one' },
        { type: 'text', text: 'two' },
      ],
    }),
    'one\ntwo',
  );
  // Structured content wins over the text blocks that repeat it.
  assert.equal(
    formatMcpResult({ content: [{ type: 'text', text: '{"t": 33}' }], structuredContent: { t: 33, sky: 'Cloudy' } }),
    '{"t":33,"sky":"Cloudy"}',
  );
  // 8 bytes of base64 padding-free data: 12 characters.
  const data = Buffer.from('12345678').toString('base64');
  const image = formatMcpResult({
    content: [
      { type: 'text', text: 'Here:' },
      { type: 'image', data, mimeType: 'image/png' },
    ],
  });
  assert.equal(image, 'Here:\n[image: image/png, 8 bytes, not shown]');
  assert.ok(!image.includes(data));
  assert.equal(
    formatMcpResult({
      content: [{ type: 'image', data: Buffer.from('1234567').toString('base64'), mimeType: 'image/gif' }],
    }),
    '[image: image/gif, 7 bytes, not shown]',
  );
  assert.equal(
    formatMcpResult({
      content: [
        { type: 'resource', resource: { uri: 'file:///a.txt', text: 'contents of a' } },
        { type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/gzip', blob: 'AAAA' } },
        { type: 'resource_link', uri: 'file:///c.txt', name: 'c' },
      ],
    }),
    'contents of a\n[resource: file:///b.bin, application/gzip, 3 bytes, not shown]\n[resource link: file:///c.txt (c)]',
  );
  // An error's structured content is not taken for the result: its text says what went wrong.
  assert.equal(
    formatMcpResult({ isError: true, content: [{ type: 'text', text: 'no such file' }], structuredContent: {} }),
    'no such file',
  );
});

const objectSchema = { type: 'object', properties: {} } as const;

function listed(name: string, extra: Partial<Tool> = {}): Tool {
  return { name, inputSchema: objectSchema, ...extra };
}

function server(name: string, fields: Partial<McpServerConfig> = {}): McpServerConfig {
  return {
    name,
    deny: [],
    timeoutS: 30,
    maxTimeoutS: 900,
    readOnly: 'hints',
    approval: 'none',
    transport: 'http',
    url: 'http://h.test/mcp',
    target: 'http://h.test/mcp',
    secrets: [],
    headers: {},
    ...fields,
  } as McpServerConfig;
}

const noCall: McpCall = () => Promise.reject(new Error('not called in this test'));

function refusesTools(config: McpServerConfig, tools: Tool[], reason: RegExp) {
  assert.throws(
    () => toMcpTools(config, tools, noCall, SOURCE),
    (error: unknown) => {
      assert.ok(error instanceof McpConfigError, String(error));
      assert.ok(error.message.startsWith(`${SOURCE}: MCP server '${config.name}': `), error.message);
      assert.match(error.message, reason);
      return true;
    },
  );
}

test('mcp tools: names are <server>__<tool> with other characters mapped to _, and the schema is kept for the model', () => {
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { q: { type: 'string' } },
    required: ['q'],
  };
  const [tool] = toMcpTools(
    server('srv'),
    [listed('my.tool', { description: 'Searches.', inputSchema: schema as Tool['inputSchema'] })],
    noCall,
    SOURCE,
  );
  assert.equal(tool?.tool.name, 'srv__my_tool');
  assert.equal(tool?.serverTool, 'my.tool');
  assert.equal(tool?.server, 'srv');
  assert.equal(tool?.tool.description, 'Searches.');
  assert.deepEqual(tool?.inputSchema, { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] });
  // Arguments are checked against the server's schema before a call.
  assert.equal(tool?.tool.parameters.safeParse({ q: 'x' }).success, true);
  const refused = tool?.tool.parameters.safeParse({});
  assert.equal(refused?.success, false);
  assert.match(JSON.stringify(refused?.error?.issues), /required property 'q'/);
});

test('mcp tools: a name over 64 characters, two tools with one name and a schema that cannot compile are refused', () => {
  const long = 'x'.repeat(60);
  refusesTools(
    server('srv'),
    [listed(long)],
    new RegExp(`tool '${long}' would be called 'srv__${long}', 65 characters`),
  );
  refusesTools(
    server('srv'),
    [listed('a.b'), listed('a-b'), listed('a_b')],
    /tools 'a\.b' and 'a_b' would both be called 'srv__a_b'/,
  );
  refusesTools(
    server('broken'),
    [
      listed('ok'),
      listed('bad', {
        inputSchema: { type: 'object', properties: { x: { type: 'nonsense' } } },
      }),
    ],
    /tool 'bad' has an input schema that cannot be used: .*nonsense/,
  );
  // Denying the offending tool lets the server through.
  assert.deepEqual(
    toMcpTools(server('srv', { deny: [long] }), [listed(long), listed('short')], noCall, SOURCE).map(
      (t) => t.tool.name,
    ),
    ['srv__short'],
  );
});

test('mcp tools: allow and deny narrow the tools; an allow entry the server does not list is refused', () => {
  const tools = [listed('read'), listed('write'), listed('delete')];
  const names = (config: McpServerConfig) => toMcpTools(config, tools, noCall, SOURCE).map((t) => t.serverTool);
  assert.deepEqual(names(server('s')), ['read', 'write', 'delete']);
  assert.deepEqual(names(server('s', { allow: ['read', 'write'] })), ['read', 'write']);
  assert.deepEqual(names(server('s', { deny: ['delete'] })), ['read', 'write']);
  assert.deepEqual(names(server('s', { allow: ['read', 'write'], deny: ['write'] })), ['read']);
  refusesTools(
    server('s', { allow: ['read', 'rename'] }),
    tools,
    /'allow' names 'rename', which the server does not list/,
  );
});

test('mcp tools: read-only rules (hints, none, a list) decide retries and side effects; approval rules', () => {
  const tools = [listed('look', { annotations: { readOnlyHint: true } }), listed('change')];
  const traits = (config: McpServerConfig) =>
    Object.fromEntries(
      toMcpTools(config, tools, noCall, SOURCE).map((t) => [
        t.serverTool,
        [t.readOnly, t.tool.sideEffects, t.tool.retries, t.tool.needsApproval, t.tool.timeout_s],
      ]),
    );
  assert.deepEqual(traits(server('s')), { look: [true, false, 2, false, 900], change: [false, true, 0, false, 900] });
  assert.deepEqual(traits(server('s', { readOnly: 'none' })), {
    look: [false, true, 0, false, 900],
    change: [false, true, 0, false, 900],
  });
  assert.deepEqual(traits(server('s', { readOnly: ['change'] })), {
    look: [false, true, 0, false, 900],
    change: [true, false, 2, false, 900],
  });
  assert.deepEqual(traits(server('s', { approval: 'writes' })), {
    look: [true, false, 2, false, 900],
    change: [false, true, 0, true, 900],
  });
  assert.deepEqual(traits(server('s', { approval: 'all' })), {
    look: [true, false, 2, true, 900],
    change: [false, true, 0, true, 900],
  });
  assert.deepEqual(traits(server('s', { approval: ['look'] })), {
    look: [true, false, 2, true, 900],
    change: [false, true, 0, false, 900],
  });
});

test("mcp tools: a call passes the server's tool name and arguments, and an isError result throws Error text", async () => {
  const calls: unknown[] = [];
  const results: CallToolResult[] = [
    { content: [{ type: 'text', text: 'fine' }] },
    { isError: true, content: [{ type: 'text', text: 'disk full' }] },
  ];
  const call: McpCall = (serverName, tool, args, options) => {
    calls.push({ serverName, tool, args, timeoutMs: options.timeoutMs });
    return Promise.resolve(results.shift() as CallToolResult);
  };
  const [tool] = toMcpTools(server('srv'), [listed('do.it')], call, SOURCE);
  const context = fakeToolContext();
  assert.equal(await tool?.tool.run?.({ n: 1 }, context), 'fine');
  await assert.rejects(async () => tool?.tool.run?.({ n: 2 }, context), { name: 'ToolError', message: 'disk full' });
  assert.deepEqual(calls, [
    { serverName: 'srv', tool: 'do.it', args: { n: 1 }, timeoutMs: 30_000 },
    { serverName: 'srv', tool: 'do.it', args: { n: 2 }, timeoutMs: 30_000 },
  ]);
});
