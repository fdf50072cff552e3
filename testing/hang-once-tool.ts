/**
 * A tools module for `baton worker` processes (`BATON_TOOLS`) whose one tool, `hang_once`, hangs on its first run
 * (until its worker dies, or two minutes) and answers on the next: a test kills the worker while the tool of a stored
 * reply runs, and the next worker's re-run shows what it repeats.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface HangOnceTool {
  /** The module to name in `BATON_TOOLS`. */
  readonly toolsFile: string;
  /** How many runs of the tool began, across every worker. */
  runs(): number;
}

/** Writes the module and its run log into `dir`. */
export function writeHangOnceTool(dir: string): HangOnceTool {
  const started = path.join(dir, 'hang-once-runs.log');
  const toolsFile = path.join(dir, 'hang-once-tools.mjs');
  fs.writeFileSync(
    toolsFile,
    `import fs from 'node:fs';
import { z } from 'zod';
export default [{
  name: 'hang_once',
  description: 'Hangs on its first run, answers on the next.',
  parameters: z.object({}),
  retries: 2,
  run: async (_args, ctx) => {
    const first = !fs.existsSync(${JSON.stringify(started)});
    fs.appendFileSync(${JSON.stringify(started)}, 'run\\n');
    if (!first) return 'answered';
    await new Promise((resolve) => { const timer = setTimeout(resolve, 120000); ctx.signal.addEventListener('abort', () => clearTimeout(timer)); });
    return 'late';
  },
}];
`,
  );
  return {
    toolsFile,
    runs: () => (fs.existsSync(started) ? fs.readFileSync(started, 'utf8').split('\n').filter(Boolean).length : 0),
  };
}
