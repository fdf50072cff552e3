/**
 * The `shell` tool: runs one command with `sh -c` in a directory the tool can resolve, inside a bubblewrap sandbox
 * (shell-sandbox.ts) and in its own process group, and returns its exit status with the tail of its output. Nothing
 * is started until the sandbox and the directory are settled: a call in a world without `working_directory`, on a
 * worker that cannot make a sandbox, or wanting a network the worker cannot give, is refused before any spawn.
 */
import { WORKING_DIRECTORY_VARIABLE } from '../../common/env-text';
import { TOOL_VARIABLE_PREFIX } from '../../common/world-variables';
import { spawn as spawnProcess, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { confinePath, isCode } from './files';
import {
  attachEgress,
  GATE_FD,
  boundDirectoryProblem,
  egressLaunch,
  noNetworkMessage,
  probeShellSandbox,
  RESOLV_CONF_FD,
  sandboxArguments,
  SHELL_NETWORK_VARIABLE,
  STATUS_FD,
  stdioPipe,
  unavailableMessage,
  type AttachedEgress,
  type BwrapSandbox,
  type EgressNetwork,
  type ShellSandbox,
} from './shell-sandbox';
import { defineTool, ToolError, type ToolContext, type ToolDefinition } from './types';

/**
 * Starts the command's process (bwrap, or the shell itself without a sandbox) with stdin ignored and its output on
 * pipes: `child_process.spawn`, or a stand-in that tests use to count spawns.
 */
export type ShellSpawn = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;

export interface ShellToolOptions {
  /**
   * Output bytes kept per call; past it the start is dropped (the end matters most) and the result says how much.
   * @default 65536
   */
  maxOutputBytes?: number;
  /** Seconds a command may run when the model names no `timeout_s`. @default 60 */
  defaultTimeoutS?: number;
  /**
   * The largest `timeout_s` the model may ask for. Keep it under the tool activity's start-to-close timeout, or
   * Temporal cancels the activity first (which also kills the command, as any cancellation does). @default 3600
   */
  maxTimeoutS?: number;
  /** The shell run as `<shell> -c <command>`. @default '/bin/sh' */
  shell?: string;
  /** How long a stopped command's processes get between SIGTERM and SIGKILL. @default 2000 */
  killGraceMs?: number;
  /** How often the tool heartbeats while a command runs. @default 1000 */
  heartbeatIntervalMs?: number;
  /**
   * The environment commands run with, before the world's `env.NAME` variables are added (see
   * {@link createShellTool}). Never the worker's own environment: that holds the database URL and API keys.
   * @default {@link DEFAULT_SHELL_ENV}
   */
  env?: Readonly<Record<string, string>>;
  /**
   * How commands are isolated: what the worker found at start (`probeShellSandbox`). Unavailable: every call is
   * refused, saying why. @default bubblewrap on the PATH of `env`, probed once at the first call
   */
  sandbox?: ShellSandbox | Promise<ShellSandbox>;
  /** @default `child_process.spawn` */
  spawn?: ShellSpawn;
}

const NO_COMMAND_RUN = 'No command was run.';

/** The environment of commands when the worker passes none: a standard PATH and a UTF-8 locale, nothing else. */
export const DEFAULT_SHELL_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  LANG: 'C.UTF-8',
});

/** The world's variables meant for tools (`env.NAME`), by their exported names (names a shell cannot hold are left out). */
export function toolVariables(variables: Readonly<Record<string, string>>): Record<string, string> {
  const exported: Record<string, string> = {};
  for (const [name, value] of Object.entries(variables)) {
    if (!name.startsWith(TOOL_VARIABLE_PREFIX)) continue;
    const bare = name.slice(TOOL_VARIABLE_PREFIX.length);
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(bare) && bare !== SHELL_RUN_MARKER) exported[bare] = value;
  }
  return exported;
}

/**
 * Builds the `shell` tool (`{ command, directory?, timeout_s? }`, run in the tool activity). POSIX only: it relies
 * on process groups; its sandbox on Linux.
 *
 * **Directory.** The world's `working_directory` is the root the tool is confined to, and it must be set: a world
 * without one has chosen no root, and every call is refused with guidance (an absolute `directory` does not stand in
 * for it: that would let the model bind any host directory, `/proc` included, read-write). It must be an existing
 * directory (an absolute path); a `directory` argument is resolved against it (relative or absolute) and refused
 * unless its real path (symlinks followed) lies inside it; without one the command runs in the root itself. Every
 * refusal happens before anything is spawned.
 *
 * **Sandbox.** With `options.sandbox` of kind `bwrap` (what a worker uses wherever bubblewrap runs) the command
 * runs in a bubblewrap sandbox (`sandboxArguments`): its own user, PID, IPC and UTS namespaces and a fresh `/proc`,
 * so no process of the worker is visible and no `/proc/<pid>/environ` or `cwd` of one can be read; the system
 * directories read-only; a private `/tmp` and HOME; the world's `working_directory` read-write and no other host
 * path at all, so not the worker's files, its home or `.baton/` (a hidden directory inside the working directory is
 * masked); and never the host's loopback: with {@link SHELL_NETWORK_VARIABLE}`=off` only a loopback of its own,
 * otherwise (the default) egress from a network namespace of its own through slirp4netns (`egressLaunch`,
 * `attachEgress`: the command starts once its interface is up; a world wanting the network on a worker whose probe
 * found no slirp4netns is refused, saying what to install). A working directory that is `/`, a system or kernel
 * directory (`/usr`, `/etc`, `/proc`, `/sys`, `/dev`…), holds the worker's home or lies in a hidden directory is
 * refused. bwrap itself is started with the command's environment, so the sandbox's PID 1 shows nothing else either.
 * Kind `unavailable`: every call is refused with the reason and how to enable the sandbox; kind `none`
 * (`BATON_SHELL_SANDBOX=none`): commands run as plain processes of the worker's user, on the host's network with
 * its loopback, and a `BATON_SHELL_NETWORK=off` world is refused, since nothing could cut its network.
 *
 * **Process.** `<shell> -c <command>` runs with stdin closed and a minimal environment: `options.env` (the worker
 * passes its PATH, HOME and LANG) or {@link DEFAULT_SHELL_ENV}, plus the world's variables meant for tools
 * (`env.NAME=value` is exported as `NAME`). Never the worker's own environment, which holds the database URL and
 * API keys: a command that could read them could bypass every scope and fence. Other world variables are not
 * exported: they exist for prompts and for this tool's directory; a prompt can still pass a value on
 * (`{{ name }}`) in the command it asks for. The process started (bwrap, or the shell) leads its own process group
 * and session.
 *
 * **Ending.** On timeout (`timeout_s`), on cancellation of the activity (`context.signal`), and when the shell
 * exits, every process of the call gets SIGTERM, then SIGKILL once they are gone or `killGraceMs` passes. "Every
 * process" is the started process's group plus every process whose environment carries this call's
 * {@link SHELL_RUN_MARKER} value, found through `/proc`: a process that left the group or the session (`setsid`, a
 * double fork, `nohup`) inherits the marker and is killed too. In the sandbox, bwrap itself gets only the SIGKILL
 * (its death ends the sandbox's PID namespace, and every process in it, marker or not, at once), and the sandbox
 * ends when the shell exits. slirp4netns carries the marker too and is stopped with the call; a worker that dies
 * closes its exit fd, which ends it as well. The call returns once they are gone (waiting at most a short moment
 * more for the output pipes), never waiting on a process that holds the pipes open. So nothing the command started
 * outlives the call (without the sandbox, short of a process that scrubs its own environment with `env -i`). A
 * server started with `&` is stopped when the command returns, and the description tells the model so. A cancelled
 * call rejects with the signal's reason once its processes are gone.
 *
 * **Result.** `exit code: N` (a non-zero code is a normal result, not an error; in the sandbox a shell killed by a
 * signal reads 128 + its number, as shells report it), `terminated by signal SIG…`, or
 * `timed out after N s (killed)`, then stdout and stderr interleaved in arrival order. Past `maxOutputBytes` the
 * start of the output is dropped (at a UTF-8 character boundary) and a line before the tail says how many bytes
 * were. While the command runs, `context.heartbeat({ tool: 'shell', elapsedMs, bytes })` reports progress. A
 * sandbox that could not start the command is a ToolError with bwrap's message.
 *
 * @throws RangeError when the options are not positive whole numbers or `defaultTimeoutS` exceeds `maxTimeoutS`.
 */
export function createShellTool(options: ShellToolOptions = {}): ToolDefinition {
  const settings = Object.freeze({
    maxOutputBytes: options.maxOutputBytes ?? 65_536,
    defaultTimeoutS: options.defaultTimeoutS ?? 60,
    maxTimeoutS: options.maxTimeoutS ?? 3600,
    shell: options.shell ?? '/bin/sh',
    killGraceMs: options.killGraceMs ?? 2000,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 1000,
    env: Object.freeze({ ...(options.env ?? DEFAULT_SHELL_ENV) }),
    spawn: options.spawn ?? (spawnProcess satisfies ShellSpawn),
  });
  let sandbox: Promise<ShellSandbox> | undefined =
    options.sandbox === undefined ? undefined : Promise.resolve(options.sandbox);
  const findSandbox = () => (sandbox ??= defaultSandbox(settings.env.PATH));
  for (const key of [
    'maxOutputBytes',
    'defaultTimeoutS',
    'maxTimeoutS',
    'killGraceMs',
    'heartbeatIntervalMs',
  ] as const) {
    const value = settings[key];
    if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${key} must be a positive integer`);
  }
  if (settings.defaultTimeoutS > settings.maxTimeoutS) throw new RangeError('defaultTimeoutS exceeds maxTimeoutS');

  const parameters = z.strictObject({
    command: z.string().min(1).describe('The command line, run with `sh -c` (pipes, `&&` and redirections work).'),
    directory: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Directory to run in, inside the world's working_directory (relative paths resolve against it). Omit it " +
          'to run in the working_directory itself.',
      ),
    timeout_s: z
      .number()
      .int()
      .min(1)
      .max(settings.maxTimeoutS)
      .default(settings.defaultTimeoutS)
      .describe(
        `Seconds before the command and everything it started are killed ` +
          `(default ${settings.defaultTimeoutS}, at most ${settings.maxTimeoutS}).`,
      ),
  });

  return defineTool({
    name: 'shell',
    description:
      "Run a shell command (sh -c) in the world's working_directory, or in `directory` inside it. Returns the " +
      'exit code, then stdout and stderr interleaved; long output keeps its end and says how much was dropped. ' +
      'stdin is closed, so interactive prompts get end-of-file. The command and every process it starts are ' +
      'stopped when it exits or times out: nothing keeps running in the background after the call.',
    parameters,
    handledBy: 'activity',
    sideEffects: true,
    async run(args, context) {
      context.signal.throwIfAborted();
      if (args.command.includes('\0')) throw new ToolError('Commands must not contain NUL bytes.');
      const isolation = await findSandbox();
      if (isolation.kind === 'unavailable') throw new ToolError(`${unavailableMessage(isolation)} ${NO_COMMAND_RUN}`);
      const network = networkSetting(context.world.variables);
      if (isolation.kind === 'none' && !network) {
        throw new ToolError(
          `This world sets ${SHELL_NETWORK_VARIABLE}=off, but this worker runs commands without a sandbox ` +
            `(BATON_SHELL_SANDBOX=none), so nothing could cut their network. ${NO_COMMAND_RUN}`,
        );
      }
      if (isolation.kind === 'bwrap' && network && isolation.network?.kind !== 'egress') {
        throw new ToolError(`${noNetworkMessage(isolation)} ${NO_COMMAND_RUN}`);
      }
      const { cwd, bound } = await resolveDirectory(
        args.directory,
        context.world.variables[WORKING_DIRECTORY_VARIABLE],
      );
      context.signal.throwIfAborted();
      const env = { ...settings.env, ...toolVariables(context.world.variables) };
      const launch: Launch =
        isolation.kind === 'bwrap'
          ? await sandboxedLaunch(isolation, settings, args.command, { bound, cwd, network })
          : { command: settings.shell, args: ['-c', args.command], sandboxed: false };
      const owner = await shellRunOwner();
      const outcome = await execute({ ...settings, env }, launch, cwd, args.timeout_s * 1000, context, owner);
      if (outcome.stop === 'aborted') context.signal.throwIfAborted();
      return formatOutcome(outcome, args.timeout_s);
    },
  });
}

/** Where a command runs (`cwd`) and what it may write, its world's `working_directory` (`bound`): real paths. */
interface CommandDirectory {
  readonly cwd: string;
  readonly bound: string;
}

/**
 * The real path of the directory to run in (the argument inside the `working_directory`, or the `working_directory`
 * itself), and the directory the sandbox binds: the `working_directory`.
 * @throws ToolError for every refusal (a world without `working_directory` among them); nothing has been started.
 */
async function resolveDirectory(
  argument: string | undefined,
  workingDirectory: string | undefined,
): Promise<CommandDirectory> {
  if (argument?.includes('\0')) throw new ToolError(`Directory names must not contain NUL bytes. ${NO_COMMAND_RUN}`);
  const root = workingDirectory?.trim() ? workingDirectory : undefined;

  if (root === undefined) {
    // Not even an absolute `directory`: the world's working_directory is what confines the shell, and a world without
    // one has chosen no root (otherwise the model could bind any directory of the host read-write, /proc included).
    const inside = argument === undefined ? '' : '; `directory` then names a directory inside it';
    throw new ToolError(
      'No working directory: this world sets no working_directory, the directory shell commands are confined to. ' +
        `Set one with \`baton world dir PATH\`${inside}. ${NO_COMMAND_RUN}`,
    );
  }

  if (!path.isAbsolute(root)) {
    throw new ToolError(
      `The world's working_directory '${root}' is not an absolute path; set it with \`baton world dir PATH\`. ` +
        NO_COMMAND_RUN,
    );
  }
  const rootFound = await realDirectory(root);
  if (rootFound.problem !== undefined) {
    throw new ToolError(
      `The world's working_directory '${root}' ${rootFound.problem}; set it with \`baton world dir PATH\`. ` +
        NO_COMMAND_RUN,
    );
  }
  if (argument === undefined) return { cwd: rootFound.real, bound: rootFound.real };

  const found = await confinePath(root, rootFound.real, argument);
  if (found.status === 'outside') {
    throw new ToolError(
      `Directory '${argument}' is outside the world's working_directory; pass a directory inside it, or omit ` +
        `\`directory\` to run in the working_directory. ${NO_COMMAND_RUN}`,
    );
  }
  if (found.status === 'missing') {
    throw new ToolError(`Directory '${argument}' ${problemOf(found.code)}. ${NO_COMMAND_RUN}`);
  }
  return { cwd: await existingDirectory(found.real, argument), bound: rootFound.real };
}

/** The real path of `directory`, which must exist and be a directory; refusals name `shown`. */
async function existingDirectory(directory: string, shown: string): Promise<string> {
  const found = await realDirectory(directory);
  if (found.problem !== undefined) throw new ToolError(`Directory '${shown}' ${found.problem}. ${NO_COMMAND_RUN}`);
  return found.real;
}

/** The real path of an existing directory, or what is wrong with it. */
async function realDirectory(directory: string): Promise<{ real: string; problem?: never } | { problem: string }> {
  let real: string;
  try {
    real = await fs.realpath(directory);
    if ((await fs.stat(real)).isDirectory()) return { real };
  } catch (error) {
    if (isCode(error, 'ENOENT', 'ENOTDIR', 'EACCES', 'ELOOP')) return { problem: problemOf(String(error.code)) };
    throw error;
  }
  return { problem: 'is not a directory' };
}

function problemOf(code: string): string {
  if (code === 'EACCES') return 'cannot be reached (permission denied)';
  if (code === 'ELOOP') return 'has too many levels of symbolic links';
  return 'does not exist';
}

/**
 * The world's {@link SHELL_NETWORK_VARIABLE}: on (the default, also when empty) or off.
 * @throws ToolError for any other value
 */
function networkSetting(variables: Readonly<Record<string, string>>): boolean {
  const value = variables[SHELL_NETWORK_VARIABLE]?.trim() ?? '';
  if (value === '' || value.toLowerCase() === 'on') return true;
  if (value.toLowerCase() === 'off') return false;
  throw new ToolError(
    `The world variable ${SHELL_NETWORK_VARIABLE} is '${value}': it must be on or off ` +
      `(\`baton world set ${SHELL_NETWORK_VARIABLE}=off\`). ${NO_COMMAND_RUN}`,
  );
}

/** What `execute` starts: bwrap with the sandbox's arguments (behind `unshare` with egress), or the shell itself. */
interface Launch {
  readonly command: string;
  readonly args: readonly string[];
  readonly sandboxed: boolean;
  /** With the network on: the slirp4netns to attach once bwrap runs, and the command's `/etc/resolv.conf`. */
  readonly egress?: { readonly network: EgressNetwork; readonly resolvConf: string };
}

/**
 * bwrap's command line for one call: the sandbox, bwrap's status on fd 3 (which says whether the command started
 * and how it ended), then the shell.
 * @throws ToolError when the directory cannot be a sandbox's working directory, or the shell cannot be run
 */
async function sandboxedLaunch(
  sandbox: BwrapSandbox,
  settings: Settings,
  command: string,
  directory: CommandDirectory & { network: boolean },
): Promise<Launch> {
  const problem = boundDirectoryProblem(sandbox, directory.bound, settings.env.HOME);
  if (problem !== undefined) {
    throw new ToolError(
      `The working directory '${directory.bound}' ${problem}: set the world's working_directory to a project ` +
        `directory with \`baton world dir PATH\`. ${NO_COMMAND_RUN}`,
    );
  }
  try {
    // The sandbox sees the system directories at their own paths: a shell the worker cannot run, it cannot either.
    await fs.access(settings.shell, fs.constants.X_OK);
  } catch (error) {
    throw cannotStart(settings.shell, error);
  }
  const home = settings.env.HOME;
  const args = sandboxArguments(sandbox, { ...directory, ...(home === undefined ? {} : { home }) });
  if (directory.network) {
    // `run` refused this already, before resolving the directory; checked again for the type's sake.
    if (sandbox.network?.kind !== 'egress') throw new ToolError(`${noNetworkMessage(sandbox)} ${NO_COMMAND_RUN}`);
    const egress = egressLaunch(sandbox, sandbox.network, { bwrapArguments: args, shell: settings.shell, command });
    return {
      command: egress.command,
      args: egress.args,
      sandboxed: true,
      egress: { network: sandbox.network, resolvConf: egress.resolvConf },
    };
  }
  return {
    command: sandbox.bwrap,
    args: [...args, '--json-status-fd', String(STATUS_FD), '--', settings.shell, '-c', command],
    sandboxed: true,
  };
}

/** The sandbox of a tool built without one: bubblewrap on `PATH`, probed once per PATH in this process. */
const defaultSandboxes = new Map<string, Promise<ShellSandbox>>();
function defaultSandbox(searchPath: string | undefined): Promise<ShellSandbox> {
  const key = searchPath ?? '';
  let found = defaultSandboxes.get(key);
  if (found === undefined) {
    found = probeShellSandbox({ mode: 'bwrap' }, { PATH: searchPath });
    defaultSandboxes.set(key, found);
  }
  return found;
}

interface Outcome {
  /** Why the tool stopped the command, if it did. */
  readonly stop: 'timeout' | 'aborted' | undefined;
  /** The shell's exit code, or the signal that ended it. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: Buffer;
  /** Bytes of output dropped from the start. */
  readonly dropped: number;
}

type Settings = Required<Omit<ShellToolOptions, 'env' | 'sandbox'>> & { env: Readonly<Record<string, string>> };

/**
 * The variable every process of one call carries, with a value unique to the call. A process that leaves the
 * command's process group or session (`setsid`, a double fork, `nohup`) keeps its environment, so the tool finds it
 * by scanning `/proc` for this marker and kills it too.
 */
export const SHELL_RUN_MARKER = 'BATON_SHELL_RUN';

/**
 * A marker's value: `<owner pid>.<owner start time>:<uuid>`. The owner part names the worker process that ran the
 * command, with its start time (a pid reused by another process has another), so processes a SIGKILLed worker left
 * running can be told from those of live workers (see {@link sweepOrphanedShellProcesses}).
 */
let ownerToken: Promise<string> | undefined;
function shellRunOwner(): Promise<string> {
  ownerToken ??= processStartTime(process.pid).then((start) => `${process.pid}.${start ?? '0'}`);
  return ownerToken;
}

/** The start time of a process (clock ticks since boot, `/proc/<pid>/stat` field 22), or undefined if it is gone. */
async function processStartTime(pid: number): Promise<string | undefined> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields from after its closing ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * Kills the processes of shell commands whose worker is gone: a worker that is SIGKILLed (or crashes) mid-command
 * cannot stop what the command started, and its retried activity runs elsewhere, so nothing else ever would. Every
 * worker sweeps at start and then periodically (worker/main.ts); commands of live workers are left alone.
 * Linux only, like the marker scan; needs the right to read the processes' environments (same user, or root).
 * @returns the pids killed
 */
export async function sweepOrphanedShellProcesses(
  options: {
    /** Only markers this accepts (a test sweeps its own orphans, never another run's). @default every marker */
    only?: (marker: string) => boolean;
  } = {},
): Promise<number[]> {
  const prefix = Buffer.from(`${SHELL_RUN_MARKER}=`);
  const owners = new Map<string, boolean>();
  const killed: number[] = [];
  for (let round = 0; round < KILL_ROUNDS; round += 1) {
    const orphans: number[] = [];
    for (const [pid, environ] of await readEnvirons()) {
      const value = markerValue(environ, prefix);
      if (value !== undefined && options.only !== undefined && !options.only(value)) continue;
      const owner = value?.match(/^(\d+)\.(\d+):/);
      if (!owner?.[1] || !owner[2]) continue; // no marker, or one without an owner
      const key = `${owner[1]}.${owner[2]}`;
      let alive = owners.get(key);
      if (alive === undefined) {
        alive = (await processStartTime(Number(owner[1]))) === owner[2];
        owners.set(key, alive);
      }
      if (!alive) orphans.push(pid);
    }
    if (orphans.length === 0) break;
    for (const pid of orphans) {
      try {
        process.kill(pid, 'SIGKILL');
        if (!killed.includes(pid)) killed.push(pid);
      } catch {
        // gone meanwhile
      }
    }
    await delay(10);
  }
  return killed;
}

/**
 * Every process this one may read that carries a shell run marker (for leak checks): of any owner, or only of the
 * worker processes `owners` names (a check looks at its own run's commands, never at another run's).
 */
export async function shellRunProcesses(owners?: readonly number[]): Promise<number[]> {
  const prefix = Buffer.from(`${SHELL_RUN_MARKER}=`);
  return (await readEnvirons())
    .filter(([, environ]) => {
      const value = markerValue(environ, prefix);
      if (value === undefined) return false;
      return owners === undefined || owners.includes(Number(value.match(/^(\d+)\./)?.[1]));
    })
    .map(([pid]) => pid);
}

/** The value of the `NAME=` entry `prefix` names in a NUL-separated environment, if it has one. */
function markerValue(environ: Buffer, prefix: Buffer): string | undefined {
  for (let at = environ.indexOf(prefix); at !== -1; at = environ.indexOf(prefix, at + 1)) {
    if (at === 0 || environ[at - 1] === 0) {
      const end = environ.indexOf(0, at);
      return environ.subarray(at + prefix.length, end === -1 ? undefined : end).toString('utf8');
    }
  }
  return undefined;
}

/** The environment of every process this one may read, but its own. */
async function readEnvirons(): Promise<[number, Buffer][]> {
  let names: string[];
  try {
    names = await fs.readdir('/proc');
  } catch {
    return [];
  }
  const found: [number, Buffer][] = [];
  await Promise.all(
    names.map(async (name) => {
      if (!/^\d+$/.test(name) || Number(name) === process.pid) return;
      try {
        found.push([Number(name), await fs.readFile(`/proc/${name}/environ`)]);
      } catch {
        // gone, or not ours to read
      }
    }),
  );
  return found;
}

/** Rounds of SIGKILL while marked processes keep appearing (a process forking as it is killed). */
const KILL_ROUNDS = 50;

function execute(
  settings: Settings,
  launch: Launch,
  cwd: string,
  timeoutMs: number,
  context: ToolContext,
  owner: string,
): Promise<Outcome> {
  return new Promise<Outcome>((resolve, reject) => {
    const started = Date.now();
    const output = new OutputTail(settings.maxOutputBytes);
    const marker = `${owner}:${randomUUID()}`;
    let child: ChildProcess;
    try {
      child = settings.spawn(launch.command, launch.args, {
        cwd,
        detached: true, // leader of its own process group (and session), so the group can be killed as a whole
        stdio: launch.egress
          ? ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe']
          : launch.sandboxed
            ? ['ignore', 'pipe', 'pipe', 'pipe']
            : ['ignore', 'pipe', 'pipe'],
        // bwrap gets the command's environment too: it is PID 1 in the sandbox, where its environ is readable.
        env: { ...settings.env, [SHELL_RUN_MARKER]: marker },
      });
    } catch (error) {
      reject(cannotStart(launch.command, error));
      return;
    }
    const { stdout, stderr } = child;
    if (stdout === null || stderr === null) throw new Error('the spawned process has no output pipes');
    const statusPipe = launch.sandboxed ? child.stdio[STATUS_FD] : undefined;
    let status = '';
    // With egress: the command waits on GATE_FD until slirp4netns has brought its interface up.
    const gatePipe = launch.egress ? stdioPipe(child, GATE_FD) : undefined;
    const resolvPipe = launch.egress ? stdioPipe(child, RESOLV_CONF_FD) : undefined;
    // Flowing, so that each ends when bwrap does ('close' waits for every pipe); EPIPE once bwrap is gone is no news.
    for (const pipe of [gatePipe, resolvPipe]) pipe?.on('error', () => undefined).resume();
    resolvPipe?.end(launch.egress?.resolvConf);
    let egress: AttachedEgress | undefined;
    /** Why the command's network could not start, if it could not: the call then fails, the command never ran. */
    let egressFailure: string | undefined;

    const heartbeat = setInterval(
      () => context.heartbeat({ tool: 'shell', elapsedMs: Date.now() - started, bytes: output.total }),
      settings.heartbeatIntervalMs,
    );
    let stop: Outcome['stop'];
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let closed = false;
    let stopping: Promise<void> | undefined;
    let settled = false;
    const timers: NodeJS.Timeout[] = [];

    const signalAll = async (signal: NodeJS.Signals): Promise<number> => {
      // bwrap gets no SIGTERM: it would die of it, and the sandbox with it, before its processes had their grace.
      const spared = launch.sandboxed && signal !== 'SIGKILL' ? child.pid : undefined;
      if (child.pid !== undefined && spared === undefined) {
        try {
          process.kill(-child.pid, signal);
        } catch {
          // ESRCH: the group is gone; EPERM: a member changed user and cannot be signalled anyway
        }
      }
      const marked = await markedProcesses(marker);
      for (const pid of marked) {
        if (pid === spared) continue;
        try {
          process.kill(pid, signal);
        } catch {
          // gone meanwhile
        }
      }
      return marked.length;
    };
    /** SIGTERM to every process of the call, SIGKILL to those still there after the grace period. */
    const stopAll = (): Promise<void> =>
      (stopping ??= (async () => {
        if ((await signalAll('SIGTERM')) > 0) {
          for (const deadline = Date.now() + settings.killGraceMs; Date.now() < deadline; await delay(25)) {
            if ((await markedProcesses(marker)).length === 0) break;
          }
        }
        for (let round = 0; round < KILL_ROUNDS; round += 1) {
          if ((await signalAll('SIGKILL')) === 0) break;
          await delay(10);
        }
      })());
    const onAbort = () => {
      stop ??= 'aborted';
      void stopAll().then(finishSoon);
    };
    /** Waits a moment for the pipes to deliver what the killed processes wrote, then finishes regardless. */
    const finishSoon = () => {
      if (closed) finish();
      else timers.push(setTimeout(finish, Math.min(settings.killGraceMs, 500)));
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      clearInterval(heartbeat);
      context.signal.removeEventListener('abort', onAbort);
      stdout.destroy();
      stderr.destroy();
      statusPipe?.destroy();
      gatePipe?.destroy();
      resolvPipe?.destroy();
      egress?.close();
      const { bytes, dropped } = output.tail();
      if (egressFailure !== undefined && stop === undefined) {
        reject(
          new ToolError(`The sandbox could not give the command its network: ${egressFailure}. ${NO_COMMAND_RUN}`),
        );
        return;
      }
      // bwrap reports the command's exit code once it ran; without one, it ended before the command could start.
      if (launch.sandboxed && stop === undefined && !status.includes('"exit-code"')) {
        const said = bytes.toString('utf8').trim();
        reject(new ToolError(`The sandbox could not start the command: ${said || `bwrap exited with ${exit?.code}`}`));
        return;
      }
      resolve({ stop, code: exit?.code ?? null, signal: exit?.signal ?? null, output: bytes, dropped });
    };

    stdout.on('data', (chunk: Buffer) => output.push(chunk));
    stderr.on('data', (chunk: Buffer) => output.push(chunk));
    statusPipe?.on('data', (chunk: Buffer) => {
      status = (status + chunk.toString('utf8')).slice(-4096);
      // bwrap runs (in the namespaces unshare made): attach slirp4netns to them, then let the command start.
      const network = launch.egress?.network;
      if (network === undefined || egress !== undefined || stopping !== undefined || settled) return;
      if (!status.includes('"child-pid"') || child.pid === undefined || exit !== undefined) return;
      egress = attachEgress(network, child.pid, { [SHELL_RUN_MARKER]: marker });
      egress.ready.then(
        () => gatePipe?.end('go\n'),
        (error: unknown) => {
          egressFailure ??= error instanceof Error ? error.message : String(error);
          gatePipe?.destroy(); // the gate reads end-of-file: the command is never started
          void stopAll().then(finishSoon);
        },
      );
    });
    child.on('error', (error) => {
      if (child.pid !== undefined || settled) return; // a started process reports through 'exit' and 'close'
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      clearInterval(heartbeat);
      context.signal.removeEventListener('abort', onAbort);
      reject(cannotStart(launch.command, error));
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // Processes the command left running (in the background, or escaped with setsid) do not outlive the call.
      void stopAll().then(finishSoon);
    });
    child.on('close', () => {
      closed = true;
      if (stopping === undefined) return;
      void stopping.then(finish);
    });

    timers.push(
      setTimeout(() => {
        stop ??= 'timeout';
        void stopAll().then(finishSoon);
      }, timeoutMs),
    );
    context.signal.addEventListener('abort', onAbort, { once: true });
    if (context.signal.aborted) onAbort();
  });
}

/**
 * Processes whose environment holds `BATON_SHELL_RUN=<marker>` (zombies have none, so they are not counted).
 * Linux only: elsewhere there is no `/proc` and this finds nothing, leaving the process-group kill alone.
 */
async function markedProcesses(marker: string): Promise<number[]> {
  const needle = Buffer.from(`${SHELL_RUN_MARKER}=${marker}\0`);
  return (await readEnvirons())
    .filter(([, environ]) => {
      const at = environ.indexOf(needle);
      return at === 0 || (at > 0 && environ[at - 1] === 0);
    })
    .map(([pid]) => pid);
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function cannotStart(shell: string, error: unknown): ToolError {
  const reason = error instanceof Error ? error.message : String(error);
  return new ToolError(`Could not start ${shell}: ${reason}`, { cause: error });
}

function formatOutcome(outcome: Outcome, timeoutS: number): string {
  const status =
    outcome.stop === 'timeout'
      ? `timed out after ${timeoutS} s (killed)`
      : outcome.code !== null
        ? `exit code: ${outcome.code}`
        : `terminated by signal ${outcome.signal ?? 'unknown'}`;
  const lines = [status];
  if (outcome.dropped > 0) {
    lines.push(
      `[output truncated: dropped the first ${outcome.dropped} bytes, showing the last ${outcome.output.length}]`,
    );
  }
  lines.push(outcome.output.length > 0 ? outcome.output.toString('utf8') : '(no output)');
  return lines.join('\n');
}

/** Keeps the last `limit` bytes of a stream of chunks, in memory bounded by `limit` plus one chunk. */
class OutputTail {
  /** Bytes received in all. */
  total = 0;
  private chunks: Buffer[] = [];
  /** Index of the first chunk still kept (dropping by index keeps a flood of tiny chunks linear). */
  private head = 0;
  private kept = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    this.chunks.push(chunk);
    this.kept += chunk.length;
    let first = this.chunks[this.head];
    while (first && this.kept - first.length >= this.limit) {
      this.kept -= first.length;
      this.head += 1;
      first = this.chunks[this.head];
    }
    if (this.head > 1024 && this.head * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
  }

  /** The kept tail, starting at a UTF-8 character boundary, and how many bytes before it were dropped. */
  tail(): { bytes: Buffer; dropped: number } {
    const kept = Buffer.concat(this.chunks.slice(this.head));
    let start = Math.max(0, kept.length - this.limit);
    if (this.total > kept.length - start) {
      // The tail starts mid-stream: skip continuation bytes (10xxxxxx) of a cut character. A character has at
      // most 3, so skipping more would only eat output that is not UTF-8 anyway.
      const end = Math.min(start + 3, kept.length);
      while (start < end && ((kept[start] ?? 0) & 0xc0) === 0x80) start += 1;
    }
    const bytes = kept.subarray(start);
    return { bytes, dropped: this.total - bytes.length };
  }
}
