import assert from 'node:assert/strict';
import childProcess from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { createShellTool, type ShellSpawn, type ShellToolOptions } from '../../activities/tools/shell';
import { probeShellSandbox, type ShellSandbox } from '../../activities/tools/shell-sandbox';
import { processesWithVariable } from '../../testing/shell-probe';
import { fakeToolContext } from '../../testing/tool-context';
import type { ToolCallParts } from '../../activities/tools/context';
import { ToolError, type ToolContext, type ToolDefinition } from '../../activities/tools/types';
import { toolEnvironment } from '../../worker/config';

function fakeContext(variables: Record<string, string> = {}, overrides: Partial<ToolCallParts> = {}): ToolContext {
  return fakeToolContext({ world: { name: 'w', variables }, ...overrides });
}

interface SpawnCall {
  command: string;
  args: readonly string[];
  options: Parameters<ShellSpawn>[2];
}

/**
 * The two ways a worker runs commands: in bubblewrap's sandbox (every worker where it runs), and as plain processes
 * (`BATON_SHELL_SANDBOX=none`). What a command can do is the same in both; the tests of the process's life run in
 * each. test/unit/shell-sandbox.test.ts tests what the sandbox keeps out.
 */
const MODES = ['sandboxed', 'unsandboxed'] as const;
type Mode = (typeof MODES)[number];

let probed: Promise<ShellSandbox> | undefined;
async function sandboxOf(mode: Mode): Promise<ShellSandbox> {
  if (mode === 'unsandboxed') return { kind: 'none' };
  const sandbox = await (probed ??= probeShellSandbox({ mode: 'bwrap' }, process.env));
  assert.equal(sandbox.kind, 'bwrap', `bubblewrap runs here: ${JSON.stringify(sandbox)}`);
  return sandbox;
}

/** The shell tool of a mode, with a spawn that records every call. */
async function modeTool(
  mode: Mode,
  options: ShellToolOptions = {},
): Promise<{ tool: ToolDefinition; spawns: SpawnCall[] }> {
  return shellTool({ sandbox: await sandboxOf(mode), ...options });
}

/** The shell tool with a spawn that records every call before starting the real process. */
function shellTool(options: ShellToolOptions = {}): { tool: ToolDefinition; spawns: SpawnCall[] } {
  const spawns: SpawnCall[] = [];
  const spawn: ShellSpawn = (command, args, spawnOptions) => {
    spawns.push({ command, args, options: spawnOptions });
    return childProcess.spawn(command, args, spawnOptions);
  };
  return { tool: createShellTool({ killGraceMs: 300, ...options, spawn }), spawns };
}

async function run(tool: ToolDefinition, args: unknown, context: ToolContext): Promise<string> {
  assert.ok(tool.run !== undefined, 'shell runs in the activity');
  const output = await tool.run(tool.parameters.parse(args), context);
  assert.equal(typeof output, 'string');
  return output as string;
}

async function assertToolError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    assert.match(error.message, message);
    return true;
  });
}

interface Fixture {
  base: string;
  /** The world's working_directory. */
  root: string;
  outside: string;
}

/**
 * root/                         outside/
 *   sub/deep/                     (empty)
 *   file.txt
 *   in -> root/sub
 *   out -> outside
 *   gone -> outside/missing
 */
function fixture(t: TestContext): Fixture {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-shell-')));
  t.after(() => fs.rmSync(base, { recursive: true, force: true }));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(path.join(root, 'sub', 'deep'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(root, 'file.txt'), 'x\n');
  fs.symlinkSync(path.join(root, 'sub'), path.join(root, 'in'));
  fs.symlinkSync(outside, path.join(root, 'out'));
  fs.symlinkSync(path.join(outside, 'missing'), path.join(root, 'gone'));
  return { base, root, outside };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `file` holds a pid (written by the command under test). */
async function readPid(file: string): Promise<number> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(20)) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '';
    if (/^\d+$/.test(text)) return Number(text);
  }
  throw new Error(`no pid in ${file}`);
}

/**
 * Whether a process no longer runs: `kill(pid, 0)` fails with ESRCH, or it is a zombie. A killed orphan is
 * re-parented to PID 1, and some container inits never reap it, so it stays a zombie: dead, but still signallable.
 */
function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ESRCH') return true;
    throw error;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true; // reaped between the two checks
  }
}

async function assertGone(pid: number): Promise<void> {
  for (const deadline = Date.now() + 3000; Date.now() < deadline; await sleep(20)) if (isGone(pid)) return;
  assert.fail(`process ${pid} is still running`);
}

/**
 * A command's processes, found from outside whatever namespace they run in: the command exports a variable with a
 * value unique to the test, which every process it starts inherits. (A sandboxed process writing `$$` writes its
 * pid inside the sandbox, which means nothing here.)
 */
function tagged(): { tag: string; export: string; running: () => number[] } {
  const tag = `t${process.pid}x${Math.random().toString(36).slice(2)}`;
  return {
    tag,
    export: `export BATON_TEST_TAG=${tag}; `,
    running: () => processesWithVariable('BATON_TEST_TAG', tag),
  };
}

/** Waits until none of the tagged processes runs. */
async function assertNoneRunning(running: () => number[]): Promise<void> {
  for (const deadline = Date.now() + 3000; Date.now() < deadline; await sleep(20)) {
    if (running().length === 0) return;
  }
  assert.fail(`processes ${running().join(', ')} are still running`);
}

/** Waits until at least `count` tagged processes run. */
async function waitForRunning(running: () => number[], count: number): Promise<void> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(20)) {
    if (running().length >= count) return;
  }
  assert.fail(`only ${running().length} of ${count} processes ever ran`);
}

test('shell tool: a world without a working_directory is refused, whatever directory the call names, and nothing starts', async (t) => {
  const fx = fixture(t);
  const { tool, spawns } = shellTool();
  const guidance =
    /^No working directory: this world sets no working_directory, the directory shell commands are confined to\. Set one with `baton world dir PATH`(; `directory` then names a directory inside it)?\. No command was run\.$/;
  // An empty or blank value is no directory either.
  for (const variables of [{}, { working_directory: '' }, { working_directory: '  ' }] as Record<string, string>[]) {
    await assertToolError(run(tool, { command: 'touch marker' }, fakeContext(variables)), guidance);
  }
  // An absolute directory does not stand in for the world's root: it would be bound read-write into the sandbox,
  // whatever it is (the host's /proc, the worker's home, a directory beside the project).
  for (const directory of [fx.outside, '/proc', '/', os.homedir(), 'sub']) {
    await assertToolError(run(tool, { command: 'touch marker', directory }, fakeContext()), guidance);
  }
  assert.deepEqual(spawns, []);
  assert.ok(!fs.existsSync(path.join(fx.outside, 'marker')));
});

test('shell tool: refuses a missing directory or a bad working_directory without starting a process', async (t) => {
  const fx = fixture(t);
  const { tool, spawns } = shellTool();
  const world = fakeContext({ working_directory: fx.root });
  await assertToolError(run(tool, { command: 'true', directory: 'nope' }, world), /^Directory 'nope' does not exist/);
  await assertToolError(run(tool, { command: 'true', directory: 'sub/nope/deeper' }, world), /does not exist/);
  await assertToolError(run(tool, { command: 'true', directory: 'file.txt' }, world), /'file.txt' is not a directory/);
  const absent = path.join(fx.base, 'absent');

  for (const [workingDirectory, message] of [
    [absent, /working_directory '.*absent' does not exist; set it with `baton world dir PATH`/],
    [path.join(fx.root, 'file.txt'), /working_directory '.*file\.txt' is not a directory/],
    ['relative/dir', /working_directory 'relative\/dir' is not an absolute path/],
  ] as const) {
    const context = fakeContext({ working_directory: workingDirectory });
    await assertToolError(run(tool, { command: 'true' }, context), message);
    await assertToolError(run(tool, { command: 'true', directory: fx.root }, context), message);
  }
  assert.deepEqual(spawns, []);
});

test('shell tool: refuses directories outside the working_directory without starting a process', async (t) => {
  const fx = fixture(t);
  const { tool, spawns } = shellTool();
  const world = fakeContext({ working_directory: fx.root });
  for (const directory of [
    '..',
    '../outside',
    'sub/../../outside',
    fx.outside,
    '/',
    'out', // a symlink inside pointing outside
    'gone', // a dangling symlink to outside: "outside", not "missing"
    path.join(fx.root, 'out'),
  ]) {
    await assertToolError(
      run(tool, { command: 'true', directory }, world),
      new RegExp(`^Directory '${directory.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}' is outside the world's working`),
    );
  }
  assert.deepEqual(spawns, []);
});

for (const mode of MODES) {
  test(`shell tool (${mode}): a directory argument takes precedence over the working_directory`, async (t) => {
    const fx = fixture(t);
    const { tool, spawns } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const sub = path.join(fx.root, 'sub');
    assert.equal(await run(tool, { command: 'pwd -P', directory: sub }, world), `exit code: 0\n${sub}\n`);
    assert.equal(spawns.length, 1);
    const [spawned] = spawns;
    assert.equal(spawned?.options.cwd, sub);
    assert.equal(spawned?.options.detached, true);
    if (mode === 'unsandboxed') {
      assert.equal(spawned?.command, '/bin/sh');
      assert.deepEqual(spawned?.args, ['-c', 'pwd -P']);
      return;
    }
    // bwrap (started by unshare in a network namespace of its own: the world keeps the network on), binding the
    // working directory (not only the directory run in) and starting the shell in `sub` (once its network is up).
    const sandbox = await sandboxOf(mode);
    assert.ok(sandbox.kind === 'bwrap' && sandbox.network?.kind === 'egress');
    assert.equal(spawned?.command, sandbox.network.unshare);
    const args = spawned?.args ?? [];
    assert.deepEqual(args.slice(0, 5), ['--user', '--map-root-user', '--net', '--', sandbox.bwrap]);
    assert.deepEqual(args.slice(-2), ['/bin/sh', 'pwd -P']);
    assert.equal(args[args.lastIndexOf('--') + 1], '/bin/sh');
    assert.ok(!args.includes('--unshare-net'));
    assert.deepEqual(args.slice(args.indexOf('--bind'), args.indexOf('--bind') + 3), ['--bind', fx.root, fx.root]);
    assert.equal(args[args.indexOf('--chdir') + 1], sub);
  });
}

test('shell tool: heartbeats while a command runs', async (t) => {
  const fx = fixture(t);
  const { tool } = shellTool();
  const beats: unknown[] = [];
  const world = fakeContext({ working_directory: fx.root }, { heartbeat: (details) => beats.push(details) });
  assert.equal(await run(tool, { command: 'echo hi; sleep 2.5' }, world), 'exit code: 0\nhi\n');
  assert.ok(beats.length >= 2, `${beats.length} heartbeats`);
  let previous = 0;
  for (const beat of beats) {
    assert.ok(typeof beat === 'object' && beat !== null);
    const { tool: name, elapsedMs, bytes } = beat as Record<string, unknown>;
    assert.equal(name, 'shell');
    assert.ok(typeof elapsedMs === 'number' && elapsedMs > previous && elapsedMs < 30_000);
    assert.equal(bytes, 3);
    previous = elapsedMs;
  }
  const count = beats.length;
  await sleep(1200);
  assert.equal(beats.length, count, 'heartbeats stop when the command ends');
});

test('shell tool: timeout_s defaults and is bounded by the options', () => {
  const { tool } = shellTool({ defaultTimeoutS: 5, maxTimeoutS: 10 });
  assert.deepEqual(tool.parameters.parse({ command: 'ls' }), { command: 'ls', timeout_s: 5 });
  assert.equal(tool.parameters.safeParse({ command: 'ls', timeout_s: 11 }).success, false);
  assert.equal(tool.parameters.safeParse({ command: 'ls', timeout_s: 0 }).success, false);
  assert.equal(tool.parameters.safeParse({ command: 'ls', timeout_s: 1.5 }).success, false);
  assert.equal(tool.parameters.safeParse({ command: '' }).success, false);
  assert.equal(tool.parameters.safeParse({ command: 'ls', cwd: '/' }).success, false);
  assert.deepEqual(createShellTool().parameters.parse({ command: 'ls' }), { command: 'ls', timeout_s: 60 });
  assert.equal(createShellTool().parameters.safeParse({ command: 'ls', timeout_s: 3601 }).success, false);
  assert.throws(() => createShellTool({ defaultTimeoutS: 10, maxTimeoutS: 5 }), RangeError);
  assert.throws(() => createShellTool({ maxOutputBytes: 0 }), RangeError);
});

for (const mode of MODES) {
  const name = (what: string) => `shell tool (${mode}): ${what}`;

  test(name('runs in the working_directory when no directory is passed'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    assert.equal(
      await run(tool, { command: 'pwd -P' }, fakeContext({ working_directory: fx.root })),
      `exit code: 0\n${fx.root}\n`,
    );
    // Spelled through a symlink, it runs in the real directory.
    const link = path.join(fx.base, 'link-to-root');
    fs.symlinkSync(fx.root, link);
    assert.equal(
      await run(tool, { command: 'pwd -P' }, fakeContext({ working_directory: link })),
      `exit code: 0\n${fx.root}\n`,
    );
    assert.equal(
      await run(tool, { command: 'pwd -P', directory: 'sub' }, fakeContext({ working_directory: link })),
      `exit code: 0\n${path.join(fx.root, 'sub')}\n`,
    );
  });

  test(name('resolves a relative directory inside the working_directory, symlinks included'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const deep = path.join(fx.root, 'sub', 'deep');
    assert.equal(await run(tool, { command: 'pwd -P', directory: 'sub/deep' }, world), `exit code: 0\n${deep}\n`);
    assert.equal(
      await run(tool, { command: 'pwd -P', directory: './in/deep/..' }, world),
      `exit code: 0\n${path.dirname(deep)}\n`,
    );
    assert.equal(await run(tool, { command: 'pwd -P', directory: '.' }, world), `exit code: 0\n${fx.root}\n`);
    // `..` applies to the path as written (as `cd` does), before symlinks are resolved: this is the root itself.
    assert.equal(await run(tool, { command: 'pwd -P', directory: 'out/..' }, world), `exit code: 0\n${fx.root}\n`);
  });

  test(name('returns the exit code and stderr; a failing command is a result, not an error'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const failed = await run(tool, { command: 'echo out; echo err >&2; exit 3' }, world);
    assert.match(failed, /^exit code: 3\n/);
    assert.match(failed, /^out$/m);
    assert.match(failed, /^err$/m);
    assert.equal(await run(tool, { command: 'echo only-stderr >&2' }, world), 'exit code: 0\nonly-stderr\n');
    assert.equal(await run(tool, { command: 'true' }, world), 'exit code: 0\n(no output)');
    // A shell killed by a signal: the sandbox reports it as shells do, 128 + the signal's number.
    assert.equal(
      await run(tool, { command: 'kill -9 $$' }, world),
      mode === 'sandboxed' ? 'exit code: 137\n(no output)' : 'terminated by signal SIGKILL\n(no output)',
    );
    // stdin is closed: a command reading it sees end-of-file at once instead of hanging.
    assert.equal(await run(tool, { command: 'cat; echo done' }, world), 'exit code: 0\ndone\n');
  });

  test(name('caps output keeping the tail and says how many bytes were dropped'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode, { maxOutputBytes: 100 });
    const world = fakeContext({ working_directory: fx.root });
    const full = Array.from({ length: 300 }, (_, i) => `line ${i}\n`).join('') + 'last words\n';
    const command = 'i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done; echo "last words" >&2';
    const result = await run(tool, { command }, world);
    const dropped = Buffer.byteLength(full) - 100;
    assert.equal(
      result,
      `exit code: 0\n[output truncated: dropped the first ${dropped} bytes, showing the last 100]\n${full.slice(-100)}`,
    );

    // The cut never splits a character: 'a', 'é' (2 bytes), '€' (3 bytes) keeping 4 bytes shows only '€'.
    const small = (await modeTool(mode, { maxOutputBytes: 4 })).tool;
    assert.equal(
      await run(small, { command: "printf 'a\\303\\251\\342\\202\\254'" }, world),
      'exit code: 0\n[output truncated: dropped the first 3 bytes, showing the last 3]\n€',
    );
    // Output within the cap is whole.
    assert.equal(await run(small, { command: 'printf abcd' }, world), 'exit code: 0\nabcd');
  });

  test(name('a timeout kills the whole process group, grandchildren included'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const processes = tagged();
    const started = Date.now();
    const running = run(
      tool,
      {
        // A background grandchild, and one that ignores SIGTERM (it gets SIGKILL after the grace).
        command:
          processes.export +
          "echo before; sleep 30 & echo $! > grandchild.pid; (trap '' TERM; exec sleep 30) & echo $! > stubborn.pid; " +
          'sleep 30; wait',
        timeout_s: 2,
      },
      world,
    );
    // The three sleeps (the shell itself keeps the environment it started with), seen from here whatever
    // namespace they run in.
    await waitForRunning(processes.running, 3);
    const result = await running;
    const elapsed = Date.now() - started;
    assert.equal(result, 'timed out after 2 s (killed)\nbefore\n');
    // At least the timeout; far less than the 30 s sleeps (a loaded machine may be slow, never that slow).
    assert.ok(elapsed >= 2000 && elapsed < 15_000, `took ${elapsed} ms`);
    await assertNoneRunning(processes.running);
    if (mode === 'unsandboxed') {
      await assertGone(await readPid(path.join(fx.root, 'grandchild.pid')));
      await assertGone(await readPid(path.join(fx.root, 'stubborn.pid')));
    }
  });

  test(name('processes left running in the background are stopped when the command exits'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const processes = tagged();
    const started = Date.now();
    const result = await run(tool, { command: `${processes.export}sleep 30 & echo $! > bg.pid; echo started` }, world);
    assert.equal(result, 'exit code: 0\nstarted\n');
    // Far less than the 30 s the background process would take.
    assert.ok(Date.now() - started < 15_000, 'returns without waiting for the background process');
    const pid = await readPid(path.join(fx.root, 'bg.pid')); // it was started
    await assertNoneRunning(processes.running);
    if (mode === 'unsandboxed') await assertGone(pid);
  });

  test(name('aborting the context signal kills the process group'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const controller = new AbortController();
    const world = fakeContext({ working_directory: fx.root }, { signal: controller.signal });
    const cancelled = new Error('activity cancelled');
    const processes = tagged();
    const running = run(tool, { command: `${processes.export}sleep 30 & echo $! > grandchild.pid; wait` }, world);
    const pid = await readPid(path.join(fx.root, 'grandchild.pid'));
    await waitForRunning(processes.running, 1);
    const started = Date.now();
    controller.abort(cancelled);
    await assert.rejects(running, (error) => error === cancelled);
    assert.ok(Date.now() - started < 15_000, 'the abort did not wait for the 30 s sleep');
    await assertNoneRunning(processes.running);
    if (mode === 'unsandboxed') await assertGone(pid);

    // An already-cancelled call starts nothing.
    const { tool: idle, spawns } = await modeTool(mode);
    await assert.rejects(run(idle, { command: 'true' }, world), (error) => error === cancelled);
    assert.deepEqual(spawns, []);
  });

  test(name('world variables are not exported to the command; options.env replaces the environment'), async (t) => {
    const fx = fixture(t);
    const world = fakeContext({ working_directory: fx.root, GREETING: 'hello' });
    const command = 'echo "[${GREETING-unset}] [${BATON_ONLY-unset}]"';
    assert.equal(await run((await modeTool(mode)).tool, { command }, world), 'exit code: 0\n[unset] [unset]\n');
    const { tool } = await modeTool(mode, { env: { PATH: '/usr/bin:/bin', BATON_ONLY: 'yes' } });
    assert.equal(await run(tool, { command }, world), 'exit code: 0\n[unset] [yes]\n');
  });

  test(name('a shell that cannot start is a ToolError'), async (t) => {
    const fx = fixture(t);
    const { tool, spawns } = await modeTool(mode, { shell: path.join(fx.base, 'no-such-shell') });
    await assertToolError(
      run(tool, { command: 'true' }, fakeContext({ working_directory: fx.root })),
      /^Could not start .*no-such-shell/,
    );
    // The sandbox sees the host's system directories at their paths: a shell missing here is not started there.
    if (mode === 'sandboxed') assert.deepEqual(spawns, []);
  });

  test(
    name('processes that left the group (setsid, double fork, nohup) are stopped when the command exits'),
    async (t) => {
      const fx = fixture(t);
      const { tool } = await modeTool(mode);
      const world = fakeContext({ working_directory: fx.root });
      const processes = tagged();
      const result = await run(
        tool,
        {
          command:
            processes.export +
            "setsid sh -c 'echo $$ > setsid.pid; exec sleep 30' & " +
            '( (sleep 30 & echo $! > double.pid) & ) ; ' +
            'nohup sleep 30 > /dev/null 2>&1 & echo $! > nohup.pid; ' +
            // Its shell would report a `sleep` killed before itself ("Killed") on the call's output, depending on
            // which of the two the kill reaches first: what it says is not this test's business, only that it stops.
            'setsid sh -c \'trap "" TERM; echo $$ > stubborn.pid; while :; do sleep 1; done\' > /dev/null 2>&1 & ' +
            'sleep 0.3; echo started',
          timeout_s: 20,
        },
        world,
      );
      // The call ends with the command, long before any of the escaped sleeps would.
      assert.equal(result, 'exit code: 0\nstarted\n');
      for (const file of ['setsid.pid', 'double.pid', 'nohup.pid', 'stubborn.pid']) {
        const pid = await readPid(path.join(fx.root, file)); // each was started
        if (mode === 'unsandboxed') await assertGone(pid);
      }
      await assertNoneRunning(processes.running);
    },
  );

  test(name('at timeout_s the call returns and processes that left the session are killed'), async (t) => {
    const fx = fixture(t);
    const { tool } = await modeTool(mode);
    const world = fakeContext({ working_directory: fx.root });
    const processes = tagged();
    // The reproduction: a setsid child holding the output pipe kept the call waiting for it.
    const started = Date.now();
    const result = await run(
      tool,
      {
        command: `${processes.export}setsid sh -c 'echo $$ > escaped.pid; exec sleep 30' & sleep 0.2; echo started; sleep 30`,
        timeout_s: 1,
      },
      world,
    );
    assert.equal(result, 'timed out after 1 s (killed)\nstarted\n');
    // Far below the 30 s sleeps: the call did not wait for the escaped process to end on its own.
    assert.ok(Date.now() - started < 15_000, `took ${Date.now() - started} ms`);
    const pid = await readPid(path.join(fx.root, 'escaped.pid'));
    await assertNoneRunning(processes.running);
    if (mode === 'unsandboxed') await assertGone(pid);
  });

  test(name('commands get a minimal environment, never the worker secrets'), async (t) => {
    const fx = fixture(t);
    const world = fakeContext({ working_directory: fx.root, 'env.TOOL_TOKEN': 'for-tools', SECRET_NOTE: 'x' });
    const secrets = {
      DATABASE_URL: 'postgres://u:p@db/baton',
      OPENAI_API_KEY: 'sk-secret',
      OPENAI_BASE_URL: 'http://model',
      TEMPORAL_ADDRESS: 'temporal:7233',
    };
    const saved = { ...process.env };
    Object.assign(process.env, secrets);
    t.after(() => {
      for (const key of Object.keys(secrets)) delete process.env[key];
      Object.assign(process.env, saved);
    });
    // Without options.env, the tool does not fall back to the worker's environment.
    const output = await run((await modeTool(mode)).tool, { command: 'env' }, world);
    for (const key of Object.keys(secrets)) assert.doesNotMatch(output, new RegExp(`^${key}=`, 'm'));
    assert.doesNotMatch(output, /^(OPENAI|TEMPORAL|DATABASE)_/m);
    assert.match(output, /^PATH=/m);
    // World variables meant for tools (`env.NAME`) are exported under NAME; other world variables are not.
    assert.match(output, /^TOOL_TOKEN=for-tools$/m);
    assert.doesNotMatch(output, /SECRET_NOTE/);
    // The tool registry builds the shell from the worker's settings with only PATH, HOME and LANG kept.
    const environment = toolEnvironment({ ...secrets, PATH: '/bin', HOME: '/home/w', LANG: 'C.UTF-8', OTHER: '1' });
    assert.deepEqual(environment, { PATH: '/bin', HOME: '/home/w', LANG: 'C.UTF-8' });
    const listed = await run((await modeTool(mode, { env: environment })).tool, { command: 'env' }, world);
    assert.doesNotMatch(listed, /^(OPENAI|TEMPORAL|DATABASE|OTHER)/m);
    assert.match(listed, /^HOME=\/home\/w$/m);
  });
}
