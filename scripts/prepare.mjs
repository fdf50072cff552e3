// npm's `prepare`. Installing Baton from a git URL packs a clone of it, and npm runs only `prepare` there (not
// `prepack`), so this builds dist/ when npm was invoked elsewhere (a user's project installing the clone, or a
// project linking the checkout with `file:`). `npm ci` or `npm install` in the checkout itself builds nothing: the
// checkout runs its sources through tsx.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const invokedIn = process.env.INIT_CWD;
if (invokedIn !== undefined && path.resolve(invokedIn) === root) process.exit(0);
const built = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
process.exit(built.status ?? 1);
