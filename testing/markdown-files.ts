/**
 * The project's markdown as the doc tests read it: which files there are, and their fenced code blocks with the lines
 * they start on. The link, snippet and table tests share this, so that they agree on where a code block begins and
 * ends (text inside a fence is neither a link, a heading nor a table).
 */
import fs from 'node:fs';
import path from 'node:path';

/** The repository's root. */
export const REPO_ROOT = path.resolve(__dirname, '..');

/** Folders whose markdown is not ours to keep, or not markdown a reader follows. */
const SKIPPED = new Set(['node_modules', 'dist', '.baton', '.git', 'test-artifacts', 'data']);

/** Every markdown file under `dir` (absolute paths, sorted), leaving out {@link SKIPPED} folders. */
export function markdownFiles(dir = REPO_ROOT): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      if (SKIPPED.has(entry.name)) return [];
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return markdownFiles(full);
      return entry.name.endsWith('.md') ? [full] : [];
    })
    .sort();
}

/**
 * The pages written for users, relative to the root: README.md, CONTRIBUTING.md, docs/ (without docs/reference/,
 * which `npm run docs` generates) and each example's README; `extra` adds more paths of the same form.
 */
export function userDocs(root = REPO_ROOT, extra: readonly string[] = []): string[] {
  const relative = markdownFiles(root).map((file) => path.relative(root, file).split(path.sep).join('/'));
  return relative.filter(
    (file) =>
      file === 'README.md' ||
      file === 'CONTRIBUTING.md' ||
      (file.startsWith('docs/') && !file.startsWith('docs/reference/')) ||
      /^examples\/[^/]+\/README\.md$/.test(file) ||
      extra.includes(file),
  );
}

/** One fenced code block of a markdown text. */
export interface FencedBlock {
  /** The info string's first word (`ts`, `sh`, …), empty when there is none. */
  readonly lang: string;
  /** The 1-based line of the opening fence. */
  readonly line: number;
  /** The lines between the fences, joined with `\n` (the block's indentation kept). */
  readonly body: string;
  /** The lines above the opening fence, up to the previous block's end, as the text had them. */
  readonly before: readonly string[];
}

/** A markdown text read as fenced blocks and the lines outside them. */
export interface MarkdownParts {
  readonly blocks: readonly FencedBlock[];
  /** Every line outside the fences with its 1-based number; the fences' own lines are not in it. */
  readonly prose: readonly { readonly line: number; readonly text: string }[];
}

const OPENING = /^ *(`{3,}|~{3,})\s*([^\s`]*)/;

/**
 * Splits a markdown text into its fenced code blocks (``` or ~~~, at any indentation, so that a fence in a list item
 * counts; closed by a fence of the same character at least as long, or by the end of the text) and its other lines.
 */
export function markdownParts(markdown: string): MarkdownParts {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  const prose: { line: number; text: string }[] = [];
  let afterLast = 0;
  for (let index = 0; index < lines.length; index += 1) {
    const text = lines[index] ?? '';
    const opening = OPENING.exec(text);
    if (!opening) {
      prose.push({ line: index + 1, text });
      continue;
    }
    const fence = opening[1] ?? '```';
    const closing = new RegExp(`^ *${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    let end = index + 1;
    while (end < lines.length && !closing.test(lines[end] ?? '')) end += 1;
    blocks.push({
      lang: (opening[2] ?? '').toLowerCase(),
      line: index + 1,
      body: lines.slice(index + 1, end).join('\n'),
      before: lines.slice(afterLast, index),
    });
    index = end;
    afterLast = end + 1;
  }
  return { blocks, prose };
}

/** The text outside fenced code blocks, line for line (each fence and each line inside one left empty). */
export function withoutFences(markdown: string): string {
  const lines: string[] = markdown.split('\n').map(() => '');
  for (const { line, text } of markdownParts(markdown).prose) lines[line - 1] = text;
  return lines.join('\n');
}

const FILE_MARKER = /^<!--\s*file:\s*(\S+)\s*-->$/;

/**
 * The files a page shows whole, each marked by an HTML comment `<!-- file: <path> -->` (invisible when the page is
 * rendered) as the last line above its block, blank lines between them allowed as prettier writes them: each path with
 * its block's text and a final newline, in the page's order. A path marked twice is an error.
 */
export function markedFiles(markdown: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const block of markdownParts(markdown).blocks) {
    const above = block.before.filter((line) => line.trim() !== '').at(-1) ?? '';
    const marker = FILE_MARKER.exec(above.trim());
    if (marker === null) continue;
    const name = marker[1] ?? '';
    if (name in files) throw new Error(`${name} is marked twice (again at the block on line ${block.line})`);
    files[name] = `${block.body}\n`;
  }
  return files;
}
