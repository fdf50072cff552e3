/**
 * The README's table of CLI commands names every command the `baton` program has: the program's own help (run in this
 * process through `runCli`) is the list, so a new command without a row fails here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../cli/program';

const ROOT = path.resolve(__dirname, '..', '..');

test('cli reference: every command of `baton --help` has a row in the README table of commands', async () => {
  let help = '';
  const code = await runCli(['--help'], {
    stdout: { write: (text: string) => (help += text) },
    stderr: { write: () => true },
    env: {},
    cwd: ROOT,
  });
  assert.equal(code, 0);
  const commands = [...(help.split('Commands:')[1] ?? '').matchAll(/^ {2}([a-z][a-z-]*)\b/gm)]
    .map((match) => match[1] ?? '')
    .filter((name) => name !== 'help');
  assert.ok(commands.length >= 20 && commands.includes('run') && commands.includes('setup'), commands.join(' '));
  const rows = fs
    .readFileSync(path.join(ROOT, 'docs', 'guides', 'cli.md'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| `baton '));
  const missing = commands.filter((name) => !rows.some((row) => row.includes(`\`baton ${name}`)));
  assert.deepEqual(missing, [], 'commands without a row in the README');
});
