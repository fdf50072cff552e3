/**
 * The example project examples/support-desk, run as its README says, with Baton as a user gets it: the run's tarball
 * (`packedBaton`), the example copied out of the repository with its `"baton": "file:../.."` changed to that tarball,
 * `npm install` and `npm start` (`baton dev` with the example's tools). Its refund waits for an approval given with
 * `baton approve` and runs once; a second one waits through a stop and restart of the whole stack, and the repeated
 * `baton run` under its message id gets the reply without a second turn. Last, its tools type-check against the
 * installed declarations.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  baton,
  Command,
  COMMAND_TIMEOUT_MS,
  copyExampleProject,
  installExample,
  npmStart,
  packedBaton,
  startBaton,
  stopExample,
  succeed,
  userEnv,
} from './user-project';

describe('the example project (examples/support-desk), run as its README says', () => {
  let example: string;
  let start: Command | undefined;

  before(
    async () => {
      // The README installs Baton linked from the repository root; here it comes from the run's tarball instead, as a
      // project of one's own gets it (and a linked install's build would remove the dist/ other files run from).
      const tarball = await packedBaton();
      example = copyExampleProject('support-desk', ['refunds.jsonl'], `file:${tarball.file}`);
      await installExample(example);
      assert.ok(
        !fs.lstatSync(path.join(example, 'node_modules', 'baton')).isSymbolicLink(),
        'Baton is installed from the tarball, not linked to the checkout',
      );
      start = await npmStart(example);
    },
    { timeout: 2 * COMMAND_TIMEOUT_MS },
  );

  after(() => stopExample('npm start', start, example));

  interface PendingApproval {
    approvalId: string;
    tool: string;
    arguments: string;
  }

  /** The approvals `thread` waits for, once there is one (`baton approvals --json`); fails when `run` ends first. */
  async function pendingApprovals(thread: string, run: Command): Promise<PendingApproval[]> {
    for (const deadline = Date.now() + COMMAND_TIMEOUT_MS; ;) {
      assert.ok(Date.now() < deadline, `no approval was asked for\n${run.stderr}`);
      const listed = await baton(example, ['approvals', thread, '--json']).catch(() => undefined);
      const pending = listed === undefined ? [] : (JSON.parse(listed.stdout) as PendingApproval[]);
      if (pending.length > 0) return pending;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** The refunds `data/refunds.jsonl` holds, in the order they were issued. */
  function refundsIssued(): Record<string, unknown>[] {
    const refunds = path.join(example, 'data', 'refunds.jsonl');
    if (!fs.existsSync(refunds)) return [];
    return fs
      .readFileSync(refunds, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  const MESSAGE = 'Order 1042 arrived broken, can I get my money back?';
  const REPLY = 'I am sorry your teapot arrived broken, Ana: I refunded the 34.90 EUR you paid for order 1042.';

  test('its tools load, the refund waits for baton approve, runs once, and the reply comes back', async () => {
    assert.match(start?.stderr ?? '', /tools: lookup_order, issue_refund from .*tools\/support\.ts/);
    const run = startBaton(example, ['run', 'support', MESSAGE, '--thread', 'refund-1', '--json']);
    const pending = await pendingApprovals('refund-1', run);
    assert.equal(pending[0]?.tool, 'issue_refund');
    assert.deepEqual(JSON.parse(pending[0]?.arguments ?? '{}'), {
      order_id: '1042',
      amount_eur: 34.9,
      reason: 'The teapot arrived broken.',
    });
    assert.deepEqual(refundsIssued(), [], 'nothing was refunded before the approval');
    const approved = await baton(example, ['approve', 'refund-1', 'a1']);
    assert.equal(approved.stdout, 'a1 approved.\n');
    const finished = await run.finished();
    assert.equal(finished.code, 0, finished.stderr);
    assert.equal((JSON.parse(finished.stdout) as { reply: string }).reply, REPLY);
    const refunds = refundsIssued();
    assert.equal(refunds.length, 1, 'one refund');
    assert.deepEqual(
      { ...refunds[0], id: undefined, at: undefined },
      {
        id: undefined,
        order_id: '1042',
        amount_eur: 34.9,
        reason: 'The teapot arrived broken.',
        by: 'support',
        at: undefined,
      },
    );
  });

  test('a refund waiting for approval outlives a stop and restart of the whole stack, and runs once when approved', async (t) => {
    // As the README's "Stop everything while it waits" says: the run under a message id of its own, Ctrl-C, npm start
    // stopped and started again, the approval still there, approved, and the same run again gets the reply.
    const args = ['run', 'support', MESSAGE, '--thread', 'refund-2', '--message-id', 'refund-2-first', '--json'];
    const waiting = startBaton(example, args);
    const pending = await pendingApprovals('refund-2', waiting);
    const before = refundsIssued().length;
    const interrupted = await waiting.stop();
    // Ctrl-C ends the wait (exit 130 on a terminal; killed by the signal when stdout is not one), not the turn.
    assert.ok(
      interrupted.code === 130 || interrupted.signal === 'SIGINT',
      `Ctrl-C ends the wait: ${interrupted.code ?? interrupted.signal ?? '?'}\n${interrupted.stderr}`,
    );
    // The first stack stops here for good (the suite's `after` finds it stopped); this test owns the second one.
    const stopped = await start?.stop();
    assert.notEqual(stopped?.signal, 'SIGKILL', `Ctrl-C stops npm start\n${stopped?.stderr ?? ''}`);
    const restarted = new Command('npm start (again)', 'npm', ['start'], { cwd: example, env: userEnv() });
    t.after(async () => {
      const ended = await restarted.stop();
      assert.notEqual(ended.signal, 'SIGKILL', `Ctrl-C stops npm start\n${ended.stderr}`);
    });
    await restarted.waitFor(/Baton is up/);

    const after = JSON.parse((await baton(example, ['approvals', 'refund-2', '--json'])).stdout) as PendingApproval[];
    assert.deepEqual(after, pending, 'the same call waits after the restart');
    assert.equal(refundsIssued().length, before, 'nothing was refunded while it waited');
    assert.equal((await baton(example, ['approve', 'refund-2', 'a1'])).stdout, 'a1 approved.\n');
    const again = await baton(example, args);
    assert.equal((JSON.parse(again.stdout) as { reply: string }).reply, REPLY);
    const status = JSON.parse((await baton(example, ['status', 'refund-2', '--json'])).stdout) as { turns: number };
    assert.equal(status.turns, 1, 'the message was taken once: one turn');
    const refunds = refundsIssued();
    assert.equal(refunds.length, before + 1, 'one refund for the approved call');
    assert.equal(refunds.at(-1)?.order_id, '1042');
  });

  test('its tools type-check against the installed package (npm run typecheck)', async () => {
    await succeed('npm run typecheck', 'npm', ['run', 'typecheck'], { cwd: example });
  });
});
