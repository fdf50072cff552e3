/**
 * The system-tools step as `npm test` and `.ci/run` run it (testing/system-tools.ts, and testing/run-tests.ts calling
 * it), on a PATH of a scratch directory that hides this machine's tools, with stub `apt-get` and `sudo` programs there
 * that record how they were called: the stub apt-get "installs" a package by putting the programs it brings on that
 * PATH. It installs what is missing, as root or through sudo, and stops cleanly, before any test runs, when it
 * cannot. The not-root cases run as `nobody` (through runuser) when the tests run as root.
 */
import assert from 'node:assert/strict';
import { execFile, type ExecFileException } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { skipUnlessCi } from '../../testing/ci';

const ROOT = path.resolve(__dirname, '..', '..');
const STEP = path.join(ROOT, 'testing', 'system-tools.ts');
const RUN_TESTS = path.join(ROOT, 'testing', 'run-tests.ts');
const AS_ROOT = process.getuid?.() === 0;
/** What the stub apt-get puts on PATH for each package it is asked to install. */
const BRINGS: Record<string, string[]> = {
  bubblewrap: ['bwrap'],
  slirp4netns: ['slirp4netns'],
  'util-linux': ['unshare', 'nsenter', 'runuser'],
  bsdutils: ['script'],
  tmux: ['tmux'],
  openssl: ['openssl'],
  git: ['git'],
};

interface Scratch {
  dir: string;
  /** The only directory on the step's PATH. */
  bin: string;
  /** Where BATON_CHROMIUM points: the stub apt-get's `chromium` puts a program there. */
  chromium: string;
  /** What the stubs were asked to do, one line per call. */
  calls(): string[];
}

/** A scratch directory with stub apt-get and sudo, usable by `nobody` too. */
function scratch(t: TestContext, options: { aptGet?: boolean; sudoRefuses?: boolean; installFails?: boolean } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-system-tools-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  for (const writable of [dir, bin]) fs.chmodSync(writable, 0o777);
  const log = path.join(dir, 'calls.log');
  const chromium = path.join(dir, 'chromium');
  const program = (name: string, text: string) => fs.writeFileSync(path.join(bin, name), text, { mode: 0o755 });
  if (options.aptGet !== false) {
    const brings = Object.entries(BRINGS)
      .map(([pkg, programs]) => `      ${pkg}) made="${programs.map((name) => `${bin}/${name}`).join(' ')}" ;;`)
      .join('\n');
    program(
      'apt-get',
      `#!/bin/sh
PATH=/usr/bin:/bin
echo "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> ${log}
echo "apt-get output: $1"
[ "$1" = install ] || exit 0
${options.installFails === true ? 'echo "E: Unable to locate package" >&2; exit 100' : ''}
for word in "$@"; do
  made=""
  case "$word" in
${brings}
      chromium) made="${chromium}" ;;
  esac
  for file in $made; do printf '#!/bin/sh\\n' > "$file"; chmod 755 "$file"; done
done
`,
    );
    program(
      'sudo',
      `#!/bin/sh
PATH=/usr/bin:/bin
echo "sudo $*" >> ${log}
[ "$1" = -n ] || exit 1
shift
${options.sudoRefuses === true ? 'echo "sudo: a password is required" >&2; exit 1' : ''}
while case "$1" in *=*) true ;; *) false ;; esac; do export "$1"; shift; done
exec "$@"
`,
    );
  }
  return {
    dir,
    bin,
    chromium,
    calls: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []),
  } satisfies Scratch;
}

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node --import tsx <script> <args>` with only the scratch PATH, BATON_CHROMIUM and `variables` in its
 * environment; as `nobody` when `asNobody` (this process being root), else as this process's user.
 */
function runNode(
  box: Scratch,
  script: string,
  args: readonly string[],
  options: { asNobody?: boolean; variables?: Record<string, string> } = {},
): Promise<Outcome> {
  const env = { PATH: box.bin, BATON_CHROMIUM: box.chromium, HOME: box.dir, ...options.variables };
  const nodeArgs = ['--import', 'tsx', script, ...args];
  const done =
    (resolve: (outcome: Outcome) => void) => (error: ExecFileException | null, stdout: string, stderr: string) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
  const timeout = 120_000;
  if (options.asNobody === true) {
    // `env -i` hands the step exactly this environment, whatever runuser would keep or reset.
    const variables = Object.entries(env).map(([name, value]) => `${name}=${value}`);
    return new Promise((resolve) =>
      execFile(
        'runuser',
        ['-u', 'nobody', '--', '/usr/bin/env', '-i', ...variables, process.execPath, ...nodeArgs],
        { cwd: ROOT, env: { PATH: process.env.PATH }, timeout },
        done(resolve),
      ),
    );
  }
  return new Promise((resolve) => execFile(process.execPath, nodeArgs, { cwd: ROOT, env, timeout }, done(resolve)));
}

/** Whether the not-root cases can run: as `nobody` when this is root (and `nobody` can read the checkout). */
async function notRoot(t: TestContext): Promise<{ asNobody: boolean } | undefined> {
  if (!AS_ROOT) return { asNobody: false };
  const reach = await new Promise<boolean>((resolve) =>
    execFile('runuser', ['-u', 'nobody', '--', 'test', '-r', STEP], (error) => resolve(error === null)),
  );
  if (reach) return { asNobody: true };
  skipUnlessCi(t, `runuser -u nobody cannot read ${STEP}: the not-root cases are not exercised here`);
  return undefined;
}

/** The `[system tools] …` lines of a run. */
const stepLines = (output: string) => output.split('\n').filter((line) => line.startsWith('[system tools] '));

test('system tools step: as root, apt-get installs every missing tool, and a second run installs nothing', async (t) => {
  if (!AS_ROOT) return skipUnlessCi(t, 'only applies when running as root');
  const box = scratch(t);
  const first = await runNode(box, STEP, []);
  assert.equal(first.code, 0, first.stderr);
  const packages = 'bubblewrap slirp4netns util-linux chromium tmux bsdutils openssl git';
  const lines = stepLines(first.stderr);
  assert.equal(lines.length, 1, first.stderr);
  assert.match(lines[0] ?? '', new RegExp(`^\\[system tools\\] installing ${packages} with apt-get as root, for `));
  assert.ok(lines[0]?.includes("bubblewrap for bwrap (the shell tool's sandbox)"), lines[0]);
  assert.deepEqual(box.calls(), [
    'apt-get update DEBIAN_FRONTEND=noninteractive',
    `apt-get install -y --no-install-recommends ${packages} DEBIAN_FRONTEND=noninteractive`,
  ]);
  // apt-get's own output is passed on, to stderr (stdout carries the test report).
  assert.match(first.stderr, /^apt-get output: update$/m);
  assert.match(first.stderr, /^apt-get output: install$/m);
  assert.equal(first.stdout, '');

  const again = await runNode(box, STEP, []);
  assert.deepEqual(again, { code: 0, stdout: '', stderr: '' });
  assert.equal(box.calls().length, 2, 'nothing run the second time');
});

test('system tools step: not root, with passwordless sudo, apt-get runs through sudo -n', async (t) => {
  const user = await notRoot(t);
  if (user === undefined) return;
  const box = scratch(t);
  const result = await runNode(box, STEP, ['test/e2e/live-cli.test.ts'], user);
  assert.equal(result.code, 0, result.stderr);
  const packages = 'bubblewrap slirp4netns util-linux tmux bsdutils';
  assert.match(
    stepLines(result.stderr)[0] ?? '',
    new RegExp(`^\\[system tools\\] installing ${packages} with apt-get through sudo, for `),
  );
  const aptGet = path.join(box.bin, 'apt-get');
  assert.deepEqual(box.calls(), [
    'sudo -n true',
    `sudo -n DEBIAN_FRONTEND=noninteractive ${aptGet} update`,
    'apt-get update DEBIAN_FRONTEND=noninteractive',
    `sudo -n DEBIAN_FRONTEND=noninteractive ${aptGet} install -y --no-install-recommends ${packages}`,
    `apt-get install -y --no-install-recommends ${packages} DEBIAN_FRONTEND=noninteractive`,
  ]);
});

test('system tools step: not root, sudo asks for a password: one line with the command, nothing installed', async (t) => {
  const user = await notRoot(t);
  if (user === undefined) return;
  const box = scratch(t, { sudoRefuses: true });
  const result = await runNode(box, STEP, ['test/e2e/live-cli.test.ts'], user);
  assert.equal(result.code, 1);
  assert.deepEqual(box.calls(), ['sudo -n true']);
  const lines = stepLines(result.stderr);
  assert.equal(lines.length, 1, result.stderr);
  assert.ok(
    lines[0]?.includes(
      'run `sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap slirp4netns util-linux tmux bsdutils` and then the tests again',
    ),
    lines[0],
  );
  assert.equal(result.stderr, `${lines[0] ?? ''}\n`, 'sudo said nothing on the terminal');
});

test('system tools step: without apt-get it stops with one line and a failing exit code', async (t) => {
  const box = scratch(t, { aptGet: false });
  const result = await runNode(box, STEP, []);
  assert.equal(result.code, 1);
  assert.deepEqual(box.calls(), []);
  assert.equal(stepLines(result.stderr).length, 1);
  assert.match(
    result.stderr,
    /there is no apt-get to install them: install bubblewrap slirp4netns util-linux chromium tmux bsdutils/,
  );
});

test('system tools step: a failed apt-get install stops with the command to run by hand', async (t) => {
  if (!AS_ROOT) return skipUnlessCi(t, 'only applies when running as root');
  const box = scratch(t, { installFails: true });
  const result = await runNode(box, STEP, ['test/e2e/live-cli.test.ts']);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /E: Unable to locate package/);
  assert.match(
    stepLines(result.stderr).at(-1) ?? '',
    /^\[system tools\] apt-get install exited with 100: run `apt-get update && apt-get install -y --no-install-recommends bubblewrap slirp4netns util-linux tmux bsdutils` and then the tests again/,
  );
});

test('system tools step: BATON_TEST_SYSTEM_TOOLS=skip runs no apt-get and lets the tests go on', async (t) => {
  const box = scratch(t);
  const result = await runNode(box, STEP, [], { variables: { BATON_TEST_SYSTEM_TOOLS: 'skip' } });
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(box.calls(), []);
  assert.match(result.stderr, /^\[system tools\] BATON_TEST_SYSTEM_TOOLS=skip: installing nothing/);
});

test('npm test: a pure unit file never calls apt-get; a file that needs a missing tool stops before any test runs', async (t) => {
  const box = scratch(t, { sudoRefuses: true });
  const pure = await runNode(box, RUN_TESTS, ['test/unit/watch-patterns.test.ts']);
  assert.equal(pure.code, 0, pure.stderr);
  assert.deepEqual(box.calls(), []);
  assert.match(pure.stderr, /tests executed, 0 skipped/);

  const bare = scratch(t, { aptGet: false });
  const stopped = await runNode(bare, RUN_TESTS, ['test/unit/shell-sandbox.test.ts']);
  assert.equal(stopped.code, 1);
  assert.match(
    stopped.stderr,
    /^\[npm test\] the tests need bubblewrap for bwrap .*there is no apt-get to install them/m,
  );
  assert.doesNotMatch(stopped.stderr, /running \d+ test files|tests executed/);
  assert.equal(stopped.stdout, '', 'no test reported');
});
