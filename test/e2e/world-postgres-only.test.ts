/**
 * `baton world` touches only Postgres (issue 13, defect 10): it works with no Temporal server at all, and it checks
 * its arguments before connecting to anything, so a bad argument is reported as such even with nothing running.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { baton, childEnv, describeRun, env, freshDir, parseJson, batonInProcess } from './cli-process';

/** Postgres only: no TEMPORAL_ADDRESS, and a state directory with no stack file. */
function postgresOnly(stateDir: string) {
  return (...args: string[]) =>
    batonInProcess(['--state-dir', stateDir, ...args], childEnv({ DATABASE_URL: env.databaseUrl }));
}

test('baton world: get, set, unset, import and dir work with DATABASE_URL and no Temporal server', async () => {
  const dir = freshDir('world-pg');
  const cli = postgresOnly(dir);
  const world = `pg-only-${process.pid}`;
  const set = await cli('world', 'set', '--world', world, 'GREETING=hello', 'COLOR=blue');
  assert.equal(set.code, 0, describeRun(set));
  const got = await cli('world', 'get', '--world', world, '--json');
  assert.equal(got.code, 0, describeRun(got));
  assert.deepEqual(parseJson(got).variables, { GREETING: 'hello', COLOR: 'blue' });
  const unset = await cli('world', 'unset', '--world', world, 'COLOR');
  assert.equal(unset.code, 0, describeRun(unset));
  const file = path.join(dir, 'vars.env');
  fs.writeFileSync(file, 'A=1\rB=2\n');
  const imported = await cli('world', 'import', '--world', world, file, '--json');
  assert.equal(imported.code, 0, describeRun(imported));
  assert.deepEqual(parseJson(imported).variables, { A: '1', B: '2' });
  const workdir = await cli('world', 'dir', '--world', world, dir);
  assert.equal(workdir.code, 0, describeRun(workdir));

  // A Temporal address that answers nothing changes nothing either: it is never dialled.
  const unreachable = await baton(
    ['--state-dir', dir, 'world', 'get', '--world', world, '--json'],
    childEnv({ DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: '127.0.0.1:1' }),
  );
  assert.equal(unreachable.code, 0, describeRun(unreachable));
});

test('baton world: bad arguments are reported before anything is connected', async () => {
  const dir = freshDir('world-args');
  // No database at all: whatever is wrong with the arguments is what the user hears.
  const cli = (...args: string[]) => baton(['--state-dir', dir, ...args], childEnv());
  const badName = await cli('world', 'set', '1nvalid=x');
  assert.notEqual(badName.code, 0);
  assert.match(badName.stderr, /variable name '1nvalid' must start with a letter/);
  const badWorld = await cli('world', 'get', '--world', 'Not A World');
  assert.notEqual(badWorld.code, 0);
  assert.match(badWorld.stderr, /world name 'Not A World' must be lowercase/);
  const nulFile = path.join(dir, 'nul.env');
  fs.writeFileSync(nulFile, 'A=1\nB=x\u0000y\n');
  const nul = await cli('world', 'import', nulFile);
  assert.notEqual(nul.code, 0);
  assert.match(
    nul.stderr,
    /nul\.env: line 2 holds a NUL character \(U\+0000\), which cannot be stored; nothing was changed/,
  );
  const badUnset = await cli('world', 'unset', 'no spaces');
  assert.notEqual(badUnset.code, 0);
  assert.match(badUnset.stderr, /variable name 'no spaces'/);
  // With valid arguments and no database, the message says what is missing.
  const noDatabase = await cli('world', 'get');
  assert.notEqual(noDatabase.code, 0);
  assert.match(noDatabase.stderr, /DATABASE_URL/);
});
