/**
 * A worker SIGKILLed while a shell command runs cannot stop what the command started; the next worker's sweep does:
 * it kills processes whose marker names a worker that is gone, and leaves those of live workers alone.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { test } from 'node:test';
import { SHELL_RUN_MARKER, sweepOrphanedShellProcesses } from '../../activities/tools/shell';

function startTime(pid: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
}

function sleeper(marker: string): ChildProcess {
  return spawn('sleep', ['60'], { env: { PATH: process.env.PATH, [SHELL_RUN_MARKER]: marker }, stdio: 'ignore' });
}

function hasMarker(pid: number | undefined): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`${SHELL_RUN_MARKER}=`);
  } catch {
    return false;
  }
}

const exited = (child: ChildProcess) =>
  new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));

test(
  'the sweep kills shell processes of a dead worker and spares those of a live one',
  { skip: process.platform !== 'linux' },
  async () => {
    // No process has a pid above the kernel's pid_max (4194304 at most): that owner is certainly gone. So is an owner
    // whose pid lives on with another start time (the pid was reused).
    // Markers of this test alone: it sweeps only them, never another run's orphans.
    const tag = randomBytes(6).toString('hex');
    const gone = sleeper(`4194305.12345:${tag}-orphan-1`);
    const reused = sleeper(`${process.pid}.1:${tag}-orphan-2`);
    const live = sleeper(`${process.pid}.${startTime(process.pid)}:${tag}-live`);
    const goneExit = exited(gone);
    const reusedExit = exited(reused);
    try {
      // Until exec, a child still has this process's environment: wait until each carries its marker (a loaded
      // machine may take a while).
      for (const child of [gone, reused, live]) {
        for (let tries = 0; !hasMarker(child.pid); tries += 1) {
          assert.ok(tries < 500, `child ${child.pid} never got its marker`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      }
      const killed = await sweepOrphanedShellProcesses({ only: (marker) => marker.includes(`:${tag}-`) });
      assert.deepEqual(
        [...killed].sort(),
        [gone.pid ?? -1, reused.pid ?? -1].sort(),
        'exactly the two orphans of this test were killed',
      );
      assert.ok(!killed.includes(live.pid ?? -1));
      assert.equal(await goneExit, 'SIGKILL');
      assert.equal(await reusedExit, 'SIGKILL');
      assert.equal(live.exitCode, null, 'the live worker’s command still runs');
      assert.equal(live.signalCode, null);
    } finally {
      for (const child of [gone, reused, live]) child.kill('SIGKILL');
    }
  },
);
