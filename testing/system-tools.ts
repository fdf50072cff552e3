/**
 * The system tools our tests run that npm cannot bring, each with the Debian package that brings it and why, and the
 * step `npm test` takes before it boots anything, as Playwright's `install --with-deps` does: when tools the selected
 * test files need are missing and `apt-get` is there, it installs their packages (as root, or through `sudo -n` when
 * sudo needs no password), saying what and why; when it cannot, it stops with one line naming the command that would.
 *
 *   node --import tsx testing/system-tools.ts            every tool a test uses (what `.ci/run` runs)
 *   node --import tsx testing/system-tools.ts <files>    the tools these test files need
 *
 * `BATON_TEST_SYSTEM_TOOLS=skip` never installs anything: a test that needs a missing tool then fails (the browser
 * tests skip, and fail under CI), as it would without this step.
 *
 * Not looked for: what every Debian system has ({@link BASE_SYSTEM}), Node and npm, and Go (the README's
 * requirements: it builds the Temporal CLI and temporal-server once; the tests that need it skip without it, and fail
 * under CI).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { chromiumCandidates } from './chromium';

const ROOT = path.resolve(__dirname, '..');

/** The variable that turns the install off (`skip`); `install`, the default, installs what is missing. */
export const SYSTEM_TOOLS_SETTING = 'BATON_TEST_SYSTEM_TOOLS';

/** One thing the tests run that npm does not install. */
export interface SystemTool {
  /** An executable's name, looked up on PATH as `command -v` does, or a device's absolute path. */
  readonly name: string;
  readonly kind: 'executable' | 'device';
  /** The Debian and Ubuntu package that brings it; none for a device. */
  readonly debianPackage?: string;
  /** What the tests use it for, in the line that says what is installed. */
  readonly why: string;
  /**
   * Which test files need it: every file that boots the stack (all but `test/unit` and `test/replay`: their
   * workers' shell tool runs commands in the sandbox), and the files whose source matches `pattern`.
   */
  readonly usedBy: { readonly stackSuites: boolean; readonly pattern?: RegExp };
  /** A variable naming its path instead, as the tests and the worker honour it (then only that path counts). */
  readonly override?: string;
  /** Absolute paths looked at instead of PATH (Chromium: those of testing/chromium.ts). */
  readonly paths?: readonly string[];
  /** Whether the tests need it on this host at all (`runuser` only as root, `git` only in a git checkout). */
  readonly appliesTo?: (host: SystemToolsHost) => boolean;
  /** How to get a device, which no package brings. */
  readonly remedy?: string;
  /**
   * Distributions (their /etc/os-release `ID`) where apt has no usable package for it, each with how to get it
   * instead.
   */
  readonly notPackagedOn?: Readonly<Record<string, string>>;
}

/** A call that starts `name` by its literal name: how a test file that runs a system tool is recognised. */
const spawnsTool = (name: string) =>
  new RegExp(`\\b(?:spawn|spawnSync|execFile|execFileSync|execFileAsync)\\(\\s*'${name.replace(/[/.]/g, '\\$&')}'`);

/** The unit files that run commands through the sandbox itself rather than through a worker. */
const RUNS_THE_SANDBOX = /\b(?:probeShellSandbox|createShellTool)\b/;

/**
 * Every system tool a test runs. util-linux and bsdutils are Essential in Debian, so their lines only matter on
 * other systems; they are looked for all the same, as a missing one fails the same tests.
 */
export const SYSTEM_TOOLS: readonly SystemTool[] = [
  {
    name: 'bwrap',
    kind: 'executable',
    debianPackage: 'bubblewrap',
    why: "the shell tool's sandbox",
    usedBy: { stackSuites: true, pattern: RUNS_THE_SANDBOX },
    override: 'BATON_BWRAP',
  },
  {
    name: 'slirp4netns',
    kind: 'executable',
    debianPackage: 'slirp4netns',
    why: "the sandboxed shell's egress network",
    usedBy: { stackSuites: true, pattern: RUNS_THE_SANDBOX },
    override: 'BATON_SLIRP4NETNS',
  },
  {
    name: 'unshare',
    kind: 'executable',
    debianPackage: 'util-linux',
    why: "the sandboxed shell's own network namespace",
    usedBy: { stackSuites: true, pattern: RUNS_THE_SANDBOX },
  },
  {
    name: 'nsenter',
    kind: 'executable',
    debianPackage: 'util-linux',
    why: "slirp4netns started in the sandbox's namespaces",
    usedBy: { stackSuites: true, pattern: RUNS_THE_SANDBOX },
  },
  {
    name: '/dev/net/tun',
    kind: 'device',
    why: "slirp4netns's network interface",
    usedBy: { stackSuites: true, pattern: RUNS_THE_SANDBOX },
    remedy:
      'on a host, load the tun module (`modprobe tun` as root); in a container, start it with `--device /dev/net/tun`',
  },
  {
    name: 'chromium',
    kind: 'executable',
    debianPackage: 'chromium',
    why: "the explorer's browser tests",
    usedBy: { stackSuites: false, pattern: /\btesting\/chromium'/ },
    override: 'BATON_CHROMIUM',
    paths: chromiumCandidates({}),
    notPackagedOn: {
      ubuntu: "Ubuntu's chromium package is a snap: install a Chromium or Chrome binary and set BATON_CHROMIUM to it",
    },
  },
  {
    name: 'tmux',
    kind: 'executable',
    debianPackage: 'tmux',
    why: "the live CLI tests' terminal",
    usedBy: { stackSuites: false, pattern: spawnsTool('tmux') },
  },
  {
    name: 'script',
    kind: 'executable',
    debianPackage: 'bsdutils',
    why: "the live CLI tests' raw pseudo-terminal",
    usedBy: { stackSuites: false, pattern: spawnsTool('script') },
  },
  {
    name: 'runuser',
    kind: 'executable',
    debianPackage: 'util-linux',
    why: "the local Postgres tests' unprivileged user",
    usedBy: { stackSuites: false, pattern: spawnsTool('runuser') },
    appliesTo: (host) => host.isRoot,
  },
  {
    name: 'openssl',
    kind: 'executable',
    debianPackage: 'openssl',
    why: "the mTLS test's certificate authority and certificates",
    usedBy: { stackSuites: false, pattern: spawnsTool('openssl') },
  },
  {
    name: 'git',
    kind: 'executable',
    debianPackage: 'git',
    why: "the repository-paths test's list of tracked files",
    usedBy: { stackSuites: false, pattern: spawnsTool('git') },
    appliesTo: (host) => host.exists(path.join(host.root, '.git')),
  },
];

/**
 * What tests start by name that every Debian system has (Essential or required packages: dash, bash, coreutils),
 * so nothing here looks for them. A test that starts another program by name adds it to {@link SYSTEM_TOOLS}
 * (`test/unit/system-tools.test.ts` fails until it does).
 */
export const BASE_SYSTEM: readonly string[] = ['/bin/sh', 'sh', 'bash', 'sleep', 'id'];

/** What the step reads and runs; {@link systemHost} is the machine's, unit tests pass their own. */
export interface SystemToolsHost {
  /** The environment: PATH, the tools' overrides and {@link SYSTEM_TOOLS_SETTING}. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly isRoot: boolean;
  /** The distribution: the `ID` of /etc/os-release (`debian`, `ubuntu`), when there is one. */
  readonly distribution: string | undefined;
  /** The repository the test files are in. */
  readonly root: string;
  exists(file: string): boolean;
  /** Whether `file` is a regular file this process may execute. */
  isExecutable(file: string): boolean;
  readText(file: string): string;
  /**
   * Runs a command to its end and resolves with its exit code (127 when it cannot start); its output goes to this
   * process's stderr, or nowhere when `quiet`.
   */
  run(
    command: string,
    args: readonly string[],
    options?: { readonly env?: Readonly<Record<string, string>>; readonly quiet?: boolean },
  ): Promise<number>;
}

/** This machine, as `process` sees it. */
export function systemHost(env: Readonly<Record<string, string | undefined>> = process.env): SystemToolsHost {
  return {
    env,
    isRoot: process.getuid?.() === 0,
    distribution: osReleaseId(),
    root: ROOT,
    exists: (file) => fs.existsSync(file),
    isExecutable: (file) => {
      try {
        fs.accessSync(file, fs.constants.X_OK);
        return fs.statSync(file).isFile();
      } catch {
        return false;
      }
    },
    readText: (file) => fs.readFileSync(file, 'utf8'),
    run: (command, args, options = {}) =>
      new Promise((resolve) => {
        const child = spawn(command, args, {
          env: { ...env, ...options.env },
          // The output goes to stderr, where `npm test` writes its own lines: stdout carries the test report.
          stdio: options.quiet === true ? 'ignore' : ['ignore', 2, 2],
        });
        child.once('error', () => resolve(127));
        child.once('exit', (code) => resolve(code ?? 1));
      }),
  };
}

/** The `ID=` of /etc/os-release, unquoted; undefined without one. */
function osReleaseId(): string | undefined {
  try {
    const id = /^ID=(.*)$/m.exec(fs.readFileSync('/etc/os-release', 'utf8'))?.[1]?.trim();
    return id?.replace(/^(["'])(.*)\1$/, '$2') || undefined;
  } catch {
    return undefined;
  }
}

/** `command -v name`, without a shell: the first executable file of that name in PATH's absolute directories. */
export function findOnPath(name: string, host: SystemToolsHost): string | undefined {
  for (const dir of (host.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '' || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    if (host.isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** Whether the tool is there, looked for where the tests look for it. */
export function hasSystemTool(tool: SystemTool, host: SystemToolsHost): boolean {
  if (tool.kind === 'device') return host.exists(tool.name);
  const override = tool.override === undefined ? undefined : host.env[tool.override];
  if (override) return host.isExecutable(path.resolve(override));
  if (tool.paths !== undefined) return tool.paths.some((candidate) => host.isExecutable(candidate));
  return findOnPath(tool.name, host) !== undefined;
}

/**
 * The tools the test files need on this host (every tool when `files` is undefined): a file that boots the stack
 * needs the sandbox's, and any file the tools its source starts by name. Pure code of `test/unit` and `test/replay`
 * needs none.
 */
export function systemToolsFor(files: readonly string[] | undefined, host: SystemToolsHost): SystemTool[] {
  const applicable = SYSTEM_TOOLS.filter((tool) => tool.appliesTo?.(host) ?? true);
  if (files === undefined) return applicable;
  const sources = files.map((file) => {
    const relative = path.relative(host.root, path.resolve(host.root, file)).split(path.sep).join('/');
    const stackless = relative.startsWith('test/unit/') || relative.startsWith('test/replay/');
    return { stackless, text: host.readText(path.resolve(host.root, file)) };
  });
  return applicable.filter((tool) =>
    sources.some(
      (source) => (tool.usedBy.stackSuites && !source.stackless) || (tool.usedBy.pattern?.test(source.text) ?? false),
    ),
  );
}

/** Whether the step may install: the parsed {@link SYSTEM_TOOLS_SETTING}. */
export type SystemToolsSetting = 'install' | 'skip';

/** What the step does about the missing tools. */
export type SystemToolsPlan =
  | { readonly kind: 'ready' }
  | { readonly kind: 'skip'; readonly line: string }
  | {
      readonly kind: 'install';
      readonly line: string;
      readonly packages: readonly string[];
      /** `apt-get update`, then `apt-get install`, as root or through `sudo -n`. */
      readonly update: SystemCommand;
      readonly install: SystemCommand;
      /** The variables the commands run with when they run as root. */
      readonly env: Readonly<Record<string, string>>;
      /** The same commands for a person to run, should they fail. */
      readonly manual: string;
    }
  | { readonly kind: 'stop'; readonly line: string };

/** A command and its arguments. */
export interface SystemCommand {
  readonly command: string;
  readonly args: readonly string[];
}

/** What {@link planSystemTools} decides from. */
export interface SystemToolsFacts {
  readonly missing: readonly SystemTool[];
  readonly setting: SystemToolsSetting;
  /** apt-get's path, when it is on PATH. */
  readonly aptGet: string | undefined;
  /** How apt-get would run: as this process (root), through `sudo -n` at this path, or not at all. */
  readonly privilege:
    { readonly kind: 'root' } | { readonly kind: 'sudo'; readonly sudo: string } | { readonly kind: 'none' };
  /** The distribution's `ID` (some have no usable package for a tool). */
  readonly distribution: string | undefined;
}

const APT_INSTALL = ['install', '-y', '--no-install-recommends'] as const;
const NONINTERACTIVE = { DEBIAN_FRONTEND: 'noninteractive' } as const;
const SKIP_HINT = `or set ${SYSTEM_TOOLS_SETTING}=skip to run the tests without them (those that need them fail)`;

/** The Debian packages that bring the tools, each once, in catalogue order. */
export function debianPackages(tools: readonly SystemTool[]): string[] {
  return [...new Set(tools.flatMap((tool) => (tool.debianPackage === undefined ? [] : [tool.debianPackage])))];
}

/**
 * What brings the tools and why they are needed, one package at a time: `bubblewrap for bwrap (the shell tool's
 * sandbox), util-linux for unshare (…) and nsenter (…), tmux (…)`.
 */
function describeTools(tools: readonly SystemTool[]): string {
  const groups = new Map<string, SystemTool[]>();
  for (const tool of tools) {
    const key = tool.debianPackage ?? tool.name;
    groups.set(key, [...(groups.get(key) ?? []), tool]);
  }
  return [...groups]
    .map(([source, group]) => {
      const uses = andList(group.map((tool) => `${tool.name === source ? '' : `${tool.name} `}(${tool.why})`));
      return group.length === 1 && group[0]?.name === source ? `${source} ${uses}` : `${source} for ${uses}`;
    })
    .join(', ');
}

/** `a`, `a and b`, `a, b and c`. */
function andList(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1] ?? ''}`;
}

/** The apt-get commands for a person, with `sudo` when they are not root. */
export function manualCommand(packages: readonly string[], asRoot: boolean): string {
  const sudo = asRoot ? '' : 'sudo ';
  return `${sudo}apt-get update && ${sudo}apt-get ${APT_INSTALL.join(' ')} ${packages.join(' ')}`;
}

/** Decides, without running anything, what to do about the missing tools. */
export function planSystemTools(facts: SystemToolsFacts): SystemToolsPlan {
  const { missing } = facts;
  if (missing.length === 0) return { kind: 'ready' };
  if (facts.setting === 'skip') {
    return {
      kind: 'skip',
      line: `${SYSTEM_TOOLS_SETTING}=skip: installing nothing, so the tests that need these fail: ${describeTools(missing)}`,
    };
  }
  const remedies = new Map(
    missing.flatMap((tool) => {
      const remedy = tool.kind === 'device' ? tool.remedy : tool.notPackagedOn?.[facts.distribution ?? ''];
      return remedy === undefined ? [] : [[tool, remedy] as const];
    }),
  );
  const packages = debianPackages(missing);
  const asRoot = facts.privilege.kind === 'root';
  if (remedies.size > 0) {
    const rest = missing.filter((tool) => !remedies.has(tool));
    const also =
      rest.length === 0
        ? ''
        : `; then, for ${rest.map((tool) => tool.name).join(', ')}: ${manualCommand(debianPackages(rest), asRoot)}`;
    const unpackaged = [...remedies].map(
      ([tool, remedy]) => `${tool.name} is missing (${tool.why}), and no package here brings it: ${remedy}`,
    );
    return { kind: 'stop', line: `${unpackaged.join('; ')}${also}; ${SKIP_HINT}` };
  }
  if (facts.aptGet === undefined) {
    return {
      kind: 'stop',
      line: `the tests need ${describeTools(missing)}, and there is no apt-get to install them: install ${packages.join(' ')} (Debian's names) with this system's package manager, ${SKIP_HINT}`,
    };
  }
  if (facts.privilege.kind === 'none') {
    return {
      kind: 'stop',
      line: `the tests need ${describeTools(missing)}; not root, and sudo is missing or asks for a password: run \`${manualCommand(packages, false)}\` and then the tests again, ${SKIP_HINT}`,
    };
  }
  const viaSudo = (args: readonly string[]): SystemCommand =>
    facts.privilege.kind === 'sudo'
      ? {
          command: facts.privilege.sudo,
          args: [
            '-n',
            ...Object.entries(NONINTERACTIVE).map(([key, value]) => `${key}=${value}`),
            facts.aptGet ?? '',
            ...args,
          ],
        }
      : { command: facts.aptGet ?? '', args };
  return {
    kind: 'install',
    line: `installing ${packages.join(' ')} with apt-get ${asRoot ? 'as root' : 'through sudo'}, for ${describeTools(missing)} (${SYSTEM_TOOLS_SETTING}=skip never installs)`,
    packages,
    update: viaSudo(['update']),
    install: viaSudo([...APT_INSTALL, ...packages]),
    env: NONINTERACTIVE,
    manual: manualCommand(packages, asRoot),
  };
}

/** {@link SYSTEM_TOOLS_SETTING}, checked: undefined when it names neither `install` nor `skip`. */
export function readSystemToolsSetting(
  env: Readonly<Record<string, string | undefined>>,
): SystemToolsSetting | undefined {
  const value = env[SYSTEM_TOOLS_SETTING]?.trim() ?? '';
  if (value === '' || value === 'install') return 'install';
  return value === 'skip' ? 'skip' : undefined;
}

/** How {@link ensureSystemTools} talks and what it runs on. */
export interface EnsureSystemToolsOptions {
  /** Where its lines go (one line per call, without a newline). */
  readonly log: (line: string) => void;
  /** @default this machine ({@link systemHost}) */
  readonly host?: SystemToolsHost;
}

/**
 * Makes sure the tools the test files need are there (every tool when `files` is undefined), installing what is
 * missing when it can. Resolves true when the tests may run: nothing missing, installed, or
 * {@link SYSTEM_TOOLS_SETTING}`=skip`; false, after one line saying what to run, when they may not. Runs nothing
 * when nothing is missing.
 */
export async function ensureSystemTools(
  files: readonly string[] | undefined,
  options: EnsureSystemToolsOptions,
): Promise<boolean> {
  const host = options.host ?? systemHost();
  const { log } = options;
  const setting = readSystemToolsSetting(host.env);
  if (setting === undefined) {
    log(`${SYSTEM_TOOLS_SETTING} is '${host.env[SYSTEM_TOOLS_SETTING] ?? ''}': it takes install (the default) or skip`);
    return false;
  }
  const needed = systemToolsFor(files, host);
  const missing = needed.filter((tool) => !hasSystemTool(tool, host));
  if (missing.length === 0) return true;
  const aptGet = setting === 'install' ? findOnPath('apt-get', host) : undefined;
  const privilege = await privilegeOf(host, aptGet !== undefined);
  const plan = planSystemTools({ missing, setting, aptGet, privilege, distribution: host.distribution });
  switch (plan.kind) {
    case 'ready':
      return true;
    case 'skip':
      log(plan.line);
      return true;
    case 'stop':
      log(plan.line);
      return false;
    case 'install':
      break;
  }
  log(plan.line);
  const { update, install } = plan;
  const updated = await host.run(update.command, update.args, { env: plan.env });
  if (updated !== 0) log(`apt-get update exited with ${updated}: installing from the package lists there are`);
  const installed = await host.run(install.command, install.args, { env: plan.env });
  if (installed !== 0) {
    log(`apt-get install exited with ${installed}: run \`${plan.manual}\` and then the tests again, ${SKIP_HINT}`);
    return false;
  }
  const still = missing.filter((tool) => !hasSystemTool(tool, host));
  if (still.length > 0) {
    log(
      `installed ${plan.packages.join(' ')}, yet still missing: ${describeTools(still)} (not where the tests look: PATH, or the variable that names it); ${SKIP_HINT}`,
    );
    return false;
  }
  return true;
}

/** How apt-get could run here; sudo is tried (`sudo -n true`) only when it would be used. */
async function privilegeOf(host: SystemToolsHost, wanted: boolean): Promise<SystemToolsFacts['privilege']> {
  if (host.isRoot) return { kind: 'root' };
  if (!wanted) return { kind: 'none' };
  const sudo = findOnPath('sudo', host);
  if (sudo === undefined) return { kind: 'none' };
  return (await host.run(sudo, ['-n', 'true'], { quiet: true })) === 0 ? { kind: 'sudo', sudo } : { kind: 'none' };
}

if (require.main === module) {
  const files = process.argv.slice(2);
  ensureSystemTools(files.length === 0 ? undefined : files, {
    log: (line) => process.stderr.write(`[system tools] ${line}\n`),
  }).then(
    (ready) => {
      process.exitCode = ready ? 0 : 1;
    },
    (error: unknown) => {
      process.stderr.write(
        `[system tools] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      process.exitCode = 1;
    },
  );
}
