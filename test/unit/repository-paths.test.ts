import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { OUTSIDE_PLACEHOLDER, REPO_PLACEHOLDER, scrubMachinePaths } from '../../testing/history-paths';

/**
 * A clone must stand on its own: nothing the repository tracks (code, tests, scripts, benches, docs, recorded
 * histories) may read or name a path outside it. These tests grep every tracked text file for the three ways that
 * happened before: a folder beside the checkout, a `__dirname`-relative path climbing above the repository root, and
 * an absolute path of one machine.
 */
const ROOT = path.resolve(__dirname, '..', '..');

/** Spelled in pieces so this file does not match itself. */
const BESIDE_THE_CHECKOUT = ['..', 'shared'].join('/');
const MACHINE_DIRS = ['work', 'root', 'home', 'tmp', 'Users', 'mnt'];
const MACHINE_PATH = new RegExp(`(?<![\\w.~<>-])/(?:${MACHINE_DIRS.join('|')})/[^\\s'"\`),;\\]}]*`, 'g');
/**
 * Made-up values handed to pure functions by unit tests (a world's `working_directory`, a `HOME` to derive a cache
 * directory from); nothing reads them from disk.
 */
const FICTIONAL_PATHS = ['/home/u', '/home/w', '/home/ü', '/Users/me', '/tmp/x'];
const DIRNAME_PATH = /\b(?:path\.)?(?:join|resolve)\(\s*__dirname((?:\s*,\s*(['"`])[^'"`]*\2)*)/g;

interface TrackedFile {
  readonly file: string;
  readonly text: string;
}

function trackedTextFiles(): TrackedFile[] | string {
  let listing: string;
  try {
    listing = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    return `not a git checkout, or git is missing (${error instanceof Error ? error.message.split('\n')[0] : ''})`;
  }
  return listing
    .split('\0')
    .filter((file) => file !== '' && fs.existsSync(path.join(ROOT, file)))
    .flatMap((file) => {
      const bytes = fs.readFileSync(path.join(ROOT, file));
      return bytes.includes(0) ? [] : [{ file, text: bytes.toString('utf8') }];
    });
}

/** The text to search: the file, and for a recorded history also its payloads, which are base64-encoded JSON. */
function searchable({ file, text }: TrackedFile): string[] {
  if (!file.startsWith('test/replay/histories/')) return [text];
  const payloads = [...text.matchAll(/"data":\s*"([A-Za-z0-9+/=]+)"/g)].map((match) =>
    Buffer.from(match[1] ?? '', 'base64').toString('utf8'),
  );
  return [text, ...payloads];
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

const files = trackedTextFiles();

test('repository paths: no tracked file names a folder beside the checkout', (t) => {
  if (typeof files === 'string') return t.skip(files);
  const found = files.flatMap((tracked) =>
    searchable(tracked).some((text) => text.includes(BESIDE_THE_CHECKOUT)) ? [tracked.file] : [],
  );
  assert.deepEqual(found, [], `these files name '${BESIDE_THE_CHECKOUT}'`);
});

test('repository paths: no tracked file cites a design document outside the repository', (t) => {
  if (typeof files === 'string') return t.skip(files);
  // The architecture is docs/architecture.md; the design notes it grew from are not in a clone.
  const outside = new RegExp(`\\b${'DESIGN'}(?:\\.md\\b| §)`);
  const found = files.flatMap(({ file, text }) => (outside.test(text) ? [file] : []));
  assert.deepEqual(found, [], 'cite docs/architecture.md instead');
});

test('repository paths: no tracked file names an absolute path of one machine', (t) => {
  if (typeof files === 'string') return t.skip(files);
  assert.ok(files.length > 100, `git ls-files listed ${files.length} text files`);
  const found: string[] = [];
  // This checkout's own location, wherever it is, and the directory holding it, unless that is a top-level
  // directory (a clone straight under the temp directory, say): files name that one for good reasons, and the
  // machine directories are matched by MACHINE_PATH above.
  const parent = path.dirname(ROOT);
  const here = [ROOT, ...(parent.split('/').filter(Boolean).length >= 2 ? [`${parent}/`] : [])];
  for (const tracked of files) {
    for (const text of searchable(tracked)) {
      for (const match of text.matchAll(MACHINE_PATH)) {
        if (FICTIONAL_PATHS.some((fictional) => match[0] === fictional || match[0].startsWith(`${fictional}/`))) {
          continue;
        }
        found.push(`${tracked.file}:${lineOf(text, match.index)}: ${match[0]}`);
      }
      for (const dir of here) if (text.includes(dir)) found.push(`${tracked.file}: names ${dir}`);
    }
  }
  assert.deepEqual(found, []);
});

test('repository paths: no __dirname-relative path climbs above the repository root', (t) => {
  if (typeof files === 'string') return t.skip(files);
  const found: string[] = [];
  let checked = 0;
  for (const { file, text } of files) {
    if (!/\.(?:ts|js|cjs|mjs)$/.test(file)) continue;
    for (const match of text.matchAll(DIRNAME_PATH)) {
      checked++;
      const segments = [...(match[1] ?? '').matchAll(/(['"`])([^'"`]*)\1/g)].map((literal) => literal[2] ?? '');
      const target = path.resolve(ROOT, path.dirname(file), ...segments);
      const relative = path.relative(ROOT, target);
      if (relative.startsWith('..') || path.isAbsolute(relative)) {
        found.push(`${file}:${lineOf(text, match.index)}: ${match[0]} → outside the repository`);
      }
    }
  }
  assert.ok(checked > 5, `found ${checked} __dirname-relative paths to check`);
  assert.deepEqual(found, []);
});

test('repository paths: the checks catch what they are for', () => {
  const at = (dir: string, rest: string) => `/${dir}/${rest}`;
  const sample = `const a = '${at('work', 'shared/data')}'; const b = "${at('root', '.cache/x')}"; /var/tmp/ok <repo>/x`;
  assert.deepEqual(
    [...sample.matchAll(MACHINE_PATH)].map((m) => m[0]),
    [at('work', 'shared/data'), at('root', '.cache/x')],
  );
  const design = new RegExp(`\\b${'DESIGN'}(?:\\.md\\b| §)`);
  assert.ok(
    design.test(`see ${'DESIGN'}.md §4`) && design.test(`${'DESIGN'} §6`) && !design.test('docs/architecture.md'),
  );
  const code = `path.resolve(__dirname, '..', '..', 'shared')`;
  const [match] = [...code.matchAll(DIRNAME_PATH)];
  assert.ok(match, 'a __dirname path is recognised');
  assert.equal(match[1], ", '..', '..', 'shared'");
});

test('recorded histories: scrubMachinePaths replaces the repository root and other stack-frame paths', () => {
  const root = '/srv/checkout';
  const payload = (value: unknown) => ({
    metadata: { encoding: Buffer.from('json/plain').toString('base64') },
    data: Buffer.from(JSON.stringify(value)).toString('base64'),
  });
  const history = {
    events: [
      {
        eventId: '1',
        failure: {
          message: `ENOENT: ${root}/data/x.json`,
          stackTrace:
            `Error: boom\n    at f (${root}/activities/model.ts:1:2)\n    at g (/usr/lib/node/x.js:3:4)\n` +
            '    at node:internal/process/task_queues:95:5',
        },
        result: { payloads: [payload({ text: `Error: ${root}/notes.txt is missing` }), payload({ n: 1 })] },
      },
    ],
  };
  const scrubbed = scrubMachinePaths(JSON.stringify(history, null, 2), `${root}/`);
  assert.ok(!scrubbed.includes(root), 'the root is gone from the text');
  const parsed = JSON.parse(scrubbed) as typeof history;
  const event = parsed.events[0];
  assert.ok(event);
  assert.equal(event.failure.message, `ENOENT: ${REPO_PLACEHOLDER}/data/x.json`);
  assert.equal(
    event.failure.stackTrace,
    `Error: boom\n    at f (${REPO_PLACEHOLDER}/activities/model.ts:1:2)\n    at g (${OUTSIDE_PLACEHOLDER}/x.js:3:4)\n` +
      '    at node:internal/process/task_queues:95:5',
  );
  const [first, second] = event.result.payloads;
  assert.deepEqual(JSON.parse(Buffer.from(first?.data ?? '', 'base64').toString('utf8')), {
    text: `Error: ${REPO_PLACEHOLDER}/notes.txt is missing`,
  });
  assert.equal(second?.data, history.events[0]?.result.payloads[1]?.data, 'payloads without the root are untouched');
  assert.equal(scrubMachinePaths(scrubbed, root), scrubbed, 'scrubbing twice changes nothing');
});
