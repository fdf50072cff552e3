/**
 * What the shell's bubblewrap sandbox keeps out, tried as an attacker would from inside a command, with real bwrap
 * and real processes: the worker's environment and working directory through /proc, the stack file, the repository
 * and the worker's home, writes outside the world's directory, the network when the world cuts it. Then what happens
 * where bwrap cannot run, and that nothing a sandboxed command started outlives its worker.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  createShellTool,
  SHELL_RUN_MARKER,
  shellRunProcesses,
  sweepOrphanedShellProcesses,
} from '../../activities/tools/shell';
import {
  describeShellSandbox,
  probeShellSandbox,
  sandboxArguments,
  type BwrapSandbox,
  type ShellSandbox,
} from '../../activities/tools/shell-sandbox';
import { ToolError, type ToolDefinition } from '../../activities/tools/types';
import { STACK_FILE_MODE, stackFilePath, writeStackFile } from '../../stack/stack-file';
import { ANCESTRY_PROBE, probedAncestors, processesWithVariable } from '../../testing/shell-probe';
import { fakeToolContext } from '../../testing/tool-context';

const ROOT = path.resolve(__dirname, '..', '..');
const CHILD = path.join(__dirname, 'shell-sandbox-child.ts');
const PATH_ONLY = { PATH: '/usr/local/bin:/usr/bin:/bin' };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh directory (its real path), removed after the test. */
function scratch(t: TestContext): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-sandbox-test-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function bwrapSandbox(hidden: readonly string[] = []): Promise<BwrapSandbox> {
  const sandbox = await probeShellSandbox({ mode: 'bwrap', hidden }, process.env);
  assert.equal(sandbox.kind, 'bwrap', `bubblewrap runs here: ${JSON.stringify(sandbox)}`);
  return sandbox;
}

async function run(tool: ToolDefinition, variables: Record<string, string>, command: string): Promise<string> {
  const output = await tool.run?.(
    tool.parameters.parse({ command }),
    fakeToolContext({ world: { name: 'w', variables } }),
  );
  assert.equal(typeof output, 'string');
  return output as string;
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  let message = '';
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    message = error.message;
    return true;
  });
  return message;
}

/** A process's command line, words joined by spaces ('' once it is gone). */
function commandLine(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Whether a process runs: a zombie (dead, waiting to be reaped) does not. */
function isRunning(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(20)) if (check()) return;
  assert.fail(`timed out waiting until ${what}`);
}

/** A worker stand-in (shell-sandbox-child.ts) started with `env` as its launch environment. */
function startChild(
  t: TestContext,
  workingDirectory: string,
  command: string,
  env: Record<string, string>,
): { child: ChildProcess; pid: Promise<number>; result: Promise<{ result?: string; error?: string }> } {
  const launchEnv: Record<string, string | undefined> = { ...process.env, ...env };
  delete launchEnv.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, workingDirectory, command], {
    cwd: ROOT,
    env: launchEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  const lines: ((line: Record<string, unknown>) => void)[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
    const complete = stdout.split('\n');
    stdout = complete.pop() ?? '';
    for (const line of complete) for (const listener of lines) listener(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const next = (...keys: string[]) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      lines.push((line) => {
        if (keys.some((key) => key in line)) resolve(line);
      });
      void exited.then(() => reject(new Error(`the worker stand-in exited without ${keys.join(' or ')}:\n${stderr}`)));
    });
  const result = next('result', 'error') as Promise<{ result?: string; error?: string }>;
  result.catch(() => undefined); // a test that kills the stand-in never awaits it
  return { child, pid: next('pid').then((line) => Number(line.pid)), result };
}

test(
  "shell sandbox: a command sees no process of its worker, so no ancestor's environment or working directory",
  { timeout: 120_000 },
  async (t) => {
    const base = scratch(t);
    const work = path.join(base, 'work');
    fs.mkdirSync(work);
    const apiKey = `sk-launch-${randomBytes(8).toString('hex')}`;
    const password = `pw-${randomBytes(8).toString('hex')}`;
    // Secrets in the worker's launch environment: what /proc/<pid>/environ shows (setting them later would not).
    const secrets = {
      OPENAI_API_KEY: apiKey,
      DATABASE_URL: `postgres://baton:${password}@127.0.0.1:5432/baton`,
      HOME: path.join(base, 'home'),
      // Commands get the worker's PATH; npm's would name the repository (node_modules/.bin) without any file of it.
      ...PATH_ONLY,
    };
    // Walk up from the shell through every parent this command can see, printing each one's environment and
    // working directory; then try every process it can see, and this test process by its pid.
    const command = [
      ...ANCESTRY_PROBE,
      `cat /proc/${process.pid}/environ; readlink /proc/${process.pid}/cwd`,
      'true',
    ].join('\n');

    const sandboxed = startChild(t, work, command, secrets);
    const worker = await sandboxed.pid;
    const { result, error } = await sandboxed.result;
    assert.equal(error, undefined);
    const output = result ?? '';
    assert.match(output, /^exit code: 0\n/);
    assert.ok(!output.includes(apiKey) && !output.includes(password), `a secret leaked:\n${output}`);
    assert.doesNotMatch(output, /OPENAI|DATABASE|TEMPORAL|NODE_|npm_/);
    // Only the sandbox's own processes: bwrap's PID 1, the shell and what it runs, none of the host's.
    const pids = (/^pids: (.*)$/m.exec(output)?.[1] ?? '').trim().split(' ').map(Number);
    assert.ok(pids.length > 0 && pids.every((pid) => pid < 20), `pids seen: ${pids.join(' ')}`);
    assert.ok(!pids.includes(worker) && !pids.includes(process.pid));
    // The ancestors it reaches are the shell and bwrap (PID 1), in the world's directory, with the command's
    // minimal environment and nothing else.
    const ancestors = probedAncestors(output);
    assert.deepEqual(
      ancestors.map((ancestor) => ancestor.pid),
      [2, 1],
    );
    for (const { cwd } of ancestors) assert.ok(cwd === work || cwd === '/', `an ancestor in ${cwd}`);
    for (const [, name] of output.matchAll(/^([A-Za-z_][A-Za-z0-9_]*)=/gm)) {
      // The command's environment, and PWD, which the shell sets for what it runs.
      assert.ok(['PATH', 'HOME', 'LANG', 'PWD', SHELL_RUN_MARKER].includes(name ?? ''), `${name} is in view`);
    }
    assert.ok(!output.includes(ROOT), `nothing names the repository the worker runs in:\n${output}`);
    assert.match(output, new RegExp(`/proc/${process.pid}/environ: No such file or directory`));

    // The same worker without the sandbox: its command's parent is the worker, and reading its environment prints the
    // secrets. (Only the parent's: the whole walk prints every environment on the machine, and the tool keeps the
    // output's tail, which on a busy machine no longer reaches back to the worker's.)
    const unsandboxed = startChild(t, work, 'tr "\\0" "\\n" < /proc/$PPID/environ', {
      ...secrets,
      BATON_SHELL_SANDBOX: 'none',
    });
    const exposed = (await unsandboxed.result).result ?? '';
    assert.ok(exposed.includes(apiKey) && exposed.includes(password), 'without the sandbox the secrets are readable');
  },
);

test('shell sandbox: the stack file, the repository and the home stay out of view; only the world’s directory is writable', async (t) => {
  const base = scratch(t);
  const project = path.join(base, 'project');
  const stateDir = path.join(project, '.baton');
  const work = path.join(base, 'work');
  const home = path.join(base, 'home');
  for (const dir of [project, work, home]) fs.mkdirSync(dir);
  fs.writeFileSync(path.join(project, 'notes.txt'), 'project notes\n');
  fs.writeFileSync(path.join(home, '.secret-token'), 'token\n');
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const stack = {
    temporalAddress: '127.0.0.1:7233',
    namespace: 'default',
    taskQueue: 'baton',
    databaseUrl: `postgres://postgres:${password}@127.0.0.1:5432/postgres`,
    scriptedModel: true,
    pid: process.pid,
    startedAt: new Date().toISOString(),
  };
  writeStackFile(stateDir, stack);
  // Owner only, and so again when an older stack file was readable by all.
  assert.equal(fs.statSync(stackFilePath(stateDir)).mode & 0o777, STACK_FILE_MODE);
  fs.chmodSync(stackFilePath(stateDir), 0o644);
  writeStackFile(stateDir, stack);
  assert.equal(fs.statSync(stackFilePath(stateDir)).mode & 0o777, 0o600);

  const tool = createShellTool({
    env: { ...PATH_ONLY, HOME: home, LANG: 'C.UTF-8' },
    sandbox: await bwrapSandbox([stateDir]),
  });
  const hostTmp = path.join(os.tmpdir(), `baton-sandbox-escape-${randomBytes(6).toString('hex')}`);
  t.after(() => fs.rmSync(hostTmp, { force: true }));
  const outside = [
    '/usr/x',
    '/etc/x',
    '/x',
    path.join(base, 'x'),
    path.join(project, 'x'),
    path.join(stateDir, 'x'),
    path.join(home, 'x'),
    hostTmp,
  ];
  const attempts = outside.map(
    (file) => `(echo > ${file}) 2>/dev/null && echo "wrote ${file}" || echo "refused ${file}"`,
  );

  // A world elsewhere: none of it exists in there.
  const elsewhere = await run(
    tool,
    { working_directory: work },
    [
      `cat ${stackFilePath(stateDir)}`,
      `ls ${project}`,
      `ls ${ROOT}`,
      'echo "home holds $(ls -A $HOME | wc -l) entries"',
      'echo inside > inside.txt',
      ...attempts,
      'true',
    ].join('; '),
  );
  assert.ok(!elsewhere.includes(password), elsewhere);
  assert.match(elsewhere, new RegExp(`cat: ${stackFilePath(stateDir)}: No such file or directory`));
  assert.match(elsewhere, new RegExp(`ls: cannot access '${project}': No such file or directory`));
  assert.match(elsewhere, new RegExp(`ls: cannot access '${ROOT}': No such file or directory`));
  assert.match(elsewhere, /^home holds 0 entries$/m);
  // The system directories and the root are read-only; what a command writes in its private /tmp or HOME vanishes
  // with it. Nothing reached the host but the file in the world's directory.
  for (const file of ['/usr/x', '/etc/x', '/x']) assert.match(elsewhere, new RegExp(`^refused ${file}$`, 'm'));
  assert.equal(fs.readFileSync(path.join(work, 'inside.txt'), 'utf8'), 'inside\n');
  for (const file of outside) assert.ok(!fs.existsSync(file), `${file} was written on the host`);

  // A world whose directory holds the state directory: it is there, empty and read-only; the rest is the world's.
  const holding = await run(
    tool,
    { working_directory: project },
    `cat notes.txt; ls -A .baton | wc -l; cat .baton/stack.json; ${attempts[5]}; true`,
  );
  assert.ok(!holding.includes(password), holding);
  assert.match(holding, /^project notes\n0\n/m);
  assert.match(holding, /\.baton\/stack\.json: No such file or directory/);
  assert.match(holding, new RegExp(`^refused ${path.join(stateDir, 'x')}$`, 'm'));
  assert.equal(fs.statSync(stackFilePath(stateDir)).size > 0, true, 'the stack file itself is untouched');

  // Directories that would put in view what the sandbox hides are refused, with nothing run.
  for (const [directory, reason] of [
    [stateDir, /is inside Baton's state directory/],
    ['/', /is the root of the file system/],
    [base, /holds this worker's home directory/],
    // The host's /proc would show every process's environment (the worker's secrets), and bind it read-write.
    ['/proc', /is a system directory \(inside \/proc\), which the sandbox would make writable/],
    ['/sys/kernel', /is a system directory \(inside \/sys\)/],
    ['/dev', /is a system directory \(inside \/dev\)/],
    ['/usr/share', /is a system directory \(inside \/usr\)/],
    ['/etc', /is a system directory \(inside \/etc\)/],
  ] as const) {
    const message = await refusal(run(tool, { working_directory: directory }, 'echo ran > ran.txt'));
    assert.match(message, reason);
    assert.match(message, /No command was run\.$/);
  }
  assert.ok(!fs.existsSync(path.join(base, 'ran.txt')) && !fs.existsSync(path.join(stateDir, 'ran.txt')));
});

/** A TCP server on `host` that greets whoever connects, closed after the test. */
async function greeter(t: TestContext, host: string): Promise<number> {
  const server = net.createServer((socket) => socket.end(`hello from ${host}\n`));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  t.after(() => server.close());
  return (server.address() as net.AddressInfo).port;
}

/** bash's /dev/tcp: a plain TCP connection, as a command reaching a database port (or an approval URL) would make. */
const connectTo = (host: string, port: number) => `bash -c 'exec 3<>/dev/tcp/${host}/${port} && cat <&3'`;

/** This machine's first IPv4 address that is not loopback (eth0, a veth), if it has one. */
function outsideAddress(): string | undefined {
  return Object.values(os.networkInterfaces())
    .flat()
    .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal)?.address;
}

test('shell sandbox: with the network on (the default), a command has egress from a namespace of its own and never reaches the host’s loopback', async (t) => {
  const work = scratch(t);
  const loopbackPort = await greeter(t, '127.0.0.1');
  const tool = createShellTool({ env: PATH_ONLY, sandbox: await bwrapSandbox() });
  for (const variables of [
    { working_directory: work },
    { working_directory: work, BATON_SHELL_NETWORK: 'on' },
  ] as Record<string, string>[]) {
    // 127.0.0.1 in there is the command's own loopback; 10.0.2.2, slirp4netns's gateway, is no door to the host's.
    const loopback = await run(tool, variables, connectTo('127.0.0.1', loopbackPort));
    assert.match(loopback, /^exit code: 1\n/);
    assert.match(loopback, /Connection refused/);
    const gateway = await run(tool, variables, connectTo('10.0.2.2', loopbackPort));
    assert.match(gateway, /^exit code: 1\n/);
    assert.match(gateway, /Network is unreachable/);
    for (const result of [loopback, gateway]) assert.doesNotMatch(result, /hello/);
  }
  const outside = outsideAddress();
  if (outside === undefined) {
    t.diagnostic('this machine has no non-loopback IPv4 address: the egress half of this test did not run');
  } else {
    // What the machine reaches on the network, the command reaches: a server on the host's own non-loopback address
    // answers (as it would any machine of that network), while the loopback server does not answer there either.
    const outsidePort = await greeter(t, outside);
    assert.equal(
      await run(tool, { working_directory: work }, connectTo(outside, outsidePort)),
      `exit code: 0\nhello from ${outside}\n`,
    );
    const loopbackThere = await run(tool, { working_directory: work }, connectTo(outside, loopbackPort));
    assert.match(loopbackThere, /^exit code: 1\n[^]*Connection refused/);
  }
  // Its interface is slirp4netns's, its resolver slirp4netns's DNS forwarder (the host's search and options kept).
  const inside = await run(tool, { working_directory: work }, 'cat /proc/net/route /etc/resolv.conf');
  assert.match(inside, /^tap0\t00000000\t0202000A\t/m);
  assert.deepEqual(inside.match(/^nameserver .*$/gm), ['nameserver 10.0.2.3']);
  // slirp4netns carries the call's marker and ends with it: nothing of this process's calls is left.
  assert.deepEqual(await shellRunProcesses([process.pid]), []);
});

test('shell sandbox: BATON_SHELL_NETWORK=off leaves a command only a loopback of its own; every namespace is its own either way', async (t) => {
  const work = scratch(t);
  const port = await greeter(t, '127.0.0.1');
  const tool = createShellTool({ env: PATH_ONLY, sandbox: await bwrapSandbox() });
  const cut = await run(tool, { working_directory: work, BATON_SHELL_NETWORK: 'off' }, connectTo('127.0.0.1', port));
  assert.match(cut, /^exit code: 1\n/);
  assert.match(cut, /Connection refused/);
  assert.doesNotMatch(cut, /hello/);
  const outside = outsideAddress();
  if (outside !== undefined) {
    const unreachable = await run(
      tool,
      { working_directory: work, BATON_SHELL_NETWORK: 'off' },
      connectTo(outside, await greeter(t, outside)),
    );
    assert.match(unreachable, /^exit code: 1\n[^]*Network is unreachable/);
  }
  assert.equal(
    await run(tool, { working_directory: work, BATON_SHELL_NETWORK: 'off' }, 'cat /proc/net/route | wc -l'),
    'exit code: 0\n1\n',
    'no route but the header line',
  );
  // Its namespaces, against this process's: all its own, the network included, with the network on or off.
  const namespaces = ['user', 'pid', 'ipc', 'uts', 'mnt', 'net'];
  const host = Object.fromEntries(namespaces.map((ns) => [ns, fs.readlinkSync(`/proc/self/ns/${ns}`)]));
  const listNamespaces = namespaces.map((ns) => `echo ${ns} $(readlink /proc/self/ns/${ns})`).join('; ');
  for (const network of ['on', 'off']) {
    const inside = await run(tool, { working_directory: work, BATON_SHELL_NETWORK: network }, listNamespaces);
    for (const ns of namespaces) {
      const own = !new RegExp(`^${ns} ${host[ns]?.replace(/[[\]]/g, '\\$&')}$`, 'm').test(inside);
      assert.ok(own, `${ns} namespace with the network ${network}:\n${inside}`);
    }
  }
  // Any other value is refused, naming the variable.
  assert.match(
    await refusal(run(tool, { working_directory: work, BATON_SHELL_NETWORK: 'sometimes' }, 'true')),
    /^The world variable BATON_SHELL_NETWORK is 'sometimes': it must be on or off/,
  );
  // Without a sandbox nothing could cut the network: such a world is refused rather than given it.
  const unsandboxed = createShellTool({ env: PATH_ONLY, sandbox: { kind: 'none' } });
  assert.match(
    await refusal(run(unsandboxed, { working_directory: work, BATON_SHELL_NETWORK: 'off' }, 'true')),
    /BATON_SHELL_NETWORK=off, but this worker runs commands without a sandbox \(BATON_SHELL_SANDBOX=none\)/,
  );
  // And with the network on, an unsandboxed command reaches the host's loopback: what the sandbox prevents.
  assert.equal(
    await run(unsandboxed, { working_directory: work }, connectTo('127.0.0.1', port)),
    'exit code: 0\nhello from 127.0.0.1\n',
  );
});

test('shell sandbox: without slirp4netns, a world with the network on is refused before anything starts, saying what to install', async (t) => {
  const base = scratch(t);
  const real = await bwrapSandbox();
  // slirp4netns that cannot give a network: the probe runs it as a command would, and says what it said.
  const failing = path.join(base, 'slirp4netns');
  fs.writeFileSync(failing, '#!/bin/sh\necho "slirp4netns: no TAP for you" >&2\nexit 1\n', { mode: 0o755 });
  const cases: [ShellSandbox, RegExp, RegExp][] = [
    [
      await probeShellSandbox({ mode: 'bwrap', slirp4netns: path.join(base, 'missing') }, process.env),
      /^BATON_SLIRP4NETNS .*missing cannot be run \(ENOENT\)$/,
      /apt-get install slirp4netns/,
    ],
    [
      await probeShellSandbox({ mode: 'bwrap', bwrap: real.bwrap }, { PATH: path.join(base, 'empty') }),
      /^slirp4netns is not installed \(no `slirp4netns` on PATH\)$/,
      /apt-get install slirp4netns/,
    ],
    [
      await probeShellSandbox({ mode: 'bwrap', slirp4netns: failing }, process.env),
      /^a command could not get its network from .*slirp4netns \(slirp4netns: no TAP for you\)$/,
      /BATON_SHELL_NETWORK=off/,
    ],
  ];
  for (const [sandbox, reason, remedy] of cases) {
    assert.equal(sandbox.kind, 'bwrap', 'bwrap itself runs: only the network is missing');
    if (sandbox.kind !== 'bwrap') continue;
    const network = sandbox.network;
    assert.equal(network?.kind, 'unavailable');
    if (network?.kind !== 'unavailable') continue;
    assert.match(network.reason, reason);
    assert.match(network.remedy, remedy);
    assert.match(network.remedy, /BATON_SHELL_NETWORK=off/);
    assert.deepEqual(describeShellSandbox(sandbox), {
      line:
        `shell: commands run in a bubblewrap sandbox (${sandbox.bwrap}); warning: commands of worlds with ` +
        `BATON_SHELL_NETWORK on (the default) will be refused: ${network.reason}. To enable it: ${network.remedy}`,
      warning: true,
    });
    let spawned = 0;
    const tool = createShellTool({
      env: PATH_ONLY,
      sandbox,
      spawn: (command, args, options) => {
        spawned += 1;
        return spawn(command, [...args], options);
      },
    });
    for (const variables of [
      { working_directory: base },
      { working_directory: base, BATON_SHELL_NETWORK: 'on' },
    ] as Record<string, string>[]) {
      assert.equal(
        await refusal(run(tool, variables, 'echo ran > ran.txt')),
        "This world keeps the shell's network on (BATON_SHELL_NETWORK, on by default), and this worker cannot give a " +
          `command a network of its own: ${network.reason}. To enable it: ${network.remedy} No command was run.`,
      );
    }
    assert.equal(spawned, 0);
    assert.ok(!fs.existsSync(path.join(base, 'ran.txt')));
    // A world that wants no network runs as before.
    assert.equal(
      await run(tool, { working_directory: base, BATON_SHELL_NETWORK: 'off' }, 'echo offline'),
      'exit code: 0\noffline\n',
    );
    assert.equal(spawned, 1);
  }
  // Found at start but failing at a call (the TUN device gone meanwhile): the call fails, its command never ran.
  assert.equal(real.network?.kind, 'egress');
  if (real.network?.kind !== 'egress') return;
  const broken = createShellTool({
    env: PATH_ONLY,
    sandbox: { ...real, network: { ...real.network, slirp4netns: failing } },
  });
  assert.equal(
    await refusal(run(broken, { working_directory: base }, 'echo ran > ran.txt')),
    'The sandbox could not give the command its network: slirp4netns: no TAP for you. No command was run.',
  );
  assert.ok(!fs.existsSync(path.join(base, 'ran.txt')));
  assert.deepEqual(await shellRunProcesses([process.pid]), []);
});

test('shell sandbox: where bwrap cannot run, the shell refuses saying why and how to enable it', async (t) => {
  const base = scratch(t);
  // A bad BATON_BWRAP, no bwrap on PATH, and a bwrap whose namespaces the kernel refuses (as under Docker's
  // default seccomp profile): each is found at the probe, and named.
  const refusingBwrap = path.join(base, 'bwrap');
  fs.writeFileSync(
    refusingBwrap,
    '#!/bin/sh\necho "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
    { mode: 0o755 },
  );
  const cases: [ShellSandbox, RegExp, RegExp][] = [
    [
      await probeShellSandbox({ mode: 'bwrap', bwrap: path.join(base, 'missing-bwrap') }, process.env),
      /^BATON_BWRAP .*missing-bwrap cannot be run \(ENOENT\)$/,
      /apt-get install bubblewrap/,
    ],
    [
      await probeShellSandbox({ mode: 'bwrap' }, { PATH: path.join(base, 'empty') }),
      /^bubblewrap is not installed \(no `bwrap` on PATH\)$/,
      /apt-get install bubblewrap/,
    ],
    [
      await probeShellSandbox({ mode: 'bwrap', bwrap: refusingBwrap }, process.env),
      /could not make a sandbox here \(bwrap: No permissions to creating new namespace/,
      /seccomp=unconfined, apparmor=unconfined and systempaths=unconfined/,
    ],
  ];
  for (const [sandbox, reason, remedy] of cases) {
    assert.equal(sandbox.kind, 'unavailable');
    if (sandbox.kind !== 'unavailable') continue;
    assert.match(sandbox.reason, reason);
    assert.match(sandbox.remedy, remedy);
    assert.match(sandbox.remedy, /BATON_SHELL_SANDBOX=none/);
    assert.deepEqual(describeShellSandbox(sandbox), {
      line: `warning: the shell tool will refuse every command: ${sandbox.reason}. To enable it: ${sandbox.remedy}`,
      warning: true,
    });
    let spawned = 0;
    const tool = createShellTool({
      sandbox,
      spawn: () => {
        spawned += 1;
        throw new Error('nothing may be started');
      },
    });
    const message = await refusal(run(tool, { working_directory: base }, 'echo ran > ran.txt'));
    assert.equal(
      message,
      `Shell commands run only inside a bubblewrap sandbox, and this worker cannot make one: ${sandbox.reason}. ` +
        `To enable it: ${sandbox.remedy} No command was run.`,
    );
    assert.equal(spawned, 0);
  }
  assert.ok(!fs.existsSync(path.join(base, 'ran.txt')));

  // BATON_SHELL_SANDBOX=none: no probe, commands run unsandboxed, and the worker warns at start.
  const none = await probeShellSandbox({ mode: 'none', bwrap: path.join(base, 'missing-bwrap') }, process.env);
  assert.deepEqual(none, { kind: 'none' });
  const warning = describeShellSandbox(none);
  assert.equal(warning.warning, true);
  assert.match(warning.line, /^warning: BATON_SHELL_SANDBOX=none: shell commands run without a sandbox/);
  assert.equal(
    await run(createShellTool({ env: PATH_ONLY, sandbox: none }), { working_directory: base }, 'echo unsandboxed'),
    'exit code: 0\nunsandboxed\n',
  );
  const found = await bwrapSandbox();
  assert.deepEqual(describeShellSandbox(found), {
    line:
      `shell: commands run in a bubblewrap sandbox (${found.bwrap}); their network is egress only, through ` +
      `${found.network?.kind === 'egress' ? found.network.slirp4netns : 'slirp4netns'}, never this host's loopback`,
    warning: false,
  });
});

test('shell sandbox: the orphan sweep finds sandboxed processes whose worker is gone and kills them', async (t) => {
  const work = scratch(t);
  const sandbox = await bwrapSandbox();
  // A sandbox as a worker that was SIGKILLed would have left it: its marker names an owner that cannot exist.
  const marker = `4194305.12345:sandboxed-orphan-${randomBytes(4).toString('hex')}`;
  const args = sandboxArguments(sandbox, { bound: work, cwd: work, network: true });
  const orphan = spawn(sandbox.bwrap, [...args, '--', '/bin/sh', '-c', 'sleep 60 & setsid sleep 61 & wait'], {
    cwd: work,
    env: { ...PATH_ONLY, [SHELL_RUN_MARKER]: marker },
    detached: true,
    stdio: 'ignore',
  });
  t.after(() => orphan.kill('SIGKILL'));
  // bwrap, its PID 1, the shell and the two sleeps, seen from here.
  await until('the sandbox runs', () => processesWithVariable(SHELL_RUN_MARKER, marker).length >= 5);
  const inside = processesWithVariable(SHELL_RUN_MARKER, marker);
  const killed = await sweepOrphanedShellProcesses({ only: (value) => value === marker });
  // Whichever it reached first, killing bwrap or its PID 1 ends the sandbox's namespace and everything in it.
  assert.ok(
    inside.some((pid) => killed.includes(pid)),
    `the sweep killed none of ${inside.join(', ')} (killed ${killed.join(', ')})`,
  );
  await until(
    'every process of the sandbox is gone',
    () => processesWithVariable(SHELL_RUN_MARKER, marker).length === 0,
    3000,
  );
});

test(
  'shell sandbox: a worker killed mid-command takes its sandbox and its slirp4netns with it; unsandboxed, the sweep is what stops it',
  { timeout: 120_000 },
  async (t) => {
    const work = scratch(t);
    for (const mode of ['bwrap', 'none'] as const) {
      const tag = `${mode}-${randomBytes(6).toString('hex')}`;
      const started = startChild(t, work, `export BATON_TEST_TAG=${tag}; sleep 60 & setsid sleep 61 & wait`, {
        BATON_SHELL_SANDBOX: mode,
      });
      const worker = await started.pid;
      await until(`${mode}: the command runs`, () => processesWithVariable('BATON_TEST_TAG', tag).length >= 2, 30_000);
      // The network's helper of a sandboxed command (the world keeps the network on): a process of the call too.
      const helpers = (await shellRunProcesses([worker])).filter((pid) => commandLine(pid).includes('slirp4netns'));
      assert.equal(helpers.length, mode === 'bwrap' ? 1 : 0, `slirp4netns of worker ${worker}`);
      started.child.kill('SIGKILL');
      await new Promise((resolve) => started.child.once('close', resolve));
      if (mode === 'bwrap') {
        // bwrap dies with its parent, and the sandbox's PID namespace with it; slirp4netns sees its exit fd close.
        // No sweep needed.
        await until(
          'the sandbox and its slirp4netns died with their worker',
          () => processesWithVariable('BATON_TEST_TAG', tag).length === 0 && helpers.every((pid) => !isRunning(pid)),
          3000,
        );
        continue;
      }
      // Plain processes outlive their worker, carrying its marker, until a sweep finds the worker gone.
      await sleep(300);
      const orphans = processesWithVariable('BATON_TEST_TAG', tag);
      assert.equal(orphans.length, 2, `worker ${worker}'s commands outlived it`);
      const killed = await sweepOrphanedShellProcesses({ only: (value) => value.startsWith(`${worker}.`) });
      for (const pid of orphans) assert.ok(killed.includes(pid));
      await until('the sweep killed them', () => processesWithVariable('BATON_TEST_TAG', tag).length === 0, 3000);
    }
  },
);
