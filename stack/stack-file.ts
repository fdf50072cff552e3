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

export function writeStackFile(stateDir: string, stack: StackFile): void {
  fs.mkdirSync(stateDir, { recursive: true });
  const file = stackFilePath(stateDir);
  // Written whole and renamed, so a reader never sees half a file.
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(stack, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);
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
