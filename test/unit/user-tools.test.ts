import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { z } from 'zod';
import { createToolRegistry } from '../../activities/tools';
import { defineTool } from '../../activities/tools/types';
import {
  DEFAULT_USER_TOOL_MAX_RESULT_BYTES,
  DEFAULT_USER_TOOL_RETRIES,
  DEFAULT_USER_TOOL_TIMEOUT_S,
  prepareUserTools,
  ToolDefinitionError,
} from '../../activities/tools/user-tools';
import { createAgentCatalog } from '../../worker/agent-catalog';
import { AgentConfigError } from '../../worker/agents';
import { loadToolModules } from '../../worker/tool-modules';

/** Modules live outside the repository; they find zod by its absolute path, as a user project finds its own. */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-user-tools-'));
const ZOD = JSON.stringify(require.resolve('zod'));

after(() => fs.rmSync(dir, { recursive: true, force: true }));

function writeModule(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** Asserts that loading `file` stops with a ToolDefinitionError naming the file and matching `reason`. */
async function assertRefused(file: string, reason: RegExp): Promise<void> {
  await assert.rejects(loadToolModules([file]), (error: unknown) => {
    assert.ok(error instanceof ToolDefinitionError, `expected a ToolDefinitionError, got ${String(error)}`);
    assert.equal(error.source, file);
    assert.ok(error.message.startsWith(`${file}: `), error.message);
    assert.match(error.reason, reason);
    return true;
  });
}

test('tool modules: a TypeScript module with a default export loads through tsx, with the defaults filled in', async () => {
  const file = writeModule(
    'weather.ts',
    `import { z } from ${ZOD};
interface Forecast { city: string; days: number }
const forecast = (args: Forecast): string => \`\${args.city}: sunny for \${args.days} days\`;
export default [
  {
    name: 'forecast',
    description: 'The weather for a city.',
    parameters: z.object({ city: z.string(), days: z.int().min(1).max(7) }),
    run: (args: Forecast) => forecast(args),
  },
  {
    name: 'book_table',
    description: 'Books a table.',
    parameters: z.object({ people: z.int() }),
    sideEffects: true,
    needsApproval: true,
    approvalTimeout_s: 600,
    timeout_s: 30,
    run: () => 'booked',
  },
];
`,
  );
  const [forecast, booking] = await loadToolModules([file]);
  assert.equal(forecast?.source, file);
  assert.equal(forecast?.tool.name, 'forecast');
  // The README's defaults, as literals: a changed constant makes the README wrong, so it must fail here too.
  assert.equal(forecast?.tool.timeout_s, 300);
  assert.equal(forecast?.tool.retries, 2);
  assert.equal(forecast?.tool.sideEffects, false);
  assert.equal(forecast?.tool.maxResultBytes, 64 * 1024);
  assert.equal(await forecast?.tool.run?.({ city: 'Oslo', days: 2 }, undefined as never), 'Oslo: sunny for 2 days');
  assert.equal(booking?.tool.retries, 0, 'a tool with side effects is never retried');
  assert.equal(booking?.tool.timeout_s, 30);
  assert.equal(booking?.tool.needsApproval, true);
});

test('user tools: the defaults docs/guides/tools.md states are 300 s, 2 retries and a 64 KiB result cut', () => {
  // Literals, not the constants: a changed default must fail here, where the guide's list is checked too.
  assert.equal(DEFAULT_USER_TOOL_TIMEOUT_S, 300);
  assert.equal(DEFAULT_USER_TOOL_RETRIES, 2);
  assert.equal(DEFAULT_USER_TOOL_MAX_RESULT_BYTES, 65_536);
  // The list of a tool's fields: the list items around its `run(args, ctx)` item, each "- `field` (default …): …".
  const lines = fs.readFileSync(path.resolve(__dirname, '..', '..', 'docs', 'guides', 'tools.md'), 'utf8').split('\n');
  const at = lines.findIndex((line) => line.startsWith('- `run(args, ctx)`'));
  assert.ok(at > 0, "docs/guides/tools.md has the list of a tool definition's fields");
  const section = lines.slice(lines.slice(0, at).findLastIndex((line) => line.startsWith('#')));
  const end = section.findIndex((line, index) => index > 0 && line.startsWith('#'));
  const items = section.slice(0, end === -1 ? undefined : end).filter((line) => line.startsWith('- `'));
  /** What the field's item says in its "(default …)". */
  const defaultOf = (field: string): string | undefined =>
    items.find((line) => line.startsWith(`- \`${field}\` (default `))?.match(/^- `[^`]+` \(default (.+?)\):/)?.[1];
  assert.equal(defaultOf('timeout_s'), '`300`');
  assert.equal(defaultOf('retries'), '`2`, or `0` with `sideEffects`');
  assert.equal(defaultOf('maxResultBytes'), '`65536`');
});

test('tool modules: a named `tools` export (ES module) and module.exports.tools (CommonJS) load too', async () => {
  const esm = writeModule(
    'named.mjs',
    `import { z } from ${ZOD};
export const tools = [{ name: 'esm_tool', description: 'd', parameters: z.object({}), run: () => 'ok' }];
`,
  );
  const cjs = writeModule(
    'common.cjs',
    `const { z } = require(${ZOD});
module.exports.tools = [{ name: 'cjs_tool', description: 'd', parameters: z.object({}), run: () => 'ok' }];
`,
  );
  const loaded = await loadToolModules([esm, cjs]);
  assert.deepEqual(
    loaded.map((entry) => [entry.tool.name, entry.source]),
    [
      ['esm_tool', esm],
      ['cjs_tool', cjs],
    ],
  );
});

test('tool modules: every bad module stops start-up with the file and the reason', async () => {
  await assertRefused(path.join(dir, 'missing.ts'), /^tool module not found$/);
  await assertRefused(writeModule('syntax.ts', 'export default [ { name: "x", \n'), /^the module failed to load: /);
  await assertRefused(writeModule('throws.mjs', 'throw new Error("no database here");\n'), /no database here/);
  await assertRefused(writeModule('nothing.mjs', 'export const other = 1;\n'), /^the module exports no tools/);
  await assertRefused(writeModule('object.mjs', 'export default { name: "x" };\n'), /^the module exports no tools/);
  const tool = (fields: string) =>
    `import { z } from ${ZOD};\nexport default [{ description: 'd', parameters: z.object({}), run: () => 'ok', ${fields} }];\n`;
  await assertRefused(writeModule('bad-name.mjs', tool("name: 'has space'")), /^tool 1 \('has space'\): 'name' must/);
  await assertRefused(
    writeModule('long-name.mjs', tool(`name: '${'x'.repeat(65)}'`)),
    /'name' must be 1 to 64 letters/,
  );
  await assertRefused(
    writeModule('unknown-field.mjs', tool("name: 'slow', timeout: 5")),
    /^tool 'slow': unknown field 'timeout'$/,
  );
  await assertRefused(
    writeModule(
      'no-run.mjs',
      `import { z } from ${ZOD};\nexport default [{ name: 'x', description: 'd', parameters: z.object({}) }];\n`,
    ),
    /^tool 'x': 'run' must be a function/,
  );
  await assertRefused(
    writeModule(
      'not-zod.mjs',
      "export default [{ name: 'x', description: 'd', parameters: { type: 'object' }, run: () => 'ok' }];\n",
    ),
    /^tool 'x': 'parameters' must be a zod 4 schema/,
  );
  await assertRefused(
    writeModule(
      'zod-string.mjs',
      `import { z } from ${ZOD};\nexport default [{ name: 'x', description: 'd', parameters: z.string(), run: () => 'ok' }];\n`,
    ),
    /'parameters' must be a zod object, z\.object\(\{ … \}\) \(got a zod string\)/,
  );
  await assertRefused(
    writeModule(
      'date.mjs',
      `import { z } from ${ZOD};\nexport default [{ name: 'x', description: 'd', parameters: z.object({ when: z.date() }), run: () => 'ok' }];\n`,
    ),
    /'parameters' cannot be given to the model as JSON Schema/,
  );
  await assertRefused(
    writeModule(
      'twice.mjs',
      tool("name: 'x' }, { description: 'd', parameters: z.object({}), run: () => 'ok', name: 'x'"),
    ),
    /^tool 'x' is defined twice$/,
  );
  await assertRefused(
    writeModule('retried-effects.mjs', tool("name: 'pay', sideEffects: true, retries: 2")),
    /^tool 'pay': a tool with 'sideEffects' runs at most once per call/,
  );
  await assertRefused(
    writeModule('stray-timeout.mjs', tool("name: 'x', approvalTimeout_s: 60")),
    /'approvalTimeout_s' is set but the tool never needs approval/,
  );
  await assertRefused(
    writeModule('bad-timeout.mjs', tool("name: 'x', timeout_s: 0")),
    /^tool 'x': 'timeout_s' must be a whole number from 1 to 86400$/,
  );
});

const registryOptions = { filesRoot: dir, arcDataDir: dir, describeAgent: () => undefined };
const plainTool = (name: string) =>
  defineTool({ name, description: `The ${name} tool.`, parameters: z.object({}), run: () => 'ok' });

test("tool modules: a name Baton's own tools, another module or an agent already use is refused, naming both", () => {
  assert.throws(
    () => createToolRegistry({ ...registryOptions, userTools: prepareUserTools([plainTool('shell')], 'mine.ts') }),
    /^ToolDefinitionError: mine\.ts: tool 'shell' has the name of one of Baton's own tools: rename it$/,
  );
  assert.throws(
    () =>
      createToolRegistry({
        ...registryOptions,
        userTools: [
          ...prepareUserTools([plainTool('lookup')], 'a.ts'),
          ...prepareUserTools([plainTool('lookup')], 'b.ts'),
        ],
      }),
    /^ToolDefinitionError: b\.ts: tool 'lookup' is also defined in a\.ts$/,
  );
  const agentsDir = fs.mkdtempSync(path.join(dir, 'agents-'));
  fs.writeFileSync(path.join(agentsDir, 'lookup.md'), '---\nname: lookup\ndescription: Looks things up.\n---\n');
  assert.throws(
    () =>
      createAgentCatalog({
        agents: agentsDir,
        filesRoot: dir,
        arcDataDir: dir,
        userTools: prepareUserTools([plainTool('lookup')], 'tools.ts'),
      }),
    (error: unknown) =>
      error instanceof ToolDefinitionError &&
      error.message === `tools.ts: tool 'lookup' has the name of the agent in ${path.join(agentsDir, 'lookup.md')}`,
  );
});

test('tool modules: a user tool is a capability like a built-in one, with its JSON Schema for the model', () => {
  const agentsDir = fs.mkdtempSync(path.join(dir, 'agents-'));
  fs.writeFileSync(
    path.join(agentsDir, 'a.md'),
    '---\nname: a\ndescription: Uses lookup.\ncapabilities: [lookup]\napproval: [lookup]\n---\n',
  );
  const lookup = defineTool({
    name: 'lookup',
    description: 'Looks a word up.',
    parameters: z.object({ word: z.string().describe('The word.') }),
    run: ({ word }) => word,
  });
  const catalog = createAgentCatalog({
    agents: agentsDir,
    filesRoot: dir,
    arcDataDir: dir,
    userTools: prepareUserTools([lookup], 'tools.ts'),
  });
  assert.equal(catalog.tools.userToolSource('lookup'), 'tools.ts');
  assert.equal(catalog.tools.userToolSource('shell'), undefined);
  assert.deepEqual(catalog.tools.toModelTool('lookup'), {
    type: 'function',
    function: {
      name: 'lookup',
      description: 'Looks a word up.',
      parameters: {
        type: 'object',
        properties: { word: { type: 'string', description: 'The word.' } },
        required: ['word'],
      },
    },
  });
});

test('agent approvals: an approval must name a tool the agent can call and the activity runs', () => {
  const cases: [string, RegExp][] = [
    ['capabilities: [think]\napproval: [teleport]', /:5: approval 'teleport' names no tool/],
    ['capabilities: [b]\napproval: [b]', /approval 'b' names an agent: approvals gate tool calls, not delegations/],
    ['approval: [ask_human]', /approval 'ask_human' names a tool Baton's workflow carries out itself/],
    ['approval: [shell]', /approval 'shell' names a tool this agent cannot call: add it to 'capabilities'/],
    ['approval: [{ tool: shell, timeout: 5 }]', /unknown field 'approval\.0\.timeout'/],
  ];
  for (const [fields, reason] of cases) {
    const agentsDir = fs.mkdtempSync(path.join(dir, 'agents-'));
    fs.writeFileSync(path.join(agentsDir, 'a.md'), `---\nname: a\ndescription: d\n${fields}\n---\n`);
    fs.writeFileSync(path.join(agentsDir, 'b.md'), '---\nname: b\ndescription: d\n---\n');
    assert.throws(
      () => createAgentCatalog({ agents: agentsDir, filesRoot: dir, arcDataDir: dir }),
      (error: unknown) => error instanceof AgentConfigError && reason.test(error.message),
      fields,
    );
  }
  const agentsDir = fs.mkdtempSync(path.join(dir, 'agents-'));
  fs.writeFileSync(
    path.join(agentsDir, 'a.md'),
    '---\nname: a\ndescription: d\ncapabilities: [shell]\napproval: [{ tool: shell, timeout_s: 60 }, store_env_data]\n---\n',
  );
  const agent = createAgentCatalog({ agents: agentsDir, filesRoot: dir, arcDataDir: dir }).agents().get('a');
  assert.deepEqual(agent?.approval, [{ tool: 'shell', timeout_s: 60 }, 'store_env_data']);
});
