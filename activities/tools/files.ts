/**
 * Read-only file tools confined to one directory. The model names paths; the worker decides the root, and every
 * path is checked against the real (symlink-free) root before anything is opened. Directories the worker hides
 * (Baton's state directory, which holds its secrets) are refused and left out of listings, even inside the root.
 */
import { WORKING_DIRECTORY_VARIABLE } from '../../common/env-text';
import fs from 'node:fs/promises';
import type { Dirent } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { defineTool, ToolError, type ToolContext, type ToolDefinition } from './types';

export interface FileToolOptions {
  /** The directory the tools may read. Paths outside it (after resolving symlinks) are refused. */
  root: string;
  /**
   * Directories the tools never show, even inside the root (absolute paths): `baton dev` and `baton worker` name
   * their state directory (`.baton/`, which holds `stack.json` with the database password, the embedded Postgres and
   * token files), the same ones the shell's sandbox masks. Reading or listing anything in one is refused, however
   * the path reaches it (a symlink, `..`, another spelling of its name on a case-insensitive file system), and a
   * listing leaves them out. A directory created after the tools were is hidden too: each call looks again.
   * @default none
   */
  hidden?: readonly string[];
}

/** Bytes `read_file` returns when the model names no `max_bytes`. */
export const DEFAULT_READ_BYTES = 65_536;
export const MAX_READ_BYTES = 1_048_576;
/** Entries a listing shows before it says how many it left out. */
export const MAX_LIST_ENTRIES = 1000;

/** A NUL in the first bytes means binary: UTF-8 text never contains one. */
const BINARY_SNIFF_BYTES = 8192;
/** Past this many entries a listing stops counting the rest, so a huge tree cannot keep the activity busy. */
const MAX_COUNTED_ENTRIES = 100_000;
/** Symlink hops followed while deciding whether a missing path is outside the root (the kernel allows 40). */
const MAX_SYMLINK_HOPS = 40;

const readFileParameters = z.strictObject({
  path: z.string().min(1).describe('Path of the file to read, relative to the files directory (e.g. "notes/plan.md").'),
  max_bytes: z
    .number()
    .int()
    .min(1)
    .max(MAX_READ_BYTES)
    .default(DEFAULT_READ_BYTES)
    .describe(
      `Read at most this many bytes (default ${DEFAULT_READ_BYTES}, at most ${MAX_READ_BYTES}); ` +
        'a longer file is cut at a character boundary and says so.',
    ),
});

const listFilesParameters = z.strictObject({
  path: z
    .string()
    .min(1)
    .default('.')
    .describe('Directory to list, relative to the files directory (default ".", the files directory itself).'),
  recursive: z
    .boolean()
    .default(false)
    .describe('List subdirectories too (default false). Symlinked directories are shown but not descended into.'),
});

/**
 * Builds `read_file` and `list_files`, both confined to `options.root`.
 *
 * Confinement resolves the requested path against the root, takes its real path and refuses it unless that
 * lies inside the root's real path, so `../` traversal, absolute paths elsewhere and symlinks pointing out of
 * the root are all refused the same way. Refusals name only the path the model passed.
 */
export function createFileTools(options: FileToolOptions): ToolDefinition[] {
  const hidden = (options.hidden ?? []).map((dir) => path.resolve(dir));

  /** The world's working_directory when it has one (the directory the shell works in too), else the configured root. */
  function rootOf(context: ToolContext): string {
    const workingDirectory = context.world.variables[WORKING_DIRECTORY_VARIABLE]?.trim();
    return path.resolve(workingDirectory || options.root);
  }

  async function resolveRoot(root: string): Promise<string> {
    try {
      const real = await fs.realpath(root);
      if (!(await fs.stat(real)).isDirectory()) throw new Error('files root is not a directory');
      return real;
    } catch (error) {
      throw new ToolError('The files directory is not configured or does not exist on this worker.', {
        cause: error,
      });
    }
  }

  /**
   * The real path of `requested`, or a ToolError if it is outside the root, in a hidden directory or missing. A
   * missing path below a hidden directory is refused as hidden, so probing one learns nothing of what it holds.
   */
  async function confine(
    requested: string,
    context: ToolContext,
  ): Promise<{ real: string; realRoot: string; masks: HiddenDirectories }> {
    if (requested.includes('\0')) throw new ToolError('Paths must not contain NUL bytes.');
    const root = rootOf(context);
    const rootReal = await resolveRoot(root);
    const masks = await HiddenDirectories.find(hidden);
    if (await masks.covers(rootReal)) {
      throw new ToolError(
        "The files directory is inside a directory hidden from the file tools (Baton's state, which holds its " +
          'secrets): nothing can be read there. Ask for a world whose working directory is elsewhere.',
      );
    }
    const found = await confinePath(root, rootReal, requested);
    if (found.status === 'outside') throw outside(requested);
    if (found.status === 'inside' ? await masks.covers(found.real) : await masks.coversMissing(root, requested)) {
      throw hiddenPath(requested);
    }
    if (found.status === 'missing') {
      if (found.code === 'EACCES') throw new ToolError(`Permission denied: ${requested}`);
      if (found.code === 'ELOOP') throw new ToolError(`Too many levels of symbolic links: ${requested}`);
      throw new ToolError(`File not found: ${requested}`);
    }
    return { real: found.real, realRoot: rootReal, masks };
  }

  const readFile = defineTool({
    name: 'read_file',
    description:
      'Read a text file from the files directory. Returns its UTF-8 text; a file longer than max_bytes is ' +
      'truncated and ends with a line saying so. Binary files are refused.',
    parameters: readFileParameters,
    handledBy: 'activity',
    async run(args, context) {
      context.signal.throwIfAborted();
      const { real, realRoot, masks } = await confine(args.path, context);
      const stats = await statOrExplain(real, args.path);
      if (stats.isDirectory()) throw new ToolError(`'${args.path}' is a directory; use list_files to see its entries.`);
      // A FIFO or device would block or never end: only regular files are read.
      if (!stats.isFile()) throw new ToolError(`'${args.path}' is not a regular file.`);

      const limit = Math.max(args.max_bytes + 1, BINARY_SNIFF_BYTES);
      // The path was checked before it was opened: a directory on it swapped for a symlink in between (a command of
      // the same reply can try) would open something else. What was opened is checked again before a byte is read.
      const { bytes, size } = await readHead(real, args.path, limit, async (opened) => {
        if (!isInside(realRoot, opened)) throw outside(args.path);
        if (await masks.covers(opened)) throw hiddenPath(args.path);
      });
      if (bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)) {
        throw new ToolError(`'${args.path}' is a binary file; read_file returns text only.`);
      }
      if (bytes.length <= args.max_bytes) return bytes.toString('utf8');

      const end = utf8Boundary(bytes, args.max_bytes);
      const text = bytes.subarray(0, end).toString('utf8');
      // stat reports 0 for some special files (procfs); never claim fewer bytes than were read.
      const total = Math.max(size, bytes.length);
      return (
        `${text}${text.endsWith('\n') ? '' : '\n'}` +
        `[truncated: showed the first ${end} of ${total} bytes; call read_file with a larger max_bytes ` +
        `(at most ${MAX_READ_BYTES}) to see more]`
      );
    },
  });

  const listFiles = defineTool({
    name: 'list_files',
    description:
      'List a directory of the files directory: one path per line, relative to the files directory, ' +
      `directories ending in "/", sorted, at most ${MAX_LIST_ENTRIES} entries.`,
    parameters: listFilesParameters,
    handledBy: 'activity',
    async run(args, context) {
      context.signal.throwIfAborted();
      const { real, realRoot: rootReal, masks } = await confine(args.path, context);
      const stats = await statOrExplain(real, args.path);
      if (!stats.isDirectory()) throw new ToolError(`'${args.path}' is not a directory; use read_file to read it.`);
      return listDirectory(real, { rootReal, masks }, args.recursive, args.path, context);
    },
  });

  return [readFile, listFiles];
}

/** Where a path named relative to a root lands once symlinks are resolved. */
export type ConfinedPath =
  | { readonly status: 'inside'; readonly real: string }
  | { readonly status: 'outside' }
  /** Nothing inside the root answers to the path (`code` says why: ENOENT, ENOTDIR, EACCES or ELOOP). */
  | { readonly status: 'missing'; readonly code: 'ENOENT' | 'ENOTDIR' | 'EACCES' | 'ELOOP' };

/**
 * Resolves `requested` against `root` and decides, on real paths, whether it lies inside the root; shared by the
 * file tools and the shell tool's directory check.
 *
 * Lexical escapes (`../`, absolute paths elsewhere) are refused before the filesystem is touched, so probing
 * outside learns nothing, not even whether something exists; absolute paths spelled through the real root are
 * fine. A path that cannot be resolved because a symlink leads out of the root is `outside`, never `missing`.
 * `requested` must not contain NUL bytes: callers refuse those first.
 * @param root The root as configured (absolute).
 * @param rootReal The root's real path (`fs.realpath(root)`).
 * @throws what `fs.realpath` throws for errors other than ENOENT, ENOTDIR, EACCES and ELOOP.
 */
export async function confinePath(root: string, rootReal: string, requested: string): Promise<ConfinedPath> {
  const candidate = path.resolve(root, requested);
  if (!isInside(root, candidate) && !isInside(rootReal, candidate)) return { status: 'outside' };
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch (error) {
    const code = missingCode(error);
    if (code === undefined) throw error;
    // A symlink may lead outside to something missing or unreadable: say "outside" rather than reveal that.
    if ((await classifyMissing(candidate, rootReal, 0)) === 'outside') return { status: 'outside' };
    return { status: 'missing', code };
  }
  return isInside(rootReal, real) ? { status: 'inside', real } : { status: 'outside' };
}

function missingCode(error: unknown): 'ENOENT' | 'ENOTDIR' | 'EACCES' | 'ELOOP' | undefined {
  for (const code of ['ENOENT', 'ENOTDIR', 'EACCES', 'ELOOP'] as const) if (isCode(error, code)) return code;
  return undefined;
}

interface PendingEntry {
  /** Relative to the root, `/`-separated, without the trailing `/`. */
  rel: string;
  real: string;
  directory: boolean;
  /** A directory reached through a symlink: shown, never descended into (no cycles, no duplicates). */
  descend: boolean;
}

/** What a listing is confined to: the root's real path, and the hidden directories it leaves out. */
interface ListingBounds {
  rootReal: string;
  masks: HiddenDirectories;
}

async function listDirectory(
  dir: string,
  bounds: ListingBounds,
  recursive: boolean,
  requested: string,
  context: ToolContext,
): Promise<string> {
  const lines: string[] = [];
  const unreadable: string[] = [];
  let shown = 0;
  let leftOut = 0;
  let countingStopped = false;

  let top: PendingEntry[];
  try {
    top = await readEntries(dir, bounds);
  } catch (error) {
    if (isCode(error, 'EACCES', 'EPERM')) throw new ToolError(`Permission denied: ${requested}`, { cause: error });
    throw error;
  }
  // Depth-first with sorted siblings, so each directory's entries follow it.
  const stack = top.reverse();
  for (let entry = stack.pop(); entry; entry = stack.pop()) {
    if (shown < MAX_LIST_ENTRIES) {
      lines.push(entry.directory ? `${entry.rel}/` : entry.rel);
      shown += 1;
    } else if (shown + leftOut >= MAX_COUNTED_ENTRIES) {
      countingStopped = true;
      break;
    } else {
      leftOut += 1;
    }
    if (!recursive || !entry.descend) continue;
    context.signal.throwIfAborted();
    context.heartbeat({ listed: shown + leftOut });
    try {
      stack.push(...(await readEntries(entry.real, bounds)).reverse());
    } catch (error) {
      if (!isCode(error, 'EACCES', 'EPERM', 'ENOENT', 'ENOTDIR')) throw error;
      unreadable.push(`${entry.rel}/`);
    }
  }

  if (lines.length === 0) lines.push(`(${requested} is empty)`);
  if (countingStopped) {
    lines.push(`[${leftOut}+ more entries left out (stopped counting); list a subdirectory to see them]`);
  } else if (leftOut > 0) {
    lines.push(`[${leftOut} more entries left out; list a subdirectory to see them]`);
  }
  for (const rel of unreadable) lines.push(`[could not list ${rel}: permission denied or removed while listing]`);
  return lines.join('\n');
}

async function readEntries(dir: string, { rootReal, masks }: ListingBounds): Promise<PendingEntry[]> {
  const dirents: Dirent[] = await fs.readdir(dir, { withFileTypes: true });
  dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const entries: PendingEntry[] = [];
  for (const dirent of dirents) {
    const real = path.join(dir, dirent.name);
    // `dir` is a real path, so a hidden directory's entry is the directory itself: left out, never descended into.
    if (!dirent.isSymbolicLink() && (await masks.isEntry(real, dirent.name))) continue;
    const rel = path.relative(rootReal, real).split(path.sep).join('/');
    if (dirent.isSymbolicLink()) {
      // Only a target inside the root is looked at, so a listing says nothing about what lies outside; a link into a
      // hidden directory is a plain entry, which read_file then refuses.
      entries.push({ rel, real, directory: await isDirectoryInside(real, rootReal, masks), descend: false });
    } else {
      entries.push({ rel, real, directory: dirent.isDirectory(), descend: dirent.isDirectory() });
    }
  }
  return entries;
}

async function isDirectoryInside(link: string, rootReal: string, masks: HiddenDirectories): Promise<boolean> {
  try {
    const target = await fs.realpath(link);
    return isInside(rootReal, target) && !(await masks.covers(target)) && (await fs.stat(target)).isDirectory();
  } catch {
    return false; // dangling or looping: listed as a plain entry
  }
}

/**
 * The hidden directories as they are at one call: each by its path as configured, its real path and its identity
 * (device and inode), so a path that reaches one under another name (a case-insensitive file system, a bind mount)
 * is still recognised. One that does not exist (yet) hides only its own path.
 */
class HiddenDirectories {
  private constructor(private readonly dirs: readonly { paths: readonly string[]; id: string | undefined }[]) {}

  static async find(configured: readonly string[]): Promise<HiddenDirectories> {
    const dirs = await Promise.all(
      configured.map(async (dir) => {
        try {
          const real = await fs.realpath(dir);
          return { paths: [dir, real], id: identity(await fs.stat(real)) };
        } catch {
          return { paths: [dir], id: undefined };
        }
      }),
    );
    return new HiddenDirectories(dirs);
  }

  /**
   * Whether `real` is a hidden directory or lies below one: by its spelling, or by the identity of any of its
   * ancestors that exists (`real` need not exist, nor be free of symlinks: `stat` follows them).
   */
  async covers(real: string): Promise<boolean> {
    if (this.dirs.length === 0) return false;
    if (this.dirs.some((dir) => dir.paths.some((hidden) => isInside(hidden, real)))) return true;
    const ids = this.ids();
    if (ids.size === 0) return false;
    for (let at = real; ; at = path.dirname(at)) {
      const id = await identityOf(at);
      if (id !== undefined && ids.has(id)) return true;
      if (path.dirname(at) === at) return false;
    }
  }

  /**
   * Whether a path that does not resolve (`requested`, relative to `root`) would lie in a hidden directory: as it is
   * spelt, or where the dangling symlinks on its way lead (followed by their text, as `classifyMissing` does).
   */
  async coversMissing(root: string, requested: string): Promise<boolean> {
    if (this.dirs.length === 0) return false;
    const candidate = path.resolve(root, requested);
    if (await this.covers(candidate)) return true;
    const target = await unresolvedTarget(candidate, 0);
    return target !== undefined && (await this.covers(target));
  }

  /**
   * Whether the directory entry `real` (named `name`, its parent a real path) is a hidden directory. Only an entry
   * whose name matches a hidden directory's, ignoring case, is looked at, so a listing pays for no other.
   */
  async isEntry(real: string, name: string): Promise<boolean> {
    if (this.dirs.some((dir) => dir.paths.includes(real))) return true;
    const lower = name.toLowerCase();
    const named = this.dirs.filter((dir) => dir.id !== undefined && dir.paths.some((p) => basenameLower(p) === lower));
    if (named.length === 0) return false;
    const id = await identityOf(real);
    return named.some((dir) => dir.id === id);
  }

  private ids(): Set<string> {
    return new Set(this.dirs.flatMap((dir) => (dir.id === undefined ? [] : [dir.id])));
  }
}

/**
 * Where a path that cannot be resolved would be if its missing part were created: its deepest existing ancestor's
 * real path with the rest appended, a dangling symlink on the way followed by its text. `undefined` past
 * MAX_SYMLINK_HOPS or when no ancestor can be resolved.
 */
async function unresolvedTarget(candidate: string, hops: number): Promise<string | undefined> {
  if (hops > MAX_SYMLINK_HOPS) return undefined;
  const rest: string[] = [];
  let ancestor = candidate;
  let ancestorReal: string | undefined;
  while (ancestorReal === undefined) {
    const parent = path.dirname(ancestor);
    if (parent === ancestor) return undefined;
    rest.unshift(path.basename(ancestor));
    ancestor = parent;
    try {
      ancestorReal = await fs.realpath(ancestor);
    } catch (error) {
      if (!isCode(error, 'ENOENT', 'ENOTDIR')) return undefined;
    }
  }
  const [first, ...remaining] = rest;
  if (first === undefined) return ancestorReal;
  const next = path.join(ancestorReal, first);
  try {
    if ((await fs.lstat(next)).isSymbolicLink()) {
      return unresolvedTarget(path.resolve(ancestorReal, await fs.readlink(next), ...remaining), hops + 1);
    }
  } catch {
    // Not there: the path ends here.
  }
  return path.join(ancestorReal, ...rest);
}

function identity(stats: { dev: number; ino: number }): string {
  return `${stats.dev}:${stats.ino}`;
}

async function identityOf(file: string): Promise<string | undefined> {
  try {
    return identity(await fs.stat(file));
  } catch {
    return undefined;
  }
}

function basenameLower(file: string): string {
  return path.basename(file).toLowerCase();
}

/**
 * Decides whether a path whose real path cannot be taken would land outside the root: walks up to the deepest
 * existing ancestor, and follows a dangling symlink found below it (by its text, never by opening its target).
 */
async function classifyMissing(candidate: string, rootReal: string, hops: number): Promise<'outside' | 'missing'> {
  // Every hop so far stayed inside: a longer chain is a loop the kernel refuses anyway (ELOOP).
  if (hops > MAX_SYMLINK_HOPS) return 'missing';
  const rest: string[] = [];
  let ancestor = candidate;
  let ancestorReal: string | undefined;
  while (ancestorReal === undefined) {
    const parent = path.dirname(ancestor);
    if (parent === ancestor) return 'outside'; // even the filesystem root is unreadable
    rest.unshift(path.basename(ancestor));
    ancestor = parent;
    try {
      ancestorReal = await fs.realpath(ancestor);
    } catch (error) {
      if (!isCode(error, 'ENOENT', 'ENOTDIR')) return 'outside';
    }
  }
  if (!isInside(rootReal, ancestorReal)) return 'outside';
  const [first, ...remaining] = rest;
  if (first === undefined) return 'missing';
  const next = path.join(ancestorReal, first);
  let target: string;
  try {
    if (!(await fs.lstat(next)).isSymbolicLink()) return 'missing';
    target = await fs.readlink(next);
  } catch {
    return 'missing';
  }
  return classifyMissing(path.resolve(ancestorReal, target, ...remaining), rootReal, hops + 1);
}

async function statOrExplain(real: string, requested: string) {
  try {
    return await fs.stat(real);
  } catch (error) {
    if (isCode(error, 'ENOENT', 'ENOTDIR')) throw new ToolError(`File not found: ${requested}`);
    throw error;
  }
}

/**
 * Reads up to `limit` bytes from the start of a file, and its size as stat reports it, once `check` has accepted the
 * real path of what was opened (where the system tells it: Linux's `/proc/self/fd`).
 */
async function readHead(
  file: string,
  requested: string,
  limit: number,
  check: (opened: string) => Promise<void>,
): Promise<{ bytes: Buffer; size: number }> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (error) {
    // Removed (or swapped) since it was checked: as if it had not been there.
    if (isCode(error, 'ENOENT', 'ENOTDIR', 'ELOOP'))
      throw new ToolError(`File not found: ${requested}`, { cause: error });
    throw error;
  }
  try {
    const opened = await openedPath(handle);
    if (opened !== undefined) await check(opened);
    const { size } = await handle.stat();
    // Sized by the limit, not by stat: some special files report size 0 and still have content.
    const buffer = Buffer.alloc(limit);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return { bytes: buffer.subarray(0, length), size };
  } finally {
    await handle.close();
  }
}

/** The real path of an open file as the kernel has it, or `undefined` where it cannot be read (not Linux, no /proc). */
async function openedPath(handle: fs.FileHandle): Promise<string | undefined> {
  if (process.platform !== 'linux') return undefined;
  try {
    return await fs.readlink(`/proc/self/fd/${handle.fd}`);
  } catch {
    return undefined;
  }
}

/** The largest cut at or before `max` that does not split a UTF-8 character. */
function utf8Boundary(bytes: Buffer, max: number): number {
  let end = max;
  // Continuation bytes are 10xxxxxx: back up to the lead byte of the character that straddles the cut.
  // A character has at most 3 of them; backing up further would only eat into text that is not UTF-8 anyway.
  while (end > 0 && end > max - 3 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  return end;
}

/** Whether `child` is `parent` or lies below it, compared as path strings (resolve symlinks first). */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function outside(requested: string): ToolError {
  return new ToolError(`Path '${requested}' is outside the allowed directory.`);
}

function hiddenPath(requested: string): ToolError {
  return new ToolError(
    `Path '${requested}' is in a directory hidden from the file tools (Baton's state, which holds its secrets): ` +
      'it cannot be read or listed. Use a path outside it.',
  );
}

/** Whether `error` is a Node system error with one of `codes` (`ENOENT`, …). */
export function isCode(error: unknown, ...codes: string[]): error is NodeJS.ErrnoException {
  return error instanceof Error && 'code' in error && codes.includes(String(error.code));
}
