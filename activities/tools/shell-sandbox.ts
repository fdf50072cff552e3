/**
 * The sandbox every `shell` command runs in: bubblewrap (`bwrap`), with namespaces of its own. A command runs as the
 * worker's user, so without it a command could read the worker's environment through `/proc/<ppid>/environ`
 * (DATABASE_URL, API keys) and follow `/proc/<ppid>/cwd` to `.baton/stack.json`, and with them walk around every
 * scope and fence. Inside, it sees no process of the worker, no file of the host but the system directories (read
 * only) and its world's working directory (read-write), and never the host's loopback: its network is either only a
 * loopback of its own (`BATON_SHELL_NETWORK=off`) or egress through slirp4netns (see {@link ShellNetwork}).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { SHELL_NETWORK_WORLD_VARIABLE } from '../../common/world-variables';
import { isInside } from './files';

/**
 * The world variable that gives a world's commands the network (`on`, the default: egress through slirp4netns, never
 * the host's loopback) or cuts it (`off`: a loopback of their own and nothing else).
 */
export const SHELL_NETWORK_VARIABLE = SHELL_NETWORK_WORLD_VARIABLE.name;

/** How a worker isolates shell commands: its `BATON_SHELL_SANDBOX`, `BATON_BWRAP` and `BATON_SLIRP4NETNS` settings. */
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
  /** The slirp4netns executable that gives commands their network (`BATON_SLIRP4NETNS`). @default on the PATH */
  readonly slirp4netns?: string;
}

/**
 * How a sandboxed command of a world with the network on reaches it: egress only, from a network namespace of its own.
 * `unshare` (util-linux) starts bwrap in a new user and network namespace; once bwrap runs, slirp4netns, started in
 * that user namespace by `nsenter`, puts a TAP interface in it (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3) and
 * carries its traffic as ordinary sockets of the worker's host: what the worker's machine reaches, the command
 * reaches, but never the host's loopback (`--disable-host-loopback`: 10.0.2.2 is no door to 127.0.0.1, and the
 * namespace's own 127.0.0.1 is its own). The command waits on a pipe ({@link GATE_FD}) until the interface is up.
 *
 * slirp4netns rather than pasta (passt): bwrap running `true`, 30 runs each on a 2-core machine, median ms: idle,
 * network off 6, the host's network 5, slirp4netns 34 (32 without its own sandbox and seccomp filter), pasta 48;
 * under load 13, off 18-23, host 14-16, slirp4netns 64-89, pasta 83-135. pasta also forwards host ports into the
 * namespace by default (`-T auto`), gives it the host's own address (so the host's non-loopback address is
 * unreachable from it, but other host addresses are not), drops to `nobody` before it opens the namespaces when run
 * as root, and the Debian 12 version has no ready signal. slirp4netns has a ready fd, an exit fd (it ends when the
 * worker does), its own mount namespace and seccomp filter. Through this tool, idle, the network costs a command
 * about 10 ms (`true` 22 ms on against 14 off; a TCP connection 29 against 19; a DNS lookup 34 against 21): small
 * beside the model calls of seconds around it, so the network stays on by default.
 *
 * DNS: the command's `/etc/resolv.conf` names 10.0.2.3, which slirp4netns forwards to the first nameserver of the
 * host's `/etc/resolv.conf`, port 53 only, even when that nameserver is on the host's loopback (systemd-resolved's
 * 127.0.0.53, Docker's 127.0.0.11): the one way from the sandbox to a loopback address of the host, and DNS only.
 */
export type ShellNetwork =
  | {
      readonly kind: 'egress';
      /** slirp4netns, an absolute path. */
      readonly slirp4netns: string;
      /** util-linux's `unshare` and `nsenter`, absolute paths. */
      readonly unshare: string;
      readonly nsenter: string;
    }
  /** Worlds with the network on are refused, saying why and what to install. */
  | { readonly kind: 'unavailable'; readonly reason: string; readonly remedy: string };

export type EgressNetwork = Extract<ShellNetwork, { kind: 'egress' }>;

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
      /** How commands of worlds with the network on reach it. @default unavailable (not probed): they are refused */
      readonly network?: ShellNetwork;
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

/** The kernel's views and devices: never a working directory (the host's `/proc` holds every process's environment). */
const KERNEL_DIRECTORIES = ['/proc', '/sys', '/dev'] as const;

const BYPASS =
  'Or start the worker with BATON_SHELL_SANDBOX=none to run commands without a sandbox (they can then read ' +
  'everything the worker can, its DATABASE_URL and API keys included).';
const INSTALL_REMEDY = `install bubblewrap (Debian and Ubuntu: \`apt-get install bubblewrap\`), or set BATON_BWRAP to its path. ${BYPASS}`;
const NETWORK_OFF =
  'Or set BATON_SHELL_NETWORK=off in the worlds whose commands need no network (`baton world set ' +
  'BATON_SHELL_NETWORK=off`).';
const SLIRP_REMEDY =
  'install slirp4netns (Debian and Ubuntu: `apt-get install slirp4netns`), or set BATON_SLIRP4NETNS to its path. ' +
  NETWORK_OFF;
const UTIL_LINUX_REMEDY = `install util-linux (Debian and Ubuntu: \`apt-get install util-linux\`). ${NETWORK_OFF}`;
const TUN_REMEDY =
  'slirp4netns gives each command a TAP interface, which needs the TUN device: on a host, load the tun module ' +
  '(`modprobe tun`); in a container, pass the device in (docker-compose.yml: `devices: [/dev/net/tun]`; docker run: ' +
  `\`--device /dev/net/tun\`). ${NETWORK_OFF}`;
const EGRESS_REMEDY =
  'slirp4netns joins the user namespace bwrap runs in and makes a TAP interface in its network namespace; a ' +
  'container needs the settings of docs/deploy.md, "The shell\'s sandbox in a container", for that too. ' +
  NETWORK_OFF;

const NAMESPACES_REMEDY =
  'bubblewrap needs user, PID and mount namespaces and a fresh /proc. In a container, give it the settings of ' +
  'docs/deploy.md, "The shell\'s sandbox in a container" (Docker: security_opt seccomp=unconfined, ' +
  'apparmor=unconfined and ' +
  'systempaths=unconfined, as docker-compose.yml sets them); on a host, allow unprivileged user namespaces ' +
  '(sysctl user.max_user_namespaces above 0; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0). ' +
  BYPASS;

/** How long the start-up probe may take before the sandbox counts as unavailable. */
const PROBE_TIMEOUT_MS = 15_000;

/**
 * Decides, once, how this worker runs shell commands: `none` when the setting says so; else bubblewrap, when a real
 * sandbox (every namespace a command gets, the network cut) runs `/bin/sh -c true`; else `unavailable` with the
 * reason (no bwrap, namespaces refused, not Linux) and how to enable it. With bubblewrap, also whether commands can
 * have egress (`network`): a sandbox with slirp4netns attached, as every command with the network gets, must find
 * its interface up and routed; if it cannot, worlds with the network on are refused, saying why.
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
    if (code !== 0) {
      return unavailable(
        `${bwrap} could not make a sandbox here (${lastLine(output) || `exit code ${String(code)}`})`,
        NAMESPACES_REMEDY,
      );
    }
    return { ...sandbox, network: await probeEgress(sandbox, setting, env, dir) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Whether commands can have egress here: slirp4netns, `unshare` and `nsenter` found, `/dev/net/tun` there, and a
 * sandboxed command that waits for its network (as every command does) finding its interface up and routed.
 */
async function probeEgress(
  sandbox: BwrapSandbox,
  setting: ShellSandboxSetting,
  env: Readonly<Record<string, string | undefined>>,
  dir: string,
): Promise<ShellNetwork> {
  const slirp4netns =
    setting.slirp4netns === undefined ? findOnPath('slirp4netns', env.PATH) : path.resolve(setting.slirp4netns);
  if (slirp4netns === undefined) {
    return noNetwork('slirp4netns is not installed (no `slirp4netns` on PATH)', SLIRP_REMEDY);
  }
  const problem = executableProblem(slirp4netns);
  if (problem !== undefined) {
    const what = setting.slirp4netns === undefined ? slirp4netns : `BATON_SLIRP4NETNS ${slirp4netns}`;
    return noNetwork(`${what} ${problem}`, SLIRP_REMEDY);
  }
  const unshare = findOnPath('unshare', env.PATH);
  const nsenter = findOnPath('nsenter', env.PATH);
  if (unshare === undefined || nsenter === undefined) {
    return noNetwork(
      `util-linux's \`${unshare === undefined ? 'unshare' : 'nsenter'}\` is not on PATH`,
      UTIL_LINUX_REMEDY,
    );
  }
  if (!(fs.statSync(TUN_DEVICE, { throwIfNoEntry: false })?.isCharacterDevice() ?? false)) {
    return noNetwork(`${TUN_DEVICE} does not exist here`, TUN_REMEDY);
  }
  const network: EgressNetwork = { kind: 'egress', slirp4netns, unshare, nsenter };
  // The interface is up and is the default route (/proc/net/route: interface, destination 0.0.0.0).
  const check = `grep -q '^${EGRESS_INTERFACE}[[:space:]]00000000[[:space:]]' /proc/net/route`;
  const launch = egressLaunch(sandbox, network, {
    bwrapArguments: sandboxArguments(sandbox, { bound: dir, cwd: dir, network: true }),
    shell: '/bin/sh',
    command: check,
  });
  const { code, output } = await runEgressBriefly(network, launch, dir);
  if (code === 0) return network;
  return noNetwork(
    `a command could not get its network from ${slirp4netns} (${lastLine(output) || `exit code ${String(code)}`})`,
    EGRESS_REMEDY,
  );
}

/** One line for the worker's start-up output, and whether it is a warning. */
export function describeShellSandbox(sandbox: ShellSandbox): { line: string; warning: boolean } {
  switch (sandbox.kind) {
    case 'bwrap': {
      const line = `shell: commands run in a bubblewrap sandbox (${sandbox.bwrap})`;
      const network = sandbox.network ?? NOT_PROBED;
      if (network.kind === 'egress') {
        return {
          line: `${line}; their network is egress only, through ${network.slirp4netns}, never this host's loopback`,
          warning: false,
        };
      }
      return {
        line:
          `${line}; warning: commands of worlds with BATON_SHELL_NETWORK on (the default) will be refused: ` +
          `${network.reason}. To enable it: ${network.remedy}`,
        warning: true,
      };
    }
    case 'none':
      return {
        line:
          'warning: BATON_SHELL_SANDBOX=none: shell commands run without a sandbox, as this worker’s user: they can ' +
          'read its environment through /proc (DATABASE_URL, API keys, the decision key), .baton/stack.json and ' +
          "every file it can read, and reach every port of this host's loopback",
        warning: true,
      };
    case 'unavailable':
      return {
        line: `warning: the shell tool will refuse every command: ${sandbox.reason}. To enable it: ${sandbox.remedy}`,
        warning: true,
      };
  }
}

/** What the shell tool says when a world keeps the network on and this worker cannot give a command egress. */
export function noNetworkMessage(sandbox: BwrapSandbox): string {
  const network = sandbox.network?.kind === 'unavailable' ? sandbox.network : NOT_PROBED;
  return (
    `This world keeps the shell's network on (${SHELL_NETWORK_VARIABLE}, on by default), and this worker cannot give ` +
    `a command a network of its own: ${network.reason}. To enable it: ${network.remedy}`
  );
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
  /**
   * Whether the command keeps the network namespace bwrap is started in: the host's, unless bwrap is started in one
   * of its own as {@link egressLaunch} does. Without it, the command has only a loopback of its own.
   */
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
  const system = [...SYSTEM_DIRECTORIES, ...KERNEL_DIRECTORIES].find((dir) => isInside(dir, bound));
  if (system !== undefined) return `is a system directory (inside ${system}), which the sandbox would make writable`;
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
  return ![...SYSTEM_DIRECTORIES, ...KERNEL_DIRECTORIES].some((dir) => isInside(dir, home));
}

/** The fd bwrap writes its status to: `{ "child-pid": … }` once it runs, `{ "exit-code": … }` at the end. */
export const STATUS_FD = 3;
/**
 * The fd an egress sandbox's command waits on before it starts: `go` once the network is up. Anything else, or the
 * pipe closing (the worker died, or slirp4netns failed), ends it without running the command. (bwrap's `--block-fd`
 * would start the command on end-of-file, and its child may have lost `--die-with-parent` by then.)
 */
export const GATE_FD = 4;
/** The fd an egress sandbox's bwrap reads the command's `/etc/resolv.conf` from (`--ro-bind-data`). */
export const RESOLV_CONF_FD = 5;

/** The parent's end of a child's stdio pipe `fd` (a socket: readable and writable), if it has one. */
export function stdioPipe(child: ChildProcess, fd: number): Duplex | undefined {
  const pipe = (child.stdio as readonly unknown[])[fd];
  return pipe instanceof Duplex ? pipe : undefined;
}

/** The interface slirp4netns makes in the command's network namespace. */
const EGRESS_INTERFACE = 'tap0';
/** slirp4netns's DNS forwarder inside the namespace (its default network, 10.0.2.0/24). */
const EGRESS_NAMESERVER = '10.0.2.3';
const TUN_DEVICE = '/dev/net/tun';
/** How long slirp4netns may take to bring a command's interface up (it takes tens of milliseconds). */
const EGRESS_START_TIMEOUT_MS = 15_000;
const NOT_PROBED = {
  kind: 'unavailable',
  reason: 'this worker did not look for slirp4netns',
  remedy: NETWORK_OFF,
} as const;

/** What {@link egressLaunch} starts, and what to write to bwrap's extra fds. */
export interface EgressLaunch {
  /** `unshare`, which execs bwrap: the spawned process, whose namespaces {@link attachEgress} joins. */
  readonly command: string;
  readonly args: string[];
  /** The command's `/etc/resolv.conf`, to write to {@link RESOLV_CONF_FD} (empty when the host has none). */
  readonly resolvConf: string;
}

/**
 * The command line of a sandbox with egress: `unshare` makes a user namespace (the worker's ids mapped to 0, so that
 * slirp4netns, joining it, may make its own mount namespace) and a network namespace owned by it, and execs bwrap
 * there with `bwrapArguments` (from {@link sandboxArguments} with `network: true`); bwrap maps the worker's ids back
 * for the command (`--uid`, `--gid`), gives it `/etc/resolv.conf` naming slirp4netns's DNS and reports on
 * {@link STATUS_FD}; `shell -c command` starts once `go` is written to {@link GATE_FD}. Spawn it with pipes on fds 3
 * to 5; then {@link attachEgress} to the spawned process once bwrap reports its `child-pid`.
 */
export function egressLaunch(
  sandbox: BwrapSandbox,
  network: EgressNetwork,
  run: { bwrapArguments: readonly string[]; shell: string; command: string },
): EgressLaunch {
  const resolv = resolvConfOverlay();
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  return {
    command: network.unshare,
    args: [
      '--user',
      '--map-root-user',
      '--net',
      '--',
      sandbox.bwrap,
      '--uid',
      String(uid),
      '--gid',
      String(gid),
      ...run.bwrapArguments,
      ...(resolv === undefined ? [] : ['--perms', '0644', '--ro-bind-data', String(RESOLV_CONF_FD), resolv.path]),
      '--json-status-fd',
      String(STATUS_FD),
      '--',
      // The shell waits for `go` on GATE_FD, closes it, and becomes the command's shell (same pid, nothing left over).
      run.shell,
      '-c',
      `IFS= read -r go <&${GATE_FD} && [ "$go" = go ] || exit 125; exec ${GATE_FD}<&-; exec "$0" -c "$1"`,
      run.shell,
      run.command,
    ],
    resolvConf: resolv?.text ?? '',
  };
}

/**
 * The host's resolver configuration with its nameservers replaced by slirp4netns's, and where the command reads it
 * (`/etc/resolv.conf`, or what it links to, as systemd-resolved's `/run/systemd/resolve/stub-resolv.conf`).
 * Read at each command: DHCP or a VPN may change it while the worker runs.
 */
function resolvConfOverlay(): { path: string; text: string } | undefined {
  let real: string;
  let text: string;
  try {
    real = fs.realpathSync('/etc/resolv.conf');
    text = fs.readFileSync(real, 'utf8');
  } catch {
    return undefined; // no resolver configured on the host: none in the sandbox either
  }
  const kept = text.split('\n').filter((line) => !/^\s*nameserver\s/.test(line) && line.trim() !== '');
  return { path: real, text: [...kept, `nameserver ${EGRESS_NAMESERVER}`, ''].join('\n') };
}

/** slirp4netns attached to one sandbox: ready once the command's interface is up. */
export interface AttachedEgress {
  /** Resolves once the interface is up and routed; rejects with slirp4netns's (or nsenter's) last words otherwise. */
  readonly ready: Promise<void>;
  /** Stops slirp4netns (it also stops by itself when the worker dies: its exit fd closes). Safe to call again. */
  close(): void;
}

/**
 * Starts slirp4netns for the sandbox `pid` (the process {@link egressLaunch} started, bwrap once it reported its
 * `child-pid`): `nsenter` joins that process's user namespace (where the worker is root, so slirp4netns can sandbox
 * itself), and slirp4netns makes and configures the TAP interface in its network namespace. `env` is its whole
 * environment: the caller's run marker, so that a sweep finds it as it finds the command's processes.
 */
export function attachEgress(
  network: EgressNetwork,
  pid: number,
  env: Readonly<Record<string, string>>,
): AttachedEgress {
  let helper: ChildProcess;
  try {
    helper = spawn(
      network.nsenter,
      [
        `--user=/proc/${pid}/ns/user`,
        '--preserve-credentials',
        '--',
        network.slirp4netns,
        '--configure',
        '--mtu=65520',
        '--disable-host-loopback',
        '--enable-sandbox',
        '--enable-seccomp',
        '--ready-fd=3',
        '--exit-fd=4',
        '--netns-type=path',
        `/proc/${pid}/ns/net`,
        EGRESS_INTERFACE,
      ],
      { env: { ...env }, stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
    );
  } catch (error) {
    const ready = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    ready.catch(() => undefined);
    return { ready, close: () => undefined };
  }
  let said = '';
  helper.stderr?.on('data', (chunk: Buffer) => {
    said = (said + chunk.toString('utf8')).slice(-4096);
  });
  const readyPipe = stdioPipe(helper, 3);
  const exitPipe = stdioPipe(helper, 4);
  for (const pipe of [readyPipe, exitPipe]) pipe?.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const ready = new Promise<void>((resolve, reject) => {
    // A slirp4netns that neither comes up nor ends must not hold the command until its timeout.
    timer = setTimeout(
      () => reject(new Error(`slirp4netns did not bring the interface up within ${EGRESS_START_TIMEOUT_MS / 1000} s`)),
      EGRESS_START_TIMEOUT_MS,
    );
    readyPipe?.once('data', () => resolve());
    helper.once('error', reject);
    helper.once('exit', (code, signal) =>
      reject(
        new Error(lastLine(said) || `slirp4netns ended (${code === null ? String(signal) : `exit code ${code}`})`),
      ),
    );
  });
  ready.catch(() => undefined).finally(() => clearTimeout(timer));
  return {
    ready,
    close() {
      clearTimeout(timer);
      readyPipe?.destroy();
      exitPipe?.destroy();
      helper.stderr?.destroy();
      if (helper.exitCode === null && helper.signalCode === null) helper.kill('SIGKILL');
    },
  };
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

function executableProblem(file: string): string | undefined {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile() ? undefined : 'is not a file';
  } catch (error) {
    return `cannot be run (${(error as NodeJS.ErrnoException).code ?? String(error)})`;
  }
}

function lastLine(output: string): string {
  return output.trim().split('\n').pop()?.trim() ?? '';
}

function unavailable(reason: string, remedy: string): ShellSandbox {
  return { kind: 'unavailable', reason, remedy };
}

function noNetwork(reason: string, remedy: string): ShellNetwork {
  return { kind: 'unavailable', reason, remedy };
}

/**
 * Runs a probe through {@link egressLaunch} as the shell tool runs a command: slirp4netns attached once bwrap
 * reports, the command released once the network is up; its exit code (null when it did not finish) and output.
 */
function runEgressBriefly(
  network: EgressNetwork,
  launch: EgressLaunch,
  cwd: string,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(launch.command, launch.args, {
      cwd,
      env: {},
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    let output = '';
    let status = '';
    let egress: AttachedEgress | undefined;
    const append = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-4096);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    const [statusPipe, gatePipe, resolvPipe] = [STATUS_FD, GATE_FD, RESOLV_CONF_FD].map((fd) => stdioPipe(child, fd));
    // Flowing, so that each ends when bwrap does: 'close' waits for every pipe.
    for (const pipe of [statusPipe, gatePipe, resolvPipe]) pipe?.on('error', () => undefined).resume();
    resolvPipe?.end(launch.resolvConf);
    statusPipe?.on('data', (chunk: Buffer) => {
      status += chunk.toString('utf8');
      if (egress !== undefined || !status.includes('"child-pid"') || child.pid === undefined) return;
      egress = attachEgress(network, child.pid, {});
      egress.ready.then(
        () => gatePipe?.end('go\n'),
        (error: unknown) => {
          output += `\n${error instanceof Error ? error.message : String(error)}`;
          gatePipe?.destroy(); // the gate reads end-of-file: the sandbox ends without running the command
        },
      );
    });
    const timer = setTimeout(() => {
      gatePipe?.destroy();
      child.kill('SIGKILL');
      output += `\ndid not finish within ${PROBE_TIMEOUT_MS / 1000} s`;
    }, PROBE_TIMEOUT_MS);
    const done = (code: number | null, said: string) => {
      clearTimeout(timer);
      egress?.close();
      for (const pipe of [statusPipe, gatePipe, resolvPipe]) pipe?.destroy();
      resolve({ code, output: said });
    };
    child.on('error', (error) => done(null, error.message));
    child.on('close', (code) => done(code, output));
  });
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
