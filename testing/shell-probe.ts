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
