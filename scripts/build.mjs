// `npm run build` (run by `prepack`, and by `prepare` for a git install): compiles the product rooms into dist/ as
// CommonJS with declarations and source maps (tsconfig.build.json), and copies beside them what they read at run
// time by paths relative to their own files, so dist/ runs with no sources and no TypeScript. A checkout runs the
// sources through tsx and needs none of this.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dist = path.join(root, 'dist');

/**
 * Files read through `__dirname`: the migrations (db/migrate.ts), the example ARC team's agents and their model script
 * (`baton demo`, dev/commands.ts), the ARC tasks (`load_arc_task`'s default, worker/config.ts) and the Temporal
 * server's config (the production topology, stack/production.ts).
 */
const RUNTIME_FILES = ['db/migrations', 'examples/arc-team/agents', 'data/arc', 'deploy/temporal'];

fs.rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (compiled.status !== 0) {
  process.stderr.write(`build: tsc -p tsconfig.build.json failed (exit ${compiled.status ?? compiled.signal})\n`);
  process.exit(1);
}
for (const dir of RUNTIME_FILES) {
  fs.cpSync(path.join(root, dir), path.join(dist, dir), { recursive: true });
}
process.stderr.write(`build: dist/ written (${RUNTIME_FILES.join(', ')} copied)\n`);
