import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** What `baton dev` writes to `.baton/stack.json` so other CLI commands can find the local stack. */
export const stackFileSchema = z.object({
  temporalAddress: z.string().min(1),
  namespace: z.string().min(1),
  taskQueue: z.string().min(1),
  databaseUrl: z.string().min(1),
  uiUrl: z.string().optional(),
  /** The thread explorer `baton dev` and the demo serve (see explorer/). */
  explorerUrl: z.string().optional(),
  modelBaseURL: z.string().optional(),
  scriptedModel: z.boolean(),
  pid: z.number().int(),
  startedAt: z.string(),
});

export type StackFile = z.infer<typeof stackFileSchema>;

/** Default state directory of the local stack, relative to the working directory. */
export const DEFAULT_STATE_DIR = '.baton';

export function stackFilePath(stateDir: string): string {
  return path.join(stateDir, 'stack.json');
}

/** The stack file's mode: owner only, since it holds the database URL with its password. */
export const STACK_FILE_MODE = 0o600;

export function writeStackFile(stateDir: string, stack: StackFile): void {
  fs.mkdirSync(stateDir, { recursive: true });
  const file = stackFilePath(stateDir);
  const temporary = `${file}.${process.pid}.tmp`;
  // Written whole and renamed, so a reader never sees half a file. The temporary file is created afresh ('wx', after
  // removing one a crash left), because writeFile's mode applies only to a file it creates.
  fs.rmSync(temporary, { force: true });
  fs.writeFileSync(temporary, `${JSON.stringify(stack, null, 2)}\n`, { mode: STACK_FILE_MODE, flag: 'wx' });
  fs.renameSync(temporary, file);
}

/** The stack file, or `undefined` when absent or written by a process that is no longer running. */
export function readStackFile(stateDir: string): StackFile | undefined {
  const file = stackFilePath(stateDir);
  if (!fs.existsSync(file)) return undefined;
  const parsed = stackFileSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8')));
  if (!parsed.success || !processAlive(parsed.data.pid)) return undefined;
  return parsed.data;
}

export function removeStackFile(stateDir: string, pid: number): void {
  const file = stackFilePath(stateDir);
  try {
    const current = stackFileSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8')));
    if (current.success && current.data.pid === pid) fs.rmSync(file);
  } catch {
    // Already gone or unreadable: nothing of ours to remove.
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
