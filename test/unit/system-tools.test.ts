/**
 * `npm test`'s system-tools step (testing/system-tools.ts) decided on a made-up machine: which tools the selected
 * files need, which packages bring the missing ones, and whether it installs them, how, or stops with the command to
 * run. The lookups and the runner are the test's, so no apt runs here (`system-tools-install.test.ts` runs the real
 * step against stub programs).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import {
  BASE_SYSTEM,
  SYSTEM_TOOLS,
  ensureSystemTools,
  systemHost,
  systemToolsFor,
  type SystemToolsHost,
} from '../../testing/system-tools';

const ROOT = path.resolve(__dirname, '..', '..');

/** Where the made-up machine keeps its programs. */
const BIN = '/usr/bin';
const SBIN = '/usr/sbin';
/** Every tool of the catalogue, as a Debian machine with all of them installed has them. */
const EVERYTHING = [
  ...['bwrap', 'slirp4netns', 'unshare', 'nsenter', 'tmux', 'script', 'openssl', 'git'].map((name) => `${BIN}/${name}`),
  `${SBIN}/runuser`,
];

interface Run {
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string>> | undefined;
  quiet: boolean;
}

interface FakeMachine {
  /** Absolute paths of executable files. */
  executables?: string[];
  /** Absolute paths of other things that exist (devices, `.git`). */
  present?: string[];
  isRoot?: boolean;
  /** /etc/os-release's ID. @default debian */
  distribution?: string;
  env?: Record<string, string | undefined>;
  /** The test files' text, by path relative to the repository. */
  files?: Record<string, string>;
  /** The exit code of a command (0 unless this says otherwise). */
  exitCode?: (run: Run) => number;
  /** What running a command installs: these executables appear. */
  installs?: (run: Run) => string[];
}

/** A machine of the test's making: what exists, what runs (recorded, never started), and the lines logged. */
function machine(spec: FakeMachine = {}): { host: SystemToolsHost; runs: Run[]; lines: string[] } {
  const executables = new Set(spec.executables ?? []);
  const present = new Set(spec.present ?? ['/dev/net/tun', '/repo/.git']);
  const runs: Run[] = [];
  const host: SystemToolsHost = {
    env: { PATH: `${BIN}:${SBIN}`, ...spec.env },
    isRoot: spec.isRoot ?? true,
    distribution: spec.distribution ?? 'debian',
    root: '/repo',
    exists: (file) => present.has(file) || executables.has(file),
    isExecutable: (file) => executables.has(file),
    readText: (file) => {
      const text = spec.files?.[path.relative('/repo', file)];
      if (text === undefined) throw new Error(`ENOENT: ${file}`);
      return text;
    },
    run: (command, args, options = {}) => {
      const run = { command, args, env: options.env, quiet: options.quiet ?? false };
      runs.push(run);
      for (const file of spec.installs?.(run) ?? []) executables.add(file);
      return Promise.resolve(spec.exitCode?.(run) ?? 0);
    },
  };
  return { host, runs, lines: [] };
}

/** The step on that machine: whether the tests may run, what it ran and what it said. */
async function step(
  files: string[] | undefined,
  spec: FakeMachine = {},
): Promise<{ ready: boolean; runs: Run[]; lines: string[] }> {
  const { host, runs, lines } = machine(spec);
  const ready = await ensureSystemTools(files, { host, log: (line) => lines.push(line) });
  return { ready, runs, lines };
}

/**
 * Made-up test files. Each is written in pieces so that this file's own source does not match the patterns it
 * shows: it needs no system tool itself.
 */
const source = (...pieces: string[]) => pieces.join('');
const LIVE_CLI = source('spawnSync', "('tmux', ['-L']);\n", 'spawn', "(\n  'script',\n");
const SANDBOX = source('await probe', 'ShellSandbox({ mode: "bwrap" }, process.env);');
const BROWSER = source("import { chromiumPath } from '../../testing/", "chromium';");
const PURE = "import assert from 'node:assert/strict';\nassert.equal(1, 1);\n";

test('system tools: a file of pure code needs none, and nothing is looked up or run for it', async () => {
  const pure = await step(['test/unit/watch-patterns.test.ts'], {
    executables: [],
    present: [],
    files: { 'test/unit/watch-patterns.test.ts': PURE },
  });
  assert.deepEqual(pure, { ready: true, runs: [], lines: [] });
  // The repository's own pure unit file, read from disk with the real catalogue.
  const real = systemHost({ PATH: '' });
  assert.deepEqual(systemToolsFor([path.join(ROOT, 'test/unit/watch-patterns.test.ts')], real), []);
});

test('system tools: a file that boots the stack needs the sandbox; the live CLI file tmux and script too', () => {
  const { host } = machine({
    files: {
      'test/integration/env-store.test.ts': PURE,
      'test/e2e/live-cli.test.ts': LIVE_CLI,
      'test/unit/shell-sandbox.test.ts': SANDBOX,
      'test/e2e/explorer-browser.test.ts': BROWSER,
    },
  });
  const names = (files: string[]) => systemToolsFor(files, host).map((tool) => tool.name);
  const sandbox = ['bwrap', 'slirp4netns', 'unshare', 'nsenter', '/dev/net/tun'];
  assert.deepEqual(names(['test/integration/env-store.test.ts']), sandbox);
  assert.deepEqual(names(['test/unit/shell-sandbox.test.ts']), sandbox);
  assert.deepEqual(names(['test/e2e/live-cli.test.ts']), [...sandbox, 'tmux', 'script']);
  assert.deepEqual(names(['test/e2e/explorer-browser.test.ts']), [...sandbox, 'chromium']);
  // A full run (no selection): every tool that applies here.
  assert.deepEqual(
    systemToolsFor(undefined, host).map((tool) => tool.name),
    SYSTEM_TOOLS.map((tool) => tool.name),
  );
});

test('system tools: runuser only as root, git only in a git checkout', () => {
  const full = (spec: FakeMachine) => systemToolsFor(undefined, machine(spec).host).map((tool) => tool.name);
  assert.ok(full({ isRoot: true }).includes('runuser'));
  assert.ok(!full({ isRoot: false }).includes('runuser'));
  assert.ok(full({ present: ['/repo/.git'] }).includes('git'));
  assert.ok(!full({ present: [] }).includes('git'));
});

test('system tools: this file needs no system tool', () => {
  assert.deepEqual(systemToolsFor([__filename], systemHost({ PATH: '' })), []);
});

test('system tools: every tool of the catalogue is needed by a test file of this repository', () => {
  const files = testSources();
  const host = systemHost({ PATH: '' });
  for (const tool of SYSTEM_TOOLS) {
    const users = files.filter((file) => {
      const relative = path.relative(ROOT, file);
      const stackless = relative.startsWith('test/unit/') || relative.startsWith('test/replay/');
      return (tool.usedBy.stackSuites && !stackless) || (tool.usedBy.pattern?.test(host.readText(file)) ?? false);
    });
    assert.ok(users.length > 0, `no test file needs ${tool.name} any more: take it out of SYSTEM_TOOLS`);
  }
  // And the files the patterns name do match them (a pattern that matches nothing would leave its tool out).
  const needs = (file: string) => systemToolsFor([path.join(ROOT, file)], host).map((tool) => tool.name);
  assert.ok(needs('test/e2e/live-cli.test.ts').includes('tmux'));
  assert.ok(needs('test/e2e/live-cli.test.ts').includes('script'));
  assert.ok(needs('test/e2e/explorer-browser.test.ts').includes('chromium'));
  assert.ok(needs('test/unit/shell-sandbox.test.ts').includes('bwrap'));
  assert.ok(needs('test/unit/shell-tool.test.ts').includes('slirp4netns'));
  assert.ok(needs('test/unit/repository-paths.test.ts').includes('git'));
});

test('system tools: every program a test starts by name is in the catalogue, or on every Debian system', () => {
  const catalogued = new Set([...SYSTEM_TOOLS.map((tool) => tool.name), ...BASE_SYSTEM]);
  const started = new Map<string, string>();
  const call = /\b(?:spawn|spawnSync|execFile|execFileSync|execFileAsync)\(\s*'([^']+)'/g;
  for (const file of [...testSources(), ...walk(path.join(ROOT, 'testing'))]) {
    for (const match of fs.readFileSync(file, 'utf8').matchAll(call)) {
      started.set(match[1] ?? '', path.relative(ROOT, file));
    }
  }
  assert.ok(started.has('tmux'), 'the scan finds the programs tests start');
  const unknown = [...started].filter(([program]) => !catalogued.has(program));
  assert.deepEqual(unknown, [], 'add these to SYSTEM_TOOLS in testing/system-tools.ts (or BASE_SYSTEM)');
});

test('system tools: as root, apt-get installs the missing packages, each once, after one line saying why', async () => {
  const result = await step(undefined, {
    executables: [
      `${BIN}/apt-get`,
      `${BIN}/unshare`,
      `${BIN}/script`,
      `${BIN}/openssl`,
      `${BIN}/git`,
      `${SBIN}/runuser`,
    ],
    installs: (run) => (run.args.includes('install') ? EVERYTHING.concat('/usr/bin/chromium') : []),
  });
  assert.equal(result.ready, true);
  assert.deepEqual(
    result.runs.map((run) => [run.command, ...run.args]),
    [
      [`${BIN}/apt-get`, 'update'],
      [
        `${BIN}/apt-get`,
        'install',
        '-y',
        '--no-install-recommends',
        'bubblewrap',
        'slirp4netns',
        'util-linux',
        'chromium',
        'tmux',
      ],
    ],
  );
  assert.ok(result.runs.every((run) => run.env?.DEBIAN_FRONTEND === 'noninteractive' && !run.quiet));
  assert.equal(result.lines.length, 1);
  assert.match(
    result.lines[0] ?? '',
    /^installing bubblewrap slirp4netns util-linux chromium tmux with apt-get as root, for /,
  );
  for (const why of [
    "bubblewrap for bwrap (the shell tool's sandbox)",
    'util-linux for nsenter (',
    "chromium (the explorer's browser tests)",
    'tmux (',
  ]) {
    assert.ok(result.lines[0]?.includes(why), `${why} in: ${result.lines[0]}`);
  }
});

test('system tools: nothing missing runs nothing, even where apt-get and sudo are', async () => {
  const result = await step(undefined, {
    isRoot: false,
    executables: [...EVERYTHING, `${BIN}/apt-get`, `${BIN}/sudo`, '/usr/bin/chromium'],
  });
  assert.deepEqual(result, { ready: true, runs: [], lines: [] });
});

test('system tools: without apt-get the step stops with one line naming the packages, and runs nothing', async () => {
  const result = await step(undefined, { executables: EVERYTHING.filter((file) => !file.endsWith('/tmux')) });
  assert.equal(result.ready, false);
  assert.deepEqual(result.runs, []);
  assert.deepEqual(result.lines, [
    "the tests need chromium (the explorer's browser tests), tmux (the live CLI tests' terminal), and there is no " +
      "apt-get to install them: install chromium tmux (Debian's names) with this system's package manager, or set " +
      'BATON_TEST_SYSTEM_TOOLS=skip to run the tests without them (those that need them fail)',
  ]);
});

test('system tools: not root and no sudo: one line with the exact sudo command, and nothing run', async () => {
  const result = await step(undefined, {
    isRoot: false,
    executables: [`${BIN}/apt-get`, '/usr/bin/chromium', ...EVERYTHING.filter((file) => !/bwrap|slirp/.test(file))],
  });
  assert.equal(result.ready, false);
  assert.deepEqual(result.runs, []);
  assert.equal(result.lines.length, 1);
  assert.ok(
    result.lines[0]?.includes(
      '`sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap slirp4netns`',
    ),
    result.lines[0],
  );
});

test('system tools: not root, sudo asks for a password: it is asked with -n only, then the same line', async () => {
  const result = await step(['test/integration/x.test.ts'], {
    isRoot: false,
    executables: [`${BIN}/apt-get`, `${BIN}/sudo`, `${BIN}/unshare`, `${BIN}/nsenter`],
    files: { 'test/integration/x.test.ts': PURE },
    exitCode: (run) => (run.command === `${BIN}/sudo` ? 1 : 0),
  });
  assert.equal(result.ready, false);
  assert.deepEqual(result.runs, [{ command: `${BIN}/sudo`, args: ['-n', 'true'], env: undefined, quiet: true }]);
  assert.match(
    result.lines[0] ?? '',
    /not root, and sudo is missing or asks for a password: run `sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap slirp4netns`/,
  );
});

test('system tools: not root with passwordless sudo: apt-get runs through sudo -n', async () => {
  const result = await step(['test/integration/x.test.ts'], {
    isRoot: false,
    executables: [`${BIN}/apt-get`, `${BIN}/sudo`, `${BIN}/unshare`, `${BIN}/nsenter`, `${BIN}/slirp4netns`],
    files: { 'test/integration/x.test.ts': PURE },
    installs: (run) => (run.args.includes('install') ? [`${BIN}/bwrap`] : []),
  });
  assert.equal(result.ready, true, result.lines.join('\n'));
  const sudo = `${BIN}/sudo`;
  const apt = `${BIN}/apt-get`;
  assert.deepEqual(
    result.runs.map((run) => [run.command, ...run.args]),
    [
      [sudo, '-n', 'true'],
      [sudo, '-n', 'DEBIAN_FRONTEND=noninteractive', apt, 'update'],
      [sudo, '-n', 'DEBIAN_FRONTEND=noninteractive', apt, 'install', '-y', '--no-install-recommends', 'bubblewrap'],
    ],
  );
  assert.match(result.lines[0] ?? '', /^installing bubblewrap with apt-get through sudo, for bubblewrap for bwrap/);
});

test('system tools: BATON_TEST_SYSTEM_TOOLS=skip installs nothing and lets the tests run; another value stops', async () => {
  const spec: FakeMachine = { executables: [`${BIN}/apt-get`], env: { BATON_TEST_SYSTEM_TOOLS: 'skip' } };
  const skipped = await step(undefined, spec);
  assert.equal(skipped.ready, true);
  assert.deepEqual(skipped.runs, []);
  assert.equal(skipped.lines.length, 1);
  assert.match(
    skipped.lines[0] ?? '',
    /^BATON_TEST_SYSTEM_TOOLS=skip: installing nothing, so the tests that need these fail: bubblewrap/,
  );

  const wrong = await step(undefined, { ...spec, env: { BATON_TEST_SYSTEM_TOOLS: 'no' } });
  assert.deepEqual(wrong, {
    ready: false,
    runs: [],
    lines: ["BATON_TEST_SYSTEM_TOOLS is 'no': it takes install (the default) or skip"],
  });
});

test('system tools: a failed install stops the run with the command to run by hand; a failed update does not', async () => {
  const failed = await step(undefined, {
    executables: [`${BIN}/apt-get`, ...EVERYTHING, '/usr/bin/chromium'].filter((file) => !file.endsWith('/tmux')),
    exitCode: (run) => (run.args.includes('install') ? 100 : 0),
  });
  assert.equal(failed.ready, false);
  assert.equal(failed.runs.length, 2);
  assert.equal(
    failed.lines[1],
    'apt-get install exited with 100: run `apt-get update && apt-get install -y --no-install-recommends tmux` and then the tests again, or set BATON_TEST_SYSTEM_TOOLS=skip to run the tests without them (those that need them fail)',
  );

  const staleLists = await step(undefined, {
    executables: [`${BIN}/apt-get`, ...EVERYTHING, '/usr/bin/chromium'].filter((file) => !file.endsWith('/tmux')),
    exitCode: (run) => (run.args.includes('update') ? 100 : 0),
    installs: (run) => (run.args.includes('install') ? [`${BIN}/tmux`] : []),
  });
  assert.equal(staleLists.ready, true);
  assert.equal(staleLists.lines[1], 'apt-get update exited with 100: installing from the package lists there are');
});

test('system tools: a package that installs without bringing the tool where the tests look stops the run', async () => {
  const result = await step(undefined, {
    executables: [`${BIN}/apt-get`, ...EVERYTHING],
    installs: () => ['/opt/chromium/chrome'],
  });
  assert.equal(result.ready, false);
  assert.equal(result.runs.length, 2);
  assert.match(
    result.lines[1] ?? '',
    /^installed chromium, yet still missing: chromium \(the explorer's browser tests\)/,
  );
});

test('system tools: a missing /dev/net/tun stops the run with how to get it, and nothing is installed', async () => {
  const result = await step(undefined, {
    executables: [`${BIN}/apt-get`, ...EVERYTHING.filter((file) => !file.endsWith('/tmux'))],
    present: ['/repo/.git'],
    env: { BATON_CHROMIUM: '/usr/bin/chromium' },
  });
  assert.equal(result.ready, false);
  assert.deepEqual(result.runs, []);
  assert.deepEqual(result.lines, [
    "/dev/net/tun is missing (slirp4netns's network interface), and no package here brings it: on a host, load the " +
      'tun module (`modprobe tun` as root); in a container, start it with `--device /dev/net/tun`; then, for ' +
      'chromium, tmux: apt-get update && apt-get install -y --no-install-recommends chromium tmux; or set ' +
      'BATON_TEST_SYSTEM_TOOLS=skip to run the tests without them (those that need them fail)',
  ]);
});

test('system tools: on Ubuntu, whose chromium is a snap, a missing Chromium stops the run with how to get one', async () => {
  const result = await step(undefined, {
    distribution: 'ubuntu',
    executables: [`${BIN}/apt-get`, ...EVERYTHING.filter((file) => !file.endsWith('/tmux'))],
  });
  assert.equal(result.ready, false);
  assert.deepEqual(result.runs, []);
  assert.deepEqual(result.lines, [
    "chromium is missing (the explorer's browser tests), and no package here brings it: Ubuntu's chromium package " +
      'is a snap: install a Chromium or Chrome binary and set BATON_CHROMIUM to it; then, for tmux: apt-get update && ' +
      'apt-get install -y --no-install-recommends tmux; or set BATON_TEST_SYSTEM_TOOLS=skip to run the tests without ' +
      'them (those that need them fail)',
  ]);
  // With BATON_CHROMIUM naming one, the rest installs as on Debian.
  const named = await step(undefined, {
    distribution: 'ubuntu',
    executables: [`${BIN}/apt-get`, '/opt/chrome', ...EVERYTHING.filter((file) => !file.endsWith('/tmux'))],
    env: { BATON_CHROMIUM: '/opt/chrome' },
    installs: () => [`${BIN}/tmux`],
  });
  assert.equal(named.ready, true, named.lines.join('\n'));
  assert.deepEqual(named.runs.at(-1)?.args, ['install', '-y', '--no-install-recommends', 'tmux']);
});

test('system tools: a tool is looked for where the tests look: BATON_BWRAP and BATON_CHROMIUM name the only place', async () => {
  const everything = [...EVERYTHING, '/usr/bin/chromium', `${BIN}/apt-get`];
  const named = await step(undefined, {
    executables: [...everything, '/opt/bwrap'],
    env: { BATON_BWRAP: '/opt/bwrap', BATON_CHROMIUM: '/usr/bin/chromium' },
  });
  assert.deepEqual(named, { ready: true, runs: [], lines: [] });
  // Named but not there: missing, whatever PATH holds; the install cannot fix that, and says so.
  const elsewhere = await step(undefined, { executables: everything, env: { BATON_CHROMIUM: '/opt/no-chromium' } });
  assert.equal(elsewhere.ready, false);
  assert.match(elsewhere.lines[0] ?? '', /^installing chromium with apt-get as root/);
  assert.match(elsewhere.lines[1] ?? '', /^installed chromium, yet still missing: chromium/);
});

function testSources(): string[] {
  return walk(path.join(ROOT, 'test')).filter(
    (file) => file.endsWith('.test.ts') && !file.includes(`${path.sep}histories${path.sep}`),
  );
}

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? walk(full) : [full];
  });
}
