/**
 * The file tools under `baton dev` never show its state directory (`.baton/`: stack.json with the database password,
 * the token files): not when the files root is the project, not when a world's working directory holds the project,
 * not through `..`, a symlink to the file or to the directory, or a listing. Real turns: `baton dev` on the test
 * stack, a scripted model asking for every path, and what came back read from the model's own requests.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import type { ScriptedModelLogEntry } from '../../scripted-model';
import { stackFileSchema } from '../../stack/stack-file';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { baton, childEnv, describeRun, freshDir, stackEnv, startDev, type DevProcess } from './cli-process';

/** What a model asks for from the project (the files root). */
const FROM_PROJECT = [
  { call: 'read_file', args: { path: '.baton/stack.json' } },
  { call: 'read_file', args: { path: 'src/../.baton/stack.json' } },
  { call: 'read_file', args: { path: 'peek.json' } },
  { call: 'read_file', args: { path: 'state/stack.json' } },
  { call: 'list_files', args: { path: '.baton' } },
  { call: 'list_files', args: { path: 'state' } },
  { call: 'list_files', args: { path: '.', recursive: true } },
  { call: 'read_file', args: { path: 'src/notes.txt' } },
];

/** What a model asks for from the directory holding the project (its world's working directory). */
const FROM_ABOVE = [
  { call: 'read_file', args: { path: 'project/.baton/stack.json' } },
  { call: 'read_file', args: { path: 'project/peek.json' } },
  { call: 'list_files', args: { path: 'project/.baton' } },
  { call: 'list_files', args: { path: '.', recursive: true } },
];

const SCRIPT = {
  agents: {
    snoop: [{ calls: FROM_PROJECT }, { say: 'Looked around the project.' }],
    neighbour: [{ calls: FROM_ABOVE }, { say: 'Looked around from above.' }],
  },
};

const HIDDEN = /^Error: Path '.*' is in a directory hidden from the file tools .*cannot be read or listed/;

describe('the file tools under `baton dev` keep its state directory hidden', () => {
  /** base/project/{.baton/, src/notes.txt, peek.json -> .baton/stack.json, state -> .baton} */
  const base = fs.realpathSync(freshDir('files-state-base'));
  const project = path.join(base, 'project');
  const stateDir = path.join(project, '.baton');
  const agentsDir = freshDir('files-state-agents');
  const modelLog = path.join(freshDir('files-state-log'), 'model.jsonl');
  const world = `w${uniqueThreadId('x').split('-')[1]}`;
  let dev: DevProcess | undefined;
  const cli = (...args: string[]) => baton(['--state-dir', stateDir, ...args], childEnv());

  /**
   * The tool results of `thread`'s first step, in the order of its calls (the scripted model numbers a reply's call
   * ids by their place, `call_<agent>_<step>_<index>`), as the model's next request holds them.
   */
  function toolResults(thread: string, calls: number): string[] {
    const requests = fs
      .readFileSync(modelLog, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as ScriptedModelLogEntry)
      .filter((entry) => entry.thread === thread);
    const second = requests[1]?.messages as { role?: string; content?: unknown; tool_call_id?: string }[] | undefined;
    assert.ok(second, `the model was asked again after the tool calls of ${thread}`);
    const results = second.filter((message) => message.role === 'tool');
    assert.equal(results.length, calls);
    const index = (message: { tool_call_id?: string }) => Number(message.tool_call_id?.split('_').at(-1));
    results.sort((a, b) => index(a) - index(b));
    assert.deepEqual(results.map(index), [...Array(calls).keys()], 'one result per call, by its place');
    return results.map((message) => String(message.content));
  }

  /** The secrets the stack file holds, and the file's own field names: none may reach the model. */
  function secrets(): string[] {
    const stack = stackFileSchema.parse(JSON.parse(fs.readFileSync(path.join(stateDir, 'stack.json'), 'utf8')));
    const password = decodeURIComponent(new URL(stack.databaseUrl).password);
    return [stack.databaseUrl, '"databaseUrl"', '"temporalAddress"', ...(password ? [password] : [])];
  }

  before(async () => {
    fs.mkdirSync(path.join(project, 'src'), { recursive: true });
    fs.writeFileSync(path.join(project, 'src', 'notes.txt'), 'the project notes\n');
    // Links a command in the project could make: to the stack file, and to the whole directory.
    fs.symlinkSync(path.join('.baton', 'stack.json'), path.join(project, 'peek.json'));
    fs.symlinkSync('.baton', path.join(project, 'state'));
    for (const name of ['snoop', 'neighbour']) {
      fs.writeFileSync(
        path.join(agentsDir, `${name}.md`),
        `---\nname: ${name}\ndescription: Looks at files.\ncapabilities: [read_file, list_files]\n---\n\nLook.\n`,
      );
    }
    fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), YAML.stringify(SCRIPT));
    // The files root is the project, with the stack's state directory in it, as when `baton dev` runs there.
    dev = await startDev({
      stateDir,
      args: ['--agents', agentsDir, '--task-queue', uniqueTaskQueue('files-state')],
      env: stackEnv({ BATON_MODEL_LOG: modelLog, BATON_FILES_ROOT: project }),
    });
  });

  after(async () => {
    await dev?.stop();
  });

  test('files state: from the project, no path, link or listing shows the state directory', async () => {
    const thread = uniqueThreadId('snoop');
    const run = await cli('run', 'snoop', 'Look around.', '--thread', thread);
    assert.equal(run.code, 0, describeRun(run));
    const results = toolResults(thread, FROM_PROJECT.length);
    for (const result of results) {
      for (const secret of secrets()) assert.ok(!result.includes(secret), `a tool result shows ${secret}:\n${result}`);
    }
    const [direct, dotDot, fileLink, dirLink, listed, listedLink, whole, notes] = results;
    for (const refused of [direct, dotDot, fileLink, dirLink, listed, listedLink]) assert.match(refused ?? '', HIDDEN);
    assert.deepEqual(whole?.split('\n'), ['peek.json', 'src/', 'src/notes.txt', 'state']);
    assert.equal(notes, 'the project notes\n', 'the rest of the project reads as before');
  });

  test('files state: a world whose directory holds the project lists it without the state directory', async () => {
    const set = await cli('world', 'dir', base, '--world', world);
    assert.equal(set.code, 0, describeRun(set));
    const thread = uniqueThreadId('neighbour');
    const run = await cli('run', 'neighbour', 'Look around.', '--thread', thread, '--world', world);
    assert.equal(run.code, 0, describeRun(run));
    const results = toolResults(thread, FROM_ABOVE.length);
    for (const result of results) {
      for (const secret of secrets()) assert.ok(!result.includes(secret), `a tool result shows ${secret}:\n${result}`);
    }
    const [direct, link, listed, whole] = results;
    for (const refused of [direct, link, listed]) assert.match(refused ?? '', HIDDEN);
    assert.deepEqual(whole?.split('\n'), [
      'project/',
      'project/peek.json',
      'project/src/',
      'project/src/notes.txt',
      'project/state',
    ]);
  });
});
