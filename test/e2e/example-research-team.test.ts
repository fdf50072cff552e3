/**
 * The example project examples/research-team, run as its README says, on the real stack with its scripted model: a
 * copy outside the repository installs its dependencies (Baton linked from this checkout, the filesystem MCP server
 * from npm), `npx baton dev` starts the stack with the project's MCP configuration, and `npx baton run lead …` gets
 * the answer. The lead's fork runs three researchers at once, each reading its source through the MCP server into a
 * store of its own; the join merges their findings into the shared data, and the writer answers from them. What the
 * run did is read back through the SDK, and the README's `tree`, `env` and `transcript` commands are run as printed.
 *
 * The copy installs with `--ignore-scripts`: npm then skips the linked checkout's `prepare`, which would build dist/
 * in the checkout while test/e2e/package.test.ts (run at the same time by `npm test`) builds or packs it too, and two
 * builds at once remove each other's files. Nothing here needs dist/: a linked checkout's bin runs its sources.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, type BatonClient, type TranscriptMessage } from '../../client';
import type { ForkTaskRow } from '../../db/forks';
import { readModelLog, requestStep } from '../../testing/harness';
import {
  baton,
  type Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  type Finished,
  installExample,
  ROOT,
  scriptedFinalSay,
  startDev,
  stopExample,
} from './user-project';

const EXAMPLE = path.join(ROOT, 'examples', 'research-team');
const QUESTION = 'Why did sign-ups drop in the week of 10 March?';
const THREAD = 'signups';
const DEV_ARGS = ['--agents', 'agents', '--mcp', 'mcp.json', '--model-script', 'agents/model-script.yaml'];
/** The fork's tasks in order, each with the source its researcher reads. */
const RESEARCHERS = [
  { agent: 'analytics_researcher', source: 'analytics.md' },
  { agent: 'support_researcher', source: 'support-tickets.md' },
  { agent: 'release_researcher', source: 'release-notes.md' },
];
const FINDINGS = ['research/1/findings', 'research/2/findings', 'research/3/findings'];
/** The commands of the README that look at the run, each with what its output must show. */
const LOOK_COMMANDS: [string[], RegExp[]][] = [
  [
    ['tree', THREAD],
    [
      /fork 1 {2}isolated → research\/ {2}success {2}\(3 of 3 succeeded/,
      ...RESEARCHERS.map(({ agent }, index) => new RegExp(`\\[task ${index + 1}: success\\] ${agent} {2}completed`)),
      ...FINDINGS.map((key) => new RegExp(`merged 1 key \\(${key}\\)`)),
      /writer {2}completed/,
    ],
  ],
  [
    ['env', THREAD],
    FINDINGS.map((key) => new RegExp(`^${key} .* (analytics|support|release)_researcher \\(fork 1`, 'm')),
  ],
  [['transcript', `${THREAD}/analytics_researcher-1`], [/files__read_text_file.*# Sign-ups, weekly dashboard/]],
];

const finalSay = (agent: string): string => scriptedFinalSay('research-team', agent);

/** The result the transcript stored for each call of `tool`, in order. */
function toolResults(messages: readonly TranscriptMessage[], tool: string): (string | null)[] {
  const ids = messages.flatMap((message) =>
    (message.toolCalls ?? []).filter((call) => call.name === tool).map((call) => call.id),
  );
  return ids.map(
    (id) => messages.find((message) => message.role === 'tool' && message.toolCallId === id)?.content ?? null,
  );
}

describe('the example project (examples/research-team), run as its README says', () => {
  let example: string;
  let dev: Command | undefined;
  let client: BatonClient | undefined;
  /** What `npx baton run lead …` printed. */
  let run: Finished;
  const modelLog = () => path.join(example, 'model-requests.jsonl');
  const sdk = (): BatonClient => {
    assert.ok(client, 'connected to the stack of baton dev');
    return client;
  };
  const source = (file: string) => fs.readFileSync(path.join(example, 'sources', file), 'utf8');

  before(
    async () => {
      const readme = fs.readFileSync(path.join(EXAMPLE, 'README.md'), 'utf8');
      // The commands run here are the README's: a change to either shows here.
      assert.ok(readme.includes(`npx baton dev ${DEV_ARGS.join(' ')}`), 'the README starts baton dev as here');
      assert.ok(readme.includes(`npx baton run lead "${QUESTION}" --thread ${THREAD}`), 'the README asks as here');
      for (const [args] of LOOK_COMMANDS) {
        assert.ok(readme.includes(`npx baton ${args.join(' ')}`), `the README runs npx baton ${args.join(' ')}`);
      }
      example = copyExampleProject('research-team');
      await installExample(example);
      let stack;
      ({ dev, stack } = await startDev(example, DEV_ARGS, modelLog()));
      client = await connect({
        address: stack.temporalAddress,
        taskQueue: stack.taskQueue,
        databaseUrl: stack.databaseUrl,
      });
      run = await baton(example, ['run', 'lead', QUESTION, '--thread', THREAD, '--json']);
    },
    { timeout: 3 * COMMAND_TIMEOUT_MS },
  );

  after(async () => {
    await client?.close();
    await stopExample('baton dev', dev, example);
  });

  test('it pins the filesystem MCP server the repository tests against, and baton dev starts it', () => {
    const versionIn = (file: string, field: 'dependencies' | 'devDependencies') =>
      (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, Record<string, string>>)[field]?.[
        '@modelcontextprotocol/server-filesystem'
      ];
    const pinned = versionIn(path.join(ROOT, 'package.json'), 'devDependencies');
    assert.match(pinned ?? '', /^\d+\.\d+\.\d+$/);
    assert.equal(versionIn(path.join(EXAMPLE, 'package.json'), 'dependencies'), pinned);
    assert.match(dev?.stderr ?? '', /^MCP: servers files \(2 tools\) from .*mcp\.json$/m);
  });

  test("the lead's reply is the writer's answer", () => {
    const result = JSON.parse(run.stdout) as { status: string; reply: string };
    assert.equal(result.status, 'completed', run.stdout);
    const answer = finalSay('writer');
    assert.match(answer, /release 4\.12/);
    assert.equal(result.reply, answer);
  });

  test('the fork ran its three researchers, each reading its source through the MCP server', async () => {
    const thread = sdk().thread(THREAD);
    const forks = await thread.forks();
    assert.equal(forks.length, 1, 'one fork');
    const [fork] = forks;
    assert.equal(fork?.status, 'success');
    assert.equal(fork?.store, 'isolated');
    assert.equal(fork?.prefix, 'research');
    assert.deepEqual(
      fork?.tasks.map((task) => [task.taskIndex, task.agent, task.status]),
      RESEARCHERS.map(({ agent }, index) => [index + 1, agent, 'success']),
    );
    const requests = readModelLog(modelLog());
    for (const [index, { agent, source: file }] of RESEARCHERS.entries()) {
      const task: ForkTaskRow | undefined = fork?.tasks[index];
      assert.ok(task, `task ${index + 1}`);
      // The transcript holds the server's result: the file's text (the scripted model never saw the file).
      const transcript: TranscriptMessage[] = await sdk().thread(task.threadId).transcript();
      assert.deepEqual(
        toolResults(transcript, 'files__read_text_file'),
        [JSON.stringify({ content: source(file) })],
        `${agent} read ${file} through the MCP server`,
      );
      assert.deepEqual(toolResults(transcript, 'store_env_data'), ["Stored 'findings' in environment data."]);
      // And the model's next request carried it.
      const second = requests.find((request) => request.agent === agent && requestStep(request) === 2);
      const result = second?.messages.find((message) => message.role === 'tool');
      assert.equal(result?.content, JSON.stringify({ content: source(file) }), `${agent}'s model read ${file}`);
    }
  });

  test('the findings merged into the shared data, and the writer answered from them', async () => {
    const thread = sdk().thread(THREAD);
    const manifest = await thread.envData();
    assert.deepEqual(
      manifest.map((entry) => [entry.key, entry.storedBy.agent, entry.storedByTask]),
      RESEARCHERS.map(({ agent }, index) => [FINDINGS[index], agent, `fork 1 task ${index + 1}`]),
    );
    const findings = await Promise.all(FINDINGS.map(async (key) => (await thread.envGet(key))?.value));
    assert.deepEqual(
      findings.map((value) => (value as { source?: string } | undefined)?.source),
      RESEARCHERS.map(({ source: file }) => file),
    );

    const tree = await thread.tree();
    assert.equal(tree.status, 'completed');
    assert.deepEqual(
      tree.children.map((child) => child.agent).sort(),
      [...RESEARCHERS.map(({ agent }) => agent), 'writer'].sort(),
    );
    const writer = tree.children.find((child) => child.agent === 'writer');
    assert.ok(writer, 'the writer ran as a delegation of the lead');
    assert.equal(writer.status, 'completed');
    const transcript = await sdk().thread(writer.threadId).transcript();
    assert.deepEqual(
      toolResults(transcript, 'get_env_data').map((content) => JSON.parse(content ?? 'null') as unknown),
      findings,
      'the writer read the merged findings',
    );
    assert.equal(transcript.filter((message) => message.role === 'assistant').at(-1)?.content, finalSay('writer'));
  });

  test("the README's commands show the fork, the findings and what the MCP server returned", async () => {
    for (const [args, patterns] of LOOK_COMMANDS) {
      const { stdout } = await baton(example, args);
      for (const pattern of patterns) assert.match(stdout, pattern, `npx baton ${args.join(' ')}`);
    }
  });
});
