/**
 * Every relative link of the project's markdown reaches something: the file it names exists, and the heading its
 * `#anchor` names is in that file (the anchors GitHub makes from headings). Links to the web are not followed.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { markdownFiles, REPO_ROOT, withoutFences } from '../../testing/markdown-files';

const ROOT = REPO_ROOT;

/** The text outside fenced code blocks and inline code, where a `[text](target)` is a link. */
function prose(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchors of a file's headings: lower case, punctuation dropped, spaces to `-`, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const withoutCode = withoutFences(markdown);
  for (const match of withoutCode.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = (match[1] ?? '')
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

test('doc links: anchors are made as GitHub makes them', () => {
  assert.deepEqual(
    [
      ...headingAnchors(
        '# Fork/join: parallel workers\n## `baton dev` and the demo\n## Tests\n## Tests\n```\n# not a heading\n```\n',
      ),
    ],
    ['forkjoin-parallel-workers', 'baton-dev-and-the-demo', 'tests', 'tests-1'],
  );
});

test('doc links: every relative link in the markdown names a file that exists, and a heading in it', () => {
  const files = markdownFiles();
  assert.ok(
    files.some((file) => path.relative(ROOT, file) === 'README.md'),
    'the README is read',
  );
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let found = anchorsOf.get(file);
    if (found === undefined) {
      found = headingAnchors(fs.readFileSync(file, 'utf8'));
      anchorsOf.set(file, found);
    }
    return found;
  };
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const match of prose(fs.readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
      checked += 1;
      const [pathPart = '', anchor] = target.split('#', 2);
      const resolved = pathPart === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(pathPart));
      const where = `${path.relative(ROOT, file)}: (${target})`;
      if (!fs.existsSync(resolved)) {
        broken.push(`${where} names no file`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) {
        broken.push(`${where} names no heading of ${path.relative(ROOT, resolved)}`);
      }
    }
  }
  assert.ok(checked > 20, `links were found (${checked})`);
  assert.deepEqual(broken, []);
});
