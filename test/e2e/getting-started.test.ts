/**
 * The first project of docs/getting-started.md ("Use Baton in your project"), built from the page and run as it says,
 * so that the page cannot drift from what Baton does. Every file the page shows whole carries a marker,
 * `<!-- file: <path> -->`, above its block; those blocks are written into a fresh project (mode 700, outside the
 * repository) that installs Baton from the run's tarball and the page's other packages at the repository's versions,
 * with no install scripts. HOME is a directory of the test's own, where the memory server keeps its graph.
 *
 * Then the page's commands, which must be on the page as run here: `npx baton dev …` until "Baton is up",
 * `npx baton run librarian …` (with `--json`, to read its reply), `npx tsx ask.mts` and the agent-harness test with
 * `node --import tsx --test`; last, the memory server's file holds the visitor the script created.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { markdownParts, markedFiles } from '../../testing/markdown-files';
import {
  baton,
  COMMAND_TIMEOUT_MS,
  createUserProject,
  describeRun,
  packedBaton,
  removeUserProject,
  ROOT,
  startBaton,
  succeed,
  userEnv,
  writeFiles,
  type Command,
} from './user-project';

const PAGE = path.join(ROOT, 'docs', 'getting-started.md');
/** The files the project is made of, each shown by the page. */
const FILES = [
  'agents/librarian.md',
  'notes.txt',
  'tools.ts',
  'mcp.json',
  'agents/model-script.yaml',
  'ask.mts',
  'test/librarian.test.ts',
];
/** The packages the page installs beside Baton and zod, at the repository's versions. */
const PACKAGES = ['tsx', '@modelcontextprotocol/server-memory'];
const QUESTION = 'When do you open on Saturday?';
const DEV_ARGS = ['dev', '--agents', 'agents', '--tools', 'tools.ts', '--mcp', 'mcp.json'];
const RUN_ARGS = ['run', 'librarian', QUESTION];
const ASK = 'npx tsx ask.mts';
const HARNESS_TEST = ['--import', 'tsx', '--test', 'test/librarian.test.ts'];
/** What the page's script has the librarian say, on its first turn and on its second. */
const SATURDAY = 'On Saturdays the reading room opens at ten o’clock.';
const WEEKDAY = 'On weekdays it opens at nine o’clock.';

/** Each command line of the page's sh blocks, without its trailing comment. */
function shellCommands(markdown: string): string[] {
  return markdownParts(markdown)
    .blocks.filter((block) => block.lang === 'sh')
    .flatMap((block) => block.body.split('\n'))
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

describe('docs/getting-started.md: the first project, built from the page and run as it says', () => {
  let project: string | undefined;
  let home: string | undefined;
  let dev: Command | undefined;
  let env: NodeJS.ProcessEnv;

  before(
    async () => {
      const page = fs.readFileSync(PAGE, 'utf8');
      const files = markedFiles(page);
      assert.deepEqual(Object.keys(files).sort(), [...FILES].sort(), 'the page marks the files of the project');
      // The commands run here are the page's: a change to either shows here.
      const commands = shellCommands(page);
      for (const command of [
        `npx baton ${DEV_ARGS.join(' ')}`,
        `npx baton ${RUN_ARGS.slice(0, 2).join(' ')} "${QUESTION}"`,
        `node ${HARNESS_TEST.join(' ')}`,
      ]) {
        assert.ok(commands.includes(command), `the page runs ${command}\n${commands.join('\n')}`);
      }
      assert.ok(page.includes(`\`${ASK}\``), `the page runs ${ASK}`);

      const tarball = await packedBaton();
      project = fs.realpathSync(await createUserProject(tarball.file, PACKAGES));
      writeFiles(project, files);
      home = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-getting-started-home-'));
      env = userEnv({ HOME: home });
      dev = startBaton(project, DEV_ARGS, env);
      await dev.waitFor(/Baton is up/);
    },
    { timeout: 3 * COMMAND_TIMEOUT_MS },
  );

  after(async () => {
    const stopped = await dev?.stop();
    if (project !== undefined) removeUserProject(project);
    if (home !== undefined) fs.rmSync(home, { recursive: true, force: true });
    if (stopped !== undefined) assert.notEqual(stopped.signal, 'SIGKILL', `Ctrl-C stops baton dev\n${stopped.stderr}`);
  });

  test('baton dev loads the tool and starts the memory server', () => {
    assert.match(dev?.stderr ?? '', /tools: opening_hours from .*tools\.ts/);
    assert.match(dev?.stderr ?? '', /^MCP: servers memory \(9 tools\) from .*mcp\.json$/m);
  });

  test('baton run gets the Saturday hours, and the memory server keeps the visitor', async () => {
    assert.ok(project !== undefined && home !== undefined);
    const run = await baton(project, [...RUN_ARGS, '--json'], env);
    const result = JSON.parse(run.stdout) as { status: string; reply: string };
    assert.equal(result.status, 'completed', run.stdout);
    assert.equal(result.reply, SATURDAY);

    const graph = fs
      .readFileSync(path.join(home, 'librarian-memory.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { type: string; name?: string; entityType?: string; observations?: string[] });
    assert.deepEqual(
      graph.filter((entry) => entry.type === 'entity' && entry.name === 'visitor'),
      [{ type: 'entity', name: 'visitor', entityType: 'person', observations: ['asked about Saturday'] }],
    );
  });

  test('ask.mts finds the baton dev of the project and holds a conversation of two turns', async () => {
    assert.ok(project !== undefined);
    const [command = '', ...args] = ASK.split(' ');
    const ask = await succeed(ASK, command, args, { cwd: project, env });
    const lines = ask.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 3, ask.stdout);
    assert.ok(
      lines[0]?.startsWith(`the baton dev in ${path.join(project, '.baton')} (pid `),
      `connectedVia names the project's .baton\n${ask.stdout}`,
    );
    assert.deepEqual(lines.slice(1), [SATURDAY, WEEKDAY]);
  });

  test("the page's agent-harness test passes against the running baton dev", async () => {
    assert.ok(project !== undefined);
    const what = `node ${HARNESS_TEST.join(' ')}`;
    const result = await succeed(what, 'node', HARNESS_TEST, { cwd: project, env });
    // Its one test ran and passed (a run that found no test would exit 0 too).
    assert.match(result.stdout, /^(#|ℹ) pass 1$/m, describeRun(what, result));
    assert.match(result.stdout, /^(#|ℹ) fail 0$/m, describeRun(what, result));
  });
});
