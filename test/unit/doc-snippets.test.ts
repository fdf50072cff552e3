/**
 * Every ```ts (or ```typescript) block of the pages written for users type-checks, as its own ES module (top-level
 * await allowed) in strict mode, with `baton`, `baton/worker` and `baton/testing` resolving to this checkout's sources,
 * and zod and Node's types installed, as in a user's project. A block may rely on declarations it does not show: an
 * HTML comment right above it, `<!-- prelude: declare const bookings: { create(x: object): Promise<{ id: string }> }; -->`,
 * is put before the block's code (CONTRIBUTING.md, "Snippets").
 *
 * A block is checked as a file beside its page, so a relative import names a file from the page's folder.
 *
 * The compiler runs in this process: one program holds every block, and only the blocks' own files are checked, so
 * Baton's sources are read for their types but not checked here (`npm run typecheck` does that).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';
import { markdownParts, REPO_ROOT, userDocs } from '../../testing/markdown-files';

/** One block to check, with where it came from. */
interface Snippet {
  /** The markdown file, relative to the root. */
  readonly doc: string;
  /** The line of the block's opening fence. */
  readonly line: number;
  /** The line of the prelude's comment, when the block has one. */
  readonly preludeLine?: number;
  readonly prelude: string;
  readonly code: string;
}

const PRELUDE = /<!--\s*prelude:([\s\S]*?)-->\s*$/;

/** The TypeScript blocks of a markdown text, each with the prelude its comment gives. */
function snippetsOf(doc: string, markdown: string): Snippet[] {
  return markdownParts(markdown)
    .blocks.filter((block) => block.lang === 'ts' || block.lang === 'typescript')
    .map((block) => {
      const above = block.before.join('\n').trimEnd();
      const prelude = PRELUDE.exec(above);
      if (prelude === null) return { doc, line: block.line, prelude: '', code: block.body };
      // `before` starts on line `block.line - before.length`; the comment starts on the line its match starts.
      const preludeLine = block.line - block.before.length + above.slice(0, prelude.index).split('\n').length - 1;
      return { doc, line: block.line, preludeLine, prelude: (prelude[1] ?? '').trim(), code: block.body };
    });
}

/**
 * The options of a user's project: Node 20's language level, ES modules resolved as a bundler or tsx does (so a
 * block may use top-level await and import without extensions), strict, and Baton's three entries as paths.
 */
const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  lib: ['lib.es2023.d.ts'],
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  moduleDetection: ts.ModuleDetectionKind.Force,
  strict: true,
  esModuleInterop: true,
  resolveJsonModule: true,
  skipLibCheck: true,
  noEmit: true,
  types: ['node'],
  paths: {
    baton: [path.join(REPO_ROOT, 'index.ts')],
    'baton/worker': [path.join(REPO_ROOT, 'worker', 'index.ts')],
    'baton/testing': [path.join(REPO_ROOT, 'testing', 'index.ts')],
  },
};

/**
 * Type-checks the snippets and returns one line per problem: `<doc>:<line> (in the block at line <n>): TS<code>
 * <message>`, the line being the markdown line the diagnostic points at (the prelude's comment for a problem in the
 * prelude).
 */
function typeCheck(snippets: readonly Snippet[]): string[] {
  // Each block is a virtual file beside its page, so that a relative import names a file from the page's folder (an
  // example's README importing its tools) and zod and @types/node are found in node_modules as a project's would be.
  const files = new Map<string, Snippet>();
  snippets.forEach((snippet, index) => {
    files.set(path.join(REPO_ROOT, path.dirname(snippet.doc), `doc-snippet-${index}.ts`), snippet);
  });
  const text = (snippet: Snippet) => `${snippet.prelude}\n${snippet.code}\n`;
  const host = ts.createCompilerHost(OPTIONS, true);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (fileName, languageVersion, ...rest) => {
    const snippet = files.get(path.resolve(fileName));
    return snippet === undefined
      ? getSourceFile(fileName, languageVersion, ...rest)
      : ts.createSourceFile(fileName, text(snippet), languageVersion, true);
  };
  host.fileExists = (fileName) => files.has(path.resolve(fileName)) || fileExists(fileName);
  const program = ts.createProgram([...files.keys()], OPTIONS, host);
  const global = program.getGlobalDiagnostics();
  assert.deepEqual(
    global.map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')),
    [],
    'the snippets program has no global errors',
  );
  const problems: string[] = [];
  for (const [fileName, snippet] of files) {
    const source = program.getSourceFile(fileName);
    assert.ok(source, fileName);
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    for (const diagnostic of diagnostics) {
      const { line } = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      const preludeLines = snippet.prelude.split('\n').length;
      const where =
        line < preludeLines
          ? `${snippet.doc}:${snippet.preludeLine ?? snippet.line} (the prelude of the block at line ${snippet.line})`
          : `${snippet.doc}:${snippet.line + 1 + line - preludeLines} (in the block at line ${snippet.line})`;
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      problems.push(`${where}: TS${diagnostic.code} ${message}`);
    }
  }
  return problems;
}

/** A page of the test's own, checked beside the docs: a sound block, one with a prelude, and two wrong ones. */
const FIXTURE = 'snippet-fixture.md';
const FIXTURE_TEXT = [
  '# A fixture',
  '',
  '```ts',
  "import { defineTool } from 'baton';",
  "import { startAgentHarness } from 'baton/testing';",
  "import { runWorkerFromEnv } from 'baton/worker';",
  "import { z } from 'zod';",
  "import manifest from './package.json'; // beside the page",
  "const tool = defineTool({ name: 'n', description: 'd', parameters: z.object({}), run: async () => 'ok' });",
  'console.log(manifest.name, tool, startAgentHarness, runWorkerFromEnv, await Promise.resolve(process.pid));',
  '```',
  '',
  '<!-- prelude: declare const bookings: { create(x: object): Promise<{ id: string }> }; -->',
  '',
  '```typescript',
  'const { id } = await bookings.create({});',
  'console.log(id.toUpperCase());',
  '```',
  '',
  '```ts',
  'const n: number = 1;',
  'const s: string = n; // line 22: a number is no string, in strict mode or not',
  '```',
  '',
  '```ts',
  'export function f(x) { return x; } // line 26: an implicit any, refused in strict mode',
  '```',
  '',
  '```sh',
  'not typescript',
  '```',
].join('\n');

function docsSnippets(): Snippet[] {
  return userDocs().flatMap((doc) => snippetsOf(doc, fs.readFileSync(path.join(REPO_ROOT, doc), 'utf8')));
}

test('doc snippets: blocks are found with their lines and preludes', () => {
  const snippets = snippetsOf(FIXTURE, FIXTURE_TEXT);
  assert.deepEqual(
    snippets.map(({ line, preludeLine, prelude }) => ({ line, preludeLine, prelude })),
    [
      { line: 3, preludeLine: undefined, prelude: '' },
      {
        line: 15,
        preludeLine: 13,
        prelude: 'declare const bookings: { create(x: object): Promise<{ id: string }> };',
      },
      { line: 20, preludeLine: undefined, prelude: '' },
      { line: 25, preludeLine: undefined, prelude: '' },
    ],
  );
  const docs = userDocs();
  for (const expected of [
    'README.md',
    'CONTRIBUTING.md',
    'docs/getting-started.md',
    'examples/support-desk/README.md',
  ]) {
    assert.ok(docs.includes(expected), `${expected} is read`);
  }
  assert.ok(!docs.some((doc) => doc.startsWith('docs/reference/')), 'the generated reference is not read');
});

test('doc snippets: every ts block of README.md, CONTRIBUTING.md, docs/ and the examples type-checks', () => {
  const snippets = docsSnippets();
  assert.ok(
    snippets.some((snippet) => snippet.doc === 'README.md'),
    "the README's blocks are read",
  );
  const problems = typeCheck([...snippets, ...snippetsOf(FIXTURE, FIXTURE_TEXT)]);
  // The fixture proves the check can fail, and where it says the problem is.
  const fixture = problems.filter((problem) => problem.startsWith(`${FIXTURE}:`));
  assert.deepEqual(
    fixture.map((problem) => problem.replace(/(: TS\d+) .*/s, '$1')),
    [`${FIXTURE}:22 (in the block at line 20): TS2322`, `${FIXTURE}:26 (in the block at line 25): TS7006`],
    fixture.join('\n'),
  );
  const failing = problems.filter((problem) => !problem.startsWith(`${FIXTURE}:`));
  assert.deepEqual(failing, [], `${failing.length} problems in the docs' TypeScript blocks:\n${failing.join('\n')}`);
});
