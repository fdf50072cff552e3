/**
 * `baton schedule create` with bad input, as a user types it: each mistake exits 1 with one clear line and no
 * schedule is created. No worker is needed: everything is checked before Temporal is asked to create anything.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { uniqueThreadId } from '../../testing/test-env';
import { baton, describeRun, parseJsonArray, stackEnv } from './cli-process';

const cli = (...args: string[]) => baton(args, stackEnv());

test('schedule: bad input gets a clear error and creates nothing', async () => {
  const threadId = uniqueThreadId('nosuch');
  const name = `bad-${randomBytes(3).toString('hex')}`;
  const cases: [string[], RegExp][] = [
    [
      ['--agent', 'greeter', '--cron', '61 * * * *', '--new-thread'],
      /^baton: invalid cron '61 \* \* \* \*': minute field '61' has '61' outside 0-59\n$/,
    ],
    [['--agent', 'nosuchagent', '--every', '1h', '--new-thread'], /^baton: unknown agent 'nosuchagent': no worker/],
    [
      ['--agent', 'greeter', '--every', '10s', '--new-thread'],
      /^baton: --every 10s is below the minimum interval of 1m\n$/,
    ],
    [['--agent', 'greeter', '--every', '1h'], /^baton: give exactly one of --thread <id> .* and --new-thread\n$/],
    [['--every', '1h', '--thread', threadId], new RegExp(`^baton: thread '${threadId}' does not exist\\n$`)],
  ];
  for (const [args, error] of cases) {
    const result = await cli('schedule', 'create', name, '--message', 'm', ...args, '--json');
    assert.equal(result.code, 1, describeRun(result));
    assert.equal(result.stdout, '', describeRun(result));
    assert.match(result.stderr, error);
  }
  const listed = parseJsonArray(await cli('schedule', 'list', '--json'));
  assert.deepEqual(
    listed.filter((row) => row.name === name),
    [],
    'nothing was created',
  );
  const missing = await cli('schedule', 'describe', name);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, new RegExp(`there is no schedule '${name}'`));
});
