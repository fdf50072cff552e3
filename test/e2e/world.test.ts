/**
 * Worlds as a user manages them (issue 6): `baton world set/get/unset/import/dir`, the prompt filled from the
 * variables at every model call (a `baton world set` between two messages shows at the next call), and the shell
 * tool working in the world's `working_directory`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import type { ScriptedModelLogEntry } from '../../scripted-model';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import {
  childEnv,
  describeRun,
  freshDir,
  parseJson,
  stackEnv,
  startDev,
  type DevProcess,
  batonInProcess,
} from './cli-process';

const SCRIPT = {
  agents: {
    porter: [{ say: 'first answer' }, { say: 'second answer' }],
    runner: [{ call: 'shell', args: { command: 'pwd && cat marker.txt' } }, { say: 'ran it' }],
  },
};

describe('worlds through the CLI, with `baton dev` on the test stack', () => {
  const stateDir = freshDir('world-state');
  const agentsDir = freshDir('world-agents');
  const workDir = fs.realpathSync(freshDir('world-work'));
  const modelLog = path.join(freshDir('world-log'), 'model.jsonl');
  const freshWorld = () => `w${uniqueThreadId('x').split('-')[1]}`;
  const world = freshWorld();
  let dev: DevProcess | undefined;
  const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());

  function requests(thread: string): ScriptedModelLogEntry[] {
    return fs
      .readFileSync(modelLog, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as ScriptedModelLogEntry)
      .filter((entry) => entry.thread === thread);
  }
  const systemPrompt = (entry: ScriptedModelLogEntry | undefined): string => {
    const content = (entry?.messages as { content?: unknown }[] | undefined)?.[0]?.content;
    return typeof content === 'string' ? content : '';
  };

  before(async () => {
    fs.writeFileSync(
      path.join(agentsDir, 'porter.md'),
      '---\nname: porter\ndescription: Works on a project.\n---\n\nYou work on {{ project }} for {{owner}}.\n',
    );
    fs.writeFileSync(
      path.join(agentsDir, 'runner.md'),
      '---\nname: runner\ndescription: Runs commands.\ncapabilities: [shell]\n---\n\nYou run commands.\n',
    );
    fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), YAML.stringify(SCRIPT));
    fs.writeFileSync(path.join(workDir, 'marker.txt'), 'the marker file\n');
    dev = await startDev({
      stateDir,
      args: ['--agents', agentsDir, '--task-queue', uniqueTaskQueue('world')],
      env: stackEnv({ BATON_MODEL_LOG: modelLog }),
    });
  });

  after(async () => {
    await dev?.stop();
  });

  test('world: import, set, get and unset edit one .env text and keep its comments', async () => {
    const file = path.join(freshDir('world-import'), 'vars.env');
    fs.writeFileSync(file, '# imported\nproject = Atlas\nnot a line\n');
    const imported = await cli('world', 'import', file, '--world', world);
    assert.equal(imported.code, 0, describeRun(imported));
    assert.match(imported.stdout, /Imported 1 variable\(s\) into world/);
    assert.match(imported.stdout, /vars\.env:3 ignored: no '='/);

    assert.equal((await cli('world', 'set', 'owner=Ada', 'tmp=1', '--world', world)).code, 0);
    assert.equal((await cli('world', 'unset', 'tmp', '--world', world)).code, 0);
    const text = await cli('world', 'get', '--world', world);
    assert.equal(text.stdout, '# imported\nproject = Atlas\nnot a line\nowner=Ada\n');
    const one = await cli('world', 'get', 'owner', '--world', world, '--json');
    assert.deepEqual(parseJson(one), { world, key: 'owner', value: 'Ada' });
    const bad = await cli('world', 'set', 'no-equals-sign', '--world', world);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /is not KEY=VALUE; nothing was changed/);
  });

  test('world: the prompt is filled at every call, so `baton world set` between two messages shows at the next', async () => {
    // A world of its own, with the variables the prompt names: nothing left by the import test above.
    const world = freshWorld();
    assert.equal((await cli('world', 'set', 'project=Atlas', 'owner=Ada', '--world', world)).code, 0);
    const thread = uniqueThreadId('porter');
    const first = await cli('run', 'porter', 'Hello', '--thread', thread, '--world', world, '--json');
    assert.equal(first.code, 0, describeRun(first));
    assert.equal((await cli('world', 'set', 'project=Atlas 2', '--world', world)).code, 0);
    const second = await cli('send', thread, 'Hello again', '--json');
    assert.equal(second.code, 0, describeRun(second));

    const [one, two] = requests(thread);
    assert.ok(systemPrompt(one).startsWith('You work on Atlas for Ada.\n\n## System Context'), systemPrompt(one));
    assert.ok(systemPrompt(two).startsWith('You work on Atlas 2 for Ada.\n\n## System Context'), systemPrompt(two));
  });

  test('world: dir sets working_directory, refuses a missing directory, and the shell runs there', async () => {
    const missing = await cli('world', 'dir', path.join(workDir, 'nope'), '--world', world);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /is not an existing directory; nothing was changed/);

    const set = await cli('world', 'dir', workDir, '--world', world, '--json');
    assert.equal(set.code, 0, describeRun(set));
    assert.deepEqual(parseJson(set), { world, working_directory: workDir });

    const thread = uniqueThreadId('runner');
    const run = await cli('run', 'runner', 'Go', '--thread', thread, '--world', world);
    assert.equal(run.code, 0, describeRun(run));
    // The runner's first step runs the shell; its result reaches the model's next request.
    const toolResult = requests(thread)
      .flatMap((entry) => entry.messages as { role?: string; content?: unknown }[])
      .find((message) => message.role === 'tool');
    assert.ok(toolResult, 'the shell result reached the model');
    assert.match(String(toolResult.content), new RegExp(`${workDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n`));
    assert.match(String(toolResult.content), /the marker file/);
  });
});
