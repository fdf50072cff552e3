/**
 * The sandbox every `shell` command runs in: bubblewrap (`bwrap`), with namespaces of its own. A command runs as the
 * worker's user, so without it a command could read the worker's environment through `/proc/<ppid>/environ`
 * (DATABASE_URL, API keys) and follow `/proc/<ppid>/cwd` to `.baton/stack.json`, and with them walk around every
 * scope and fence. Inside, it sees no process of the worker, no file of the host but the system directories (read
 * only) and its world's working directory (read-write), and, when the world says so, no network.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isInside } from './files';

/** The world variable that gives a world's commands the network (`on`, the default) or cuts it (`off`). */
export const SHELL_NETWORK_VARIABLE = 'BATON_SHELL_NETWORK';

/** How a worker isolates shell commands: its `BATON_SHELL_SANDBOX` and `BATON_BWRAP` settings. */
export interface ShellSandboxSetting {
  /** `bwrap` (the default): every command in a bubblewrap sandbox; `none`: commands run as plain processes. */
  readonly mode: 'bwrap' | 'none';
  /** The bubblewrap executable. @default `bwrap` found on the worker's PATH */
  readonly bwrap?: string;
  /**
   * Directories a command never sees, even inside its working directory: `baton dev` names its state directory
   * (`.baton/`, which holds `stack.json` and the embedded Postgres). @default none
   */
  readonly hidden?: readonly string[];
}

/** What the worker found at start (see {@link probeShellSandbox}): how the shell tool runs its commands. */
export type ShellSandbox =
  | {
      readonly kind: 'bwrap';
      /** The bubblewrap executable, an absolute path. */
      readonly bwrap: string;
      /** The read-only mounts of the system directories (and the links of a merged /usr), as bwrap arguments. */
      readonly system: readonly string[];
      /** Absolute paths of the directories masked inside a working directory (symlinks resolved at each call). */
      readonly hidden: readonly string[];
    }
  /** `BATON_SHELL_SANDBOX=none`: commands run unsandboxed, as they did before the sandbox. */
  | { readonly kind: 'none' }
  /** The sandbox cannot run here: the shell refuses every command, saying why and what to do. */
  | { readonly kind: 'unavailable'; readonly reason: string; readonly remedy: string };

export type BwrapSandbox = Extract<ShellSandbox, { kind: 'bwrap' }>;

/**
 * The host directories a sandbox sees, read-only: programs, libraries and their configuration. Nothing under
 * `/home`, `/root`, `/var`, `/run` (sockets), `/opt`, `/srv` or `/tmp`; `/etc` because programs need it (users,
 * DNS, certificates, Debian's alternatives).
 */
const SYSTEM_DIRECTORIES = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'] as const;

const BYPASS =
  'Or start the worker with BATON_SHELL_SANDBOX=none to run commands without a sandbox (they can then read ' +
  'everything the worker can, its DATABASE_URL and API keys included).';
const INSTALL_REMEDY = `install bubblewrap (Debian and Ubuntu: \`apt-get install bubblewrap\`), or set BATON_BWRAP to its path. ${BYPASS}`;
const NAMESPACES_REMEDY =
  'bubblewrap needs user, PID and mount namespaces and a fresh /proc. In a container, give it the settings of the ' +
  'README\'s "Running in production" (Docker: security_opt seccomp=unconfined, apparmor=unconfined and ' +
  'systempaths=unconfined, as docker-compose.yml sets them); on a host, allow unprivileged user namespaces ' +
  '(sysctl user.max_user_namespaces above 0; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0). ' +
  BYPASS;

/** How long the start-up probe may take before the sandbox counts as unavailable. */
const PROBE_TIMEOUT_MS = 15_000;

/**
 * Decides, once, how this worker runs shell commands: `none` when the setting says so; else bubblewrap, when a real
 * sandbox (every namespace a command gets, the network cut) runs `/bin/sh -c true`; else `unavailable` with the
 * reason (no bwrap, namespaces refused, not Linux) and how to enable it.
 * @param env the worker's environment, for its PATH
 */
export async function probeShellSandbox(
  setting: ShellSandboxSetting,
  env: Readonly<Record<string, string | undefined>>,
): Promise<ShellSandbox> {
  if (setting.mode === 'none') return { kind: 'none' };
  if (process.platform !== 'linux') {
    return unavailable(`bubblewrap runs on Linux only, and this worker runs on ${process.platform}`, BYPASS);
  }
  const bwrap = setting.bwrap === undefined ? findOnPath('bwrap', env.PATH) : path.resolve(setting.bwrap);
  if (bwrap === undefined) return unavailable('bubblewrap is not installed (no `bwrap` on PATH)', INSTALL_REMEDY);
  try {
    fs.accessSync(bwrap, fs.constants.X_OK);
    if (!fs.statSync(bwrap).isFile()) return unavailable(`BATON_BWRAP ${bwrap} is not a file`, INSTALL_REMEDY);
  } catch (error) {
    const what = setting.bwrap === undefined ? bwrap : `BATON_BWRAP ${bwrap}`;
    return unavailable(
      `${what} cannot be run (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      INSTALL_REMEDY,
    );
  }
  const sandbox: BwrapSandbox = {
    kind: 'bwrap',
    bwrap,
    system: systemMounts(),
    hidden: (setting.hidden ?? []).map((dir) => path.resolve(dir)),
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-sandbox-probe-'));
  try {
    const args = [
      ...sandboxArguments(sandbox, { bound: dir, cwd: dir, network: false }),
      '--',
      '/bin/sh',
      '-c',
      'true',
    ];
    const { code, output } = await runBriefly(bwrap, args, dir);
    if (code === 0) return sandbox;
    const said = output.trim().split('\n').pop()?.trim();
    return unavailable(
      `${bwrap} could not make a sandbox here (${said || `exit code ${String(code)}`})`,
      NAMESPACES_REMEDY,
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One line for the worker's start-up output, and whether it is a warning. */
export function describeShellSandbox(sandbox: ShellSandbox): { line: string; warning: boolean } {
  switch (sandbox.kind) {
    case 'bwrap':
      return { line: `shell: commands run in a bubblewrap sandbox (${sandbox.bwrap})`, warning: false };
    case 'none':
      return {
        line:
          'warning: BATON_SHELL_SANDBOX=none: shell commands run without a sandbox, as this worker’s user: they can ' +
          'read its environment through /proc (DATABASE_URL, API keys), .baton/stack.json and every file it can read',
        warning: true,
      };
    case 'unavailable':
      return {
        line: `warning: the shell tool will refuse every command: ${sandbox.reason}. To enable it: ${sandbox.remedy}`,
        warning: true,
      };
  }
}

/** What the shell tool says when it cannot sandbox a command. */
export function unavailableMessage(sandbox: Extract<ShellSandbox, { kind: 'unavailable' }>): string {
  return (
    `Shell commands run only inside a bubblewrap sandbox, and this worker cannot make one: ${sandbox.reason}. ` +
    `To enable it: ${sandbox.remedy}`
  );
}

/** One command's sandbox. */
export interface SandboxRun {
  /** The directory mounted read-write (the world's working directory): a real path. */
  readonly bound: string;
  /** Where the command starts, inside `bound`. */
  readonly cwd: string;
  /** Whether the command shares the host's network; without it, it has only a loopback of its own. */
  readonly network: boolean;
  /** The HOME the command gets: an empty private directory there, unless that would hide part of `bound`. */
  readonly home?: string;
}

/**
 * bwrap's options for one command, up to (not including) `--` and the command: new user, PID, IPC and UTS
 * namespaces (and network, when cut), no capabilities, a fresh `/proc` and `/dev`, the system directories
 * read-only, a private `/tmp` and HOME, `bound` read-write with the hidden directories inside it masked, and
 * the rest of the root read-only. The command dies with the process that started bwrap (`--die-with-parent`).
 */
export function sandboxArguments(sandbox: BwrapSandbox, run: SandboxRun): string[] {
  const args = ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts'];
  if (!run.network) args.push('--unshare-net');
  args.push('--die-with-parent', '--cap-drop', 'ALL', ...sandbox.system);
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  if (run.home !== undefined && privateHome(run.home, run.bound)) args.push('--tmpfs', run.home);
  args.push('--bind', run.bound, run.bound);
  for (const hidden of sandbox.hidden.map(realOrResolved)) {
    if (hidden !== run.bound && isInside(run.bound, hidden) && isDirectory(hidden)) {
      args.push('--tmpfs', hidden, '--remount-ro', hidden);
    }
  }
  args.push('--remount-ro', '/', '--chdir', run.cwd);
  return args;
}

/**
 * Why a directory cannot be a sandbox's working directory, if it cannot: the whole machine, a directory holding
 * the worker's home, or one inside a hidden directory would put in view what the sandbox exists to hide.
 */
export function boundDirectoryProblem(
  sandbox: BwrapSandbox,
  bound: string,
  home: string | undefined,
): string | undefined {
  if (bound === path.parse(bound).root) return 'is the root of the file system, which the sandbox would make writable';
  if (home !== undefined && path.isAbsolute(home) && isInside(bound, realOrResolved(home))) {
    return `holds this worker's home directory (${home}), which commands must not see`;
  }
  const hidden = sandbox.hidden.map(realOrResolved).find((dir) => isInside(dir, bound));
  if (hidden !== undefined) return `is inside Baton's state directory ${hidden}, which holds its secrets`;
  return undefined;
}

/** A HOME is made private unless it is not a plain absolute path, or a system or working directory holds it. */
function privateHome(home: string, bound: string): boolean {
  if (!path.isAbsolute(home) || path.resolve(home) === '/') return false;
  if (isInside(bound, home)) return false;
  return ![...SYSTEM_DIRECTORIES, '/proc', '/dev'].some((dir) => isInside(dir, home));
}

/** Read-only binds of the system directories that exist, and their symlinks as symlinks (merged /usr). */
function systemMounts(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRECTORIES) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(dir), dir);
    else if (stat.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  return args;
}

function realOrResolved(dir: string): string {
  try {
    return fs.realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

function isDirectory(dir: string): boolean {
  return fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

function findOnPath(name: string, searchPath: string | undefined): string | undefined {
  for (const dir of (searchPath ?? '').split(path.delimiter)) {
    if (dir === '' || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function unavailable(reason: string, remedy: string): ShellSandbox {
  return { kind: 'unavailable', reason, remedy };
}

/** Runs a short command with an empty environment; its exit code (null when it did not finish) and output. */
function runBriefly(command: string, args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const append = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-4096);
    };
    child.stdout.on('data', append);
    child.stderr.on('data', append);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      output += `\ndid not finish within ${PROBE_TIMEOUT_MS / 1000} s`;
    }, PROBE_TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ code: null, output: error.message });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
