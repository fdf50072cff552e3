/**
 * The example project examples/coding-agent, run as its README says, on the real stack with its scripted model: a
 * copy outside the repository installs its dependencies (Baton linked from this checkout, the filesystem MCP server
 * from npm), `npm start` runs `baton dev` with the project's MCP configuration, `npx baton world dir workspace` gives
 * the world its working directory, and `npx baton run coder …` starts the task. The agent's write through the MCP
 * server and its shell command each wait for `baton approve`; nothing runs before its approval, the file holds what
 * the agent wrote, and the command's output in the transcript is what it printed inside the bubblewrap sandbox.
 *
 * The copy installs with `--ignore-scripts`: npm then skips the linked checkout's `prepare`, which would build dist/
 * in the checkout while other files of `npm test` build or pack it too, and two builds at once remove each other's
 * files. Nothing here needs dist/: the example has no code of its own, and a linked checkout's bin runs its sources.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  baton,
  type Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  installExample,
  npmStart,
  ROOT,
  startBaton,
  stopExample,
} from './user-project';

const EXAMPLE = path.join(ROOT, 'examples', 'coding-agent');
const THREAD = 'fix-greeting';
const TASK = 'test.sh fails: fix greet.sh so that both of its checks pass.';
const FIXED = ['#!/bin/sh', '# Greets the person named by the first argument, or the world when none is.'];
const COMMAND = 'sh test.sh && ls -A ..';

interface Approval {
  approvalId: string;
  tool: string;
  arguments: string;
  status: string;
}
interface Message {
  role: string;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[] | null;
  toolCallId: string | null;
}

/** The result the transcript stored for each call of `tool`, in order (null while a call has none). */
function toolResults(messages: readonly Message[], tool: string): (string | null)[] {
  const ids = messages.flatMap((message) =>
    (message.toolCalls ?? []).filter((call) => call.name === tool).map((call) => call.id),
  );
  return ids.map(
    (id) => messages.find((message) => message.role === 'tool' && message.toolCallId === id)?.content ?? null,
  );
}

describe('the example project (examples/coding-agent), run as its README says', () => {
  let example: string;
  let start: Command | undefined;

  before(
    async () => {
      const readme = fs.readFileSync(path.join(EXAMPLE, 'README.md'), 'utf8');
      // The commands below are the README's: a change to either shows here.
      for (const command of [
        'npm start',
        'npx baton world dir workspace',
        `npx baton run coder "${TASK}" --thread ${THREAD}`,
        `npx baton approve ${THREAD} a1`,
        `npx baton approve ${THREAD} a2`,
      ]) {
        assert.ok(readme.includes(command), `the README runs ${command}`);
      }
      example = copyExampleProject('coding-agent');
      await installExample(example);
      start = await npmStart(example);
    },
    { timeout: 2 * COMMAND_TIMEOUT_MS },
  );

  after(() => stopExample('npm start', start, example));

  /** The approvals of the thread (`--all`: decided ones too), once `count` of them exist. */
  async function approvalsOnceThereAre(count: number, run: Command): Promise<Approval[]> {
    for (const deadline = Date.now() + COMMAND_TIMEOUT_MS; ;) {
      // Before the run's first message reaches the worker the thread does not exist and the listing fails.
      const listed = await baton(example, ['approvals', THREAD, '--all', '--json']).catch(() => undefined);
      const approvals = listed === undefined ? [] : (JSON.parse(listed.stdout) as Approval[]);
      if (approvals.length >= count) return approvals;
      assert.ok(Date.now() < deadline, `no approval a${count} was asked for\n${run.stdout}\n${run.stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  async function transcript(): Promise<Message[]> {
    return JSON.parse((await baton(example, ['transcript', THREAD, '--json'])).stdout) as Message[];
  }

  test('it pins the filesystem MCP server the repository tests against', () => {
    const pinnedIn = (file: string, field: 'dependencies' | 'devDependencies') =>
      (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, Record<string, string> | undefined>)[field]?.[
        '@modelcontextprotocol/server-filesystem'
      ];
    const pinned = pinnedIn(path.join(ROOT, 'package.json'), 'devDependencies');
    assert.match(pinned ?? '', /^\d+\.\d+\.\d+$/);
    assert.equal(pinnedIn(path.join(EXAMPLE, 'package.json'), 'dependencies'), pinned);
  });

  test('the write and the shell command each wait for baton approve, then run: the file, the sandboxed output, the reply', async () => {
    const devOutput = start?.stderr ?? '';
    assert.match(devOutput, /shell: commands run in a bubblewrap sandbox/, 'the worker sandboxes the shell');
    assert.match(
      devOutput,
      /MCP: servers files \(\d+ tools\) from .*mcp\.json/,
      'baton dev started the filesystem server',
    );

    const world = await baton(example, ['world', 'dir', 'workspace', '--json']);
    const workspace = path.join(example, 'workspace');
    assert.equal(
      (JSON.parse(world.stdout) as { working_directory: string }).working_directory,
      fs.realpathSync(workspace),
    );
    const original = fs.readFileSync(path.join(workspace, 'greet.sh'), 'utf8');

    const run = startBaton(example, ['run', 'coder', TASK, '--thread', THREAD, '--json']);

    // a1: the write, through the MCP server. The two reads before it needed no one.
    const first = await approvalsOnceThereAre(1, run);
    assert.deepEqual(
      first.map((approval) => [approval.approvalId, approval.tool, approval.status]),
      [['a1', 'files__write_file', 'pending']],
    );
    const write = JSON.parse(first[0]?.arguments ?? '{}') as { path: string; content: string };
    assert.equal(write.path, 'greet.sh');
    assert.deepEqual(write.content.split('\n').slice(0, 2), FIXED);
    assert.equal(fs.readFileSync(path.join(workspace, 'greet.sh'), 'utf8'), original, 'nothing written before a1');

    assert.equal((await baton(example, ['approve', THREAD, 'a1'])).stdout, 'a1 approved.\n');

    // a2: the shell command. The file holds what the agent wrote; the command has not run.
    const second = await approvalsOnceThereAre(2, run);
    assert.deepEqual(
      second.map((approval) => [approval.approvalId, approval.tool, approval.status]),
      [
        ['a1', 'files__write_file', 'approved'],
        ['a2', 'shell', 'pending'],
      ],
    );
    assert.deepEqual(JSON.parse(second[1]?.arguments ?? '{}'), { command: COMMAND });
    assert.equal(fs.readFileSync(path.join(workspace, 'greet.sh'), 'utf8'), write.content, 'the agent wrote greet.sh');
    const waiting = await transcript();
    assert.deepEqual(
      toolResults(waiting, 'files__read_text_file').map(
        (result) => (JSON.parse(result ?? '{}') as { content: string }).content,
      ),
      [original, fs.readFileSync(path.join(workspace, 'test.sh'), 'utf8')],
      'both files were read, with no approval',
    );
    assert.deepEqual(toolResults(waiting, 'shell'), [null], 'the command did not run before a2');

    assert.equal((await baton(example, ['approve', THREAD, 'a2'])).stdout, 'a2 approved.\n');
    const finished = await run.finished();
    assert.equal(finished.code, 0, finished.stderr);
    const reply = (JSON.parse(finished.stdout) as { reply: string }).reply;
    assert.match(reply, /^greet\.sh now ends its greeting with "!"/);

    // The command's output: the tests pass, and the sandbox shows nothing of the project around workspace/ (outside
    // it, `ls -A ..` in workspace/ would list agents, mcp.json, package.json, .baton…).
    const [output] = toolResults(await transcript(), 'shell');
    assert.ok(output !== null && output !== undefined, 'the command ran');
    assert.match(output, /ok: greet\.sh 'Ada' says Hello, Ada!\nok: greet\.sh '' says Hello, world!\nworkspace\n/);
    assert.doesNotMatch(output, /mcp\.json|package\.json|agents|\.baton/);
    assert.ok(fs.readdirSync(example).includes('mcp.json'), 'outside the sandbox, the project is there');
  });
});
