/**
 * `baton status` and `baton wake` as a user runs them, against a thread whose agent waits (`wait`): the status names
 * the wait, `wake` ends it and says so (text and `--json`), and an unknown thread is one clear error line.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ThreadStatus, WakeResult } from '../../common/types';
import { listMessages } from '../../db/transcripts';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';
import { describeRun, parseJson, stackEnv, waitFor, batonInProcess } from './cli-process';

const watcher = parseAgentFile(
  '---\nname: watcher\ndescription: Waits for the night.\n---\nYou watch.\n',
  'watcher.md',
);
const script = parseScript(
  `
agents:
  watcher:
    - call: wait
      args: { seconds: 86400, reason: "the nightly build" }
    - say: "Morning."
`,
  'wait-cli',
);

let harness: AgentHarness;
const cli = (...args: string[]) => batonInProcess(args, stackEnv({ BATON_TASK_QUEUE: harness.taskQueue }));

before(async () => {
  harness = await startTestHarness('wait-cli', { agents: new Map([['watcher', watcher]]), script });
});

after(async () => {
  await harness?.close();
});

test('baton status shows a wait, baton wake ends it (text and --json)', async () => {
  const threadId = uniqueThreadId('watcher');
  const thread = await harness.client.startThread({ agent: 'watcher', threadId });
  const reply = thread.send('Wake me in the morning.');
  reply.catch(() => undefined);
  await waitFor('the wait', async () => ((await thread.status()).waits?.length ?? 0) > 0, { timeoutMs: 30_000 });

  const text = await cli('status', threadId);
  assert.equal(text.code, 0, describeRun(text));
  const lines = text.stdout.trimEnd().split('\n');
  assert.equal(lines[0], `thread ${threadId} (watcher): 1 turn(s), running a turn`);
  assert.match(lines[1] ?? '', /^ {2}watcher is waiting until \S+Z: the nightly build$/);

  const json = await cli('status', threadId, '--json');
  assert.equal(json.code, 0, describeRun(json));
  const status = parseJson(json) as unknown as ThreadStatus;
  assert.deepEqual(
    status.waits?.map((w) => [w.agent, w.threadId, w.reason]),
    [['watcher', threadId, 'the nightly build']],
  );

  const woken = await cli('wake', threadId, '--json');
  assert.equal(woken.code, 0, describeRun(woken));
  const result = parseJson(woken) as unknown as WakeResult;
  assert.equal(result.threadId, threadId);
  assert.deepEqual(
    result.woken.map((w) => [w.agent, w.until]),
    [['watcher', status.waits?.[0]?.until]],
  );
  assert.equal((await reply).reply, 'Morning.');
  const [toolResult] = (await listMessages(harness.pool, threadId)).filter((m) => m.role === 'tool');
  assert.match(
    toolResult?.content ?? '',
    /^The wait ended early, after \d+ seconds? of the 1 day planned .*: someone woke/,
  );

  const again = await cli('wake', threadId);
  assert.equal(again.code, 0, describeRun(again));
  assert.equal(again.stdout, `Nothing in thread ${threadId} was waiting.\n`);
  await thread.end();
});

test('baton status and baton wake on an unknown thread: one clear error line, exit 1', async () => {
  for (const command of ['status', 'wake']) {
    const result = await cli(command, 'no-such-thread-here');
    assert.equal(result.code, 1, describeRun(result));
    assert.equal(result.stdout, '');
    assert.equal(result.stderr, "baton: thread 'no-such-thread-here' does not exist or has ended\n");
  }
});
