/**
 * Whose socket listens on a TCP port, where the system tells (Linux's `/proc`). Two `baton dev`s started at once may
 * both find the Web UI's and the server's default ports free and spawn a Temporal dev server on them: the one that
 * loses the race exits, but its readiness probe may already have been answered by the winner's server, which then
 * vanishes with the other stack. Asking whose socket listens tells the two apart.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';

/**
 * Whether process `pid` holds a socket listening on each of `ports` (TCP, IPv4 or IPv6): `false` when one of them is
 * held by another process or by none, `undefined` when the system cannot tell (no `/proc`, or it cannot be read).
 */
export async function listensOn(pid: number, ports: readonly number[]): Promise<boolean | undefined> {
  // A table that cannot be read counts as empty; with neither, the system cannot tell.
  const tables = await Promise.all(
    ['/proc/net/tcp', '/proc/net/tcp6'].map((file) => readFile(file, 'utf8').catch(() => '')),
  );
  if (tables.every((table) => table === '')) return undefined;
  let held: Set<string>;
  try {
    held = await socketInodes(pid);
  } catch {
    return undefined;
  }
  const listening = listeningInodes(tables.join('\n'));
  return ports.every((port) => (listening.get(port) ?? []).some((inode) => held.has(inode)));
}

/** The inodes of the sockets listening on each port, from `/proc/net/tcp` and `tcp6` lines. */
export function listeningInodes(table: string): Map<number, string[]> {
  const byPort = new Map<number, string[]>();
  for (const line of table.split('\n')) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
    const fields = line.trim().split(/\s+/);
    const [, local, , state, , , , , , inode] = fields;
    if (local === undefined || inode === undefined || state !== LISTEN) continue;
    const port = Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
    if (!Number.isInteger(port)) continue;
    byPort.set(port, [...(byPort.get(port) ?? []), inode]);
  }
  return byPort;
}

/** `/proc/net/tcp`'s state of a listening socket. */
const LISTEN = '0A';

/** The inodes of the sockets process `pid` has open: none once it has exited. @throws when they cannot be read */
async function socketInodes(pid: number): Promise<Set<string>> {
  const dir = `/proc/${pid}/fd`;
  let fds: string[];
  try {
    fds = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw error;
  }
  const links = await Promise.all(fds.map((fd) => readlink(`${dir}/${fd}`).catch(() => '')));
  return new Set(links.flatMap((link) => /^socket:\[(\d+)\]$/.exec(link)?.slice(1) ?? []));
}
