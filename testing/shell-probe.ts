/**
 * What the shell sandbox's tests use to act as an attacker from inside a command and to watch its processes from
 * outside it.
 */
import fs from 'node:fs';

/**
 * Shell lines (for `sh -c`) that reach for everything of the worker a command could: the pids it can see
 * (`pids: …`), then from the shell up through every parent it can see, each one's working directory
 * (`ancestor <pid> in <dir>`) and environment, then the environment of every process it can see.
 */
export const ANCESTRY_PROBE: readonly string[] = [
  'echo "pids: $(ls /proc | grep -E "^[0-9]+$" | tr "\\n" " ")"',
  'pid=$$',
  'while [ "$pid" -gt 0 ]; do',
  '  echo "ancestor $pid in $(readlink /proc/$pid/cwd)"; tr "\\0" "\\n" < /proc/$pid/environ; echo',
  '  pid=$(awk "/^PPid:/ { print \\$2 }" /proc/$pid/status)',
  'done',
  'for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ; echo; done',
];

/** The ancestors an {@link ANCESTRY_PROBE} reached, nearest first: their pids as seen inside, and directories. */
export function probedAncestors(output: string): { pid: number; cwd: string }[] {
  return [...output.matchAll(/^ancestor (\d+) in (.*)$/gm)].map((match) => ({
    pid: Number(match[1]),
    cwd: match[2] ?? '',
  }));
}

/**
 * Host pids of the live processes whose environment holds `NAME=value`, whatever namespace they run in (a zombie
 * has no environment, so it is not counted).
 */
export function processesWithVariable(name: string, value: string): number[] {
  const needle = Buffer.from(`${name}=${value}\0`);
  return fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const environ = fs.readFileSync(`/proc/${entry}/environ`);
        const at = environ.indexOf(needle);
        return at === 0 || (at > 0 && environ[at - 1] === 0);
      } catch {
        return false; // gone, or not ours to read
      }
    })
    .map(Number);
}

/** Where an {@link APPROVAL_PROBE} is written, and the file of targets it reads, in a command's working directory. */
export const APPROVAL_PROBE_FILE = 'approval-probe.mjs';
export const APPROVAL_TARGETS_FILE = 'approval-targets.json';

/** What an {@link APPROVAL_PROBE} reads from {@link APPROVAL_TARGETS_FILE}. */
export interface ApprovalTargets {
  /** The root whose approval `a1` it tries to approve. */
  root: string;
  /** The explorer's address (`http://127.0.0.1:<port>`). */
  explorer: string;
  /** `baton mcp serve --http`'s address (`http://127.0.0.1:<port>/mcp`). */
  mcp: string;
  /** The Temporal frontend, which takes the `decideApproval` Update from anyone who reaches it. */
  temporalHost: string;
  temporalPort: number;
}

/** The lines of an {@link APPROVAL_PROBE}, one per target. */
export const APPROVAL_PROBE_TARGETS = [
  'explorer approve',
  'explorer list',
  'mcp decide_approval',
  'temporal frontend',
] as const;

/**
 * A Node script (ESM) that tries everything on a machine that decides or lists approvals, as a model's command
 * would: the explorer's approve endpoint (with its own Origin, as no browser would send it) and its list of threads,
 * the MCP server's `decide_approval`, and a connection to the Temporal frontend. It prints one line per target,
 * `<target>: status <n>` (`status connected` for the frontend) or `<target>: unreachable (<code>)`.
 */
export const APPROVAL_PROBE = `
import fs from 'node:fs';
import net from 'node:net';
const targets = JSON.parse(fs.readFileSync('${APPROVAL_TARGETS_FILE}', 'utf8'));
async function http(name, url, init) {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
    console.log(name + ': status ' + response.status);
  } catch (error) {
    console.log(name + ': unreachable (' + (error.cause?.code ?? error.name) + ')');
  }
}
function tcp(name, host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 5000 });
    socket.on('connect', () => { console.log(name + ': status connected'); socket.destroy(); resolve(); });
    socket.on('timeout', () => { console.log(name + ': unreachable (timeout)'); socket.destroy(); resolve(); });
    socket.on('error', (error) => { console.log(name + ': unreachable (' + error.code + ')'); resolve(); });
  });
}
const approve = targets.explorer + '/api/threads/' + encodeURIComponent(targets.root) + '/approvals/a1/approve';
await http('explorer approve', approve, {
  method: 'POST',
  headers: { 'content-type': 'application/json', origin: targets.explorer },
  body: JSON.stringify({ by: 'the model' }),
});
await http('explorer list', targets.explorer + '/api/threads', {});
await http('mcp decide_approval', targets.mcp, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'decide_approval', arguments: { thread_id: targets.root, approval_id: 'a1', decision: 'approve' } },
  }),
});
await tcp('temporal frontend', targets.temporalHost, targets.temporalPort);
`;

/** What an {@link APPROVAL_PROBE} printed, by target (targets it printed nothing for are missing). */
export function approvalProbeLines(output: string): Map<string, string> {
  const lines = new Map<string, string>();
  for (const line of output.split('\n')) {
    const match = /^([a-z_ ]+): (status \S+|unreachable \(\S+\))$/.exec(line.trim());
    if (match && (APPROVAL_PROBE_TARGETS as readonly string[]).includes(match[1] as string)) {
      lines.set(match[1] as string, match[2] as string);
    }
  }
  return lines;
}

/** Writes an {@link APPROVAL_PROBE} and its targets into `dir`, a command's working directory. */
export function writeApprovalProbe(dir: string, targets: ApprovalTargets): void {
  fs.writeFileSync(`${dir}/${APPROVAL_PROBE_FILE}`, APPROVAL_PROBE);
  fs.writeFileSync(`${dir}/${APPROVAL_TARGETS_FILE}`, JSON.stringify(targets));
}
