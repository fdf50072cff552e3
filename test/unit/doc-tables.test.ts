/**
 * No markdown table of the pages written for users has a line wider than 120 characters (Prettier's printWidth): a
 * wider table is unreadable in an editor and in a diff, and Prettier pads every row to the widest cell, so one long
 * cell widens them all. A table that needs long cells is a list instead (`- \`field\`: meaning (default …)`).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { markdownParts, REPO_ROOT, userDocs } from '../../testing/markdown-files';

const WIDTH = 120;

/** The table lines of a markdown text wider than {@link WIDTH}, as `<doc>:<line>: <width> characters`. */
function wideTableLines(doc: string, markdown: string): string[] {
  return markdownParts(markdown)
    .prose.filter(({ text }) => /^\s*\|/.test(text) && [...text].length > WIDTH)
    .map(({ line, text }) => `${doc}:${line}: ${[...text].length} characters`);
}

test('doc tables: a wide table line is found, one in a code block is not', () => {
  const wide = `| ${'x'.repeat(WIDTH)} |`;
  const markdown = ['# Page', '', '| a | b |', '| - | - |', wide, '', '```text', wide, '```', ''].join('\n');
  assert.deepEqual(wideTableLines('page.md', markdown), [`page.md:5: ${WIDTH + 4} characters`]);
  assert.deepEqual(wideTableLines('page.md', `| ${'é'.repeat(WIDTH - 4)} |`), [], 'characters, not bytes');
});

test('doc tables: no table line of README.md, CONTRIBUTING.md, docs/, the examples or bench/README.md is wider than 120', () => {
  const docs = userDocs(REPO_ROOT, ['bench/README.md']);
  assert.ok(docs.includes('README.md') && docs.includes('bench/README.md'), docs.join(' '));
  const wide = docs.flatMap((doc) => wideTableLines(doc, fs.readFileSync(path.join(REPO_ROOT, doc), 'utf8')));
  const files = [...new Set(wide.map((line) => line.split(':')[0]))];
  assert.deepEqual(wide, [], `table lines wider than ${WIDTH} characters in ${files.join(', ')}`);
});
