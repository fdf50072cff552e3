/**
 * `baton replay` as a user runs it: recorded histories replay against the local workflow code; a deliberately changed
 * workflow (test/replay/fixtures/reordered-turn.ts) fails with the determinism error and the history event it names;
 * a conversation that just ran is fetched from the server by workflow id and replays.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { uniqueThreadId } from '../../testing/test-env';
import { ROOT, baton, childEnv, describeRun, parseJsonArray, stackEnv } from './cli-process';

const HISTORY = path.join(ROOT, 'test', 'replay', 'histories', 'greeter-two-turns.turn-1.1.json');
const THREAD_HISTORY = path.join(ROOT, 'test', 'replay', 'histories', 'greeter-two-turns.thread.0.json');
const REORDERED = path.join(ROOT, 'test', 'replay', 'fixtures', 'reordered-turn.ts');
const REPLAY_TIMEOUT_MS = 180_000;

describe('baton replay', () => {
  test('replay: recorded histories replay against the local workflows, one line each', async () => {
    const result = await baton(['replay', HISTORY, THREAD_HISTORY], childEnv(), REPLAY_TIMEOUT_MS);
    assert.equal(result.code, 0, describeRun(result));
    assert.match(result.stdout, /^ok +agentTurnWorkflow +greeter-two-turns\.turn-1\.1\.json +\(\d+ events, /m);
    assert.match(result.stdout, /^ok +threadWorkflow +greeter-two-turns\.thread\.0\.json/m);
    assert.match(result.stdout, /^2 workflows replayed against the local code\.$/m);
  });

  test('replay: a deliberately reordered turn workflow fails with the determinism error and its event (--json)', async () => {
    const result = await baton(['replay', HISTORY, '--workflows', REORDERED, '--json'], childEnv(), REPLAY_TIMEOUT_MS);
    assert.equal(result.code, 1, describeRun(result));
    const [outcome] = parseJsonArray(result) as {
      ok: boolean;
      workflowType: string;
      error?: { name: string; message: string; event?: { eventId: number; eventType: string } };
    }[];
    assert.equal(outcome?.ok, false);
    assert.equal(outcome?.workflowType, 'agentTurnWorkflow');
    assert.equal(outcome?.error?.name, 'DeterminismViolationError');
    assert.match(outcome?.error?.message ?? '', /does not match/);
    assert.equal(outcome?.error?.event?.eventType, 'ActivityTaskScheduled');
    assert.ok((outcome?.error?.event?.eventId ?? 0) > 0);

    const text = await baton(['replay', HISTORY, '--workflows', REORDERED], childEnv(), REPLAY_TIMEOUT_MS);
    assert.equal(text.code, 1, describeRun(text));
    assert.match(text.stdout, /^FAILED +agentTurnWorkflow/m);
    assert.match(text.stdout, /determinism error: .*does not match/);
    assert.match(text.stdout, /at history event \d+ \(ActivityTaskScheduled /);
    assert.match(text.stdout, /1 of 1 failed to replay/);
  });

  describe('from the server', () => {
    let harness: AgentHarness | undefined;
    const threadId = uniqueThreadId('replay');

    before(async () => {
      harness = await startTestHarness('replay-cli', {
        agents: path.join(ROOT, 'examples', 'arc-team', 'agents'),
        script: parseScript('agents:\n  greeter:\n    - say: Hello from the replay test.\n', 'replay-cli script'),
      });
      const thread = await harness.client.startThread({ agent: 'greeter', threadId });
      await thread.send('Hi');
    });

    after(async () => {
      await harness?.close();
    });

    test('replay: a workflow id fetches its history from the server and replays it', async () => {
      const result = await baton(
        ['replay', `baton/${threadId}/turn-1`, `baton/${threadId}`, '--json'],
        stackEnv(),
        REPLAY_TIMEOUT_MS,
      );
      assert.equal(result.code, 0, describeRun(result));
      const outcomes = parseJsonArray(result);
      assert.deepEqual(
        outcomes.map((o) => [o.workflowId, o.workflowType, o.source, o.ok]),
        [
          [`baton/${threadId}/turn-1`, 'rootTurnWorkflow', 'server', true],
          [`baton/${threadId}`, 'threadWorkflow', 'server', true],
        ],
      );
    });

    test('replay: an unknown workflow id exits 1 saying so', async () => {
      const result = await baton(['replay', 'baton/no-such-thread'], stackEnv(), REPLAY_TIMEOUT_MS);
      assert.equal(result.code, 1, describeRun(result));
      assert.match(result.stderr, /cannot fetch the history of 'baton\/no-such-thread'/);
    });
  });
});
