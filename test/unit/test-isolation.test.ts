/**
 * Every test passes alone (`npm test -- <file> --test-name-pattern "<title>"`), never only because an earlier test
 * of its file ran first. The commonest way that breaks: a `let` at file or `describe` level that one test assigns and
 * a later one reads. Hooks (`before`, `beforeEach`) may set such bindings (fixtures shared read-only); test bodies may
 * not. A binding tests must replace says why in a leading comment holding `test-isolation:` and a reason.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');
/** The chaos suite runs rounds in sequence on purpose; the rest must stand alone. */
const SUITES = ['unit', 'integration', 'e2e', 'replay'];
const TEST_CALLS = new Set(['test', 'it']);
const SUITE_CALLS = new Set(['describe', 'suite']);
const ALLOW_MARKER = /test-isolation:\s*\S/;

/** `test(...)`, `it(...)` and their `.only`/`.skip`/`.todo` forms; likewise for `describe`. */
function callName(call: ts.CallExpression): string | undefined {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) return callee.expression.text;
  return undefined;
}

function bodyOf(call: ts.CallExpression): ts.FunctionLikeDeclaration | undefined {
  const last = call.arguments.at(-1);
  return last && (ts.isArrowFunction(last) || ts.isFunctionExpression(last)) ? last : undefined;
}

function bindingNames(name: ts.BindingName, into: Set<string>): void {
  if (ts.isIdentifier(name)) into.add(name.text);
  else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bindingNames(element.name, into);
}

/** `let`/`var` bindings declared directly at file level or in a `describe` callback, unless marked. */
function sharedBindings(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const collect = (statements: readonly ts.Statement[]) => {
    for (const statement of statements) {
      if (ts.isVariableStatement(statement) && !(statement.declarationList.flags & ts.NodeFlags.Const)) {
        const comments = ts.getLeadingCommentRanges(source.text, statement.pos) ?? [];
        if (comments.some((range) => ALLOW_MARKER.test(source.text.slice(range.pos, range.end)))) continue;
        for (const declaration of statement.declarationList.declarations) bindingNames(declaration.name, names);
      }
      // describe('…', () => { let x; … }) at this level.
      if (ts.isExpressionStatement(statement) && ts.isCallExpression(statement.expression)) {
        const name = callName(statement.expression);
        const body = bodyOf(statement.expression);
        if (name && SUITE_CALLS.has(name) && body?.body && ts.isBlock(body.body)) collect(body.body.statements);
      }
    }
  };
  collect(source.statements);
  return names;
}

/** Names the test body declares itself (variables, parameters, functions): those shadow the shared ones. */
function declaredWithin(node: ts.Node): Set<string> {
  const names = new Set<string>();
  const visit = (child: ts.Node) => {
    if (ts.isVariableDeclaration(child) || ts.isParameter(child)) bindingNames(child.name, names);
    if ((ts.isFunctionDeclaration(child) || ts.isClassDeclaration(child)) && child.name) names.add(child.name.text);
    ts.forEachChild(child, visit);
  };
  visit(node);
  return names;
}

const ASSIGNMENTS = new Set([
  ts.SyntaxKind.EqualsToken,
  ts.SyntaxKind.PlusEqualsToken,
  ts.SyntaxKind.MinusEqualsToken,
  ts.SyntaxKind.AsteriskEqualsToken,
  ts.SyntaxKind.SlashEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
]);

/** The identifier a node assigns, when it is an assignment, `++` or `--` of a plain name. */
function assignedName(node: ts.Node): ts.Identifier | undefined {
  if (ts.isBinaryExpression(node) && ASSIGNMENTS.has(node.operatorToken.kind) && ts.isIdentifier(node.left)) {
    return node.left;
  }
  if (
    (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
    (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken) &&
    ts.isIdentifier(node.operand)
  ) {
    return node.operand;
  }
  return undefined;
}

/** `file:line: test 'title' assigns 'name'` for every shared binding a test body assigns. */
export function sharedAssignments(text: string, file: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const shared = sharedBindings(source);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && TEST_CALLS.has(callName(node) ?? '')) {
      const body = bodyOf(node);
      if (body) {
        const own = declaredWithin(body);
        const first = node.arguments[0];
        const title = first && ts.isStringLiteralLike(first) ? first.text : (first?.getText(source) ?? '');
        const inBody = (child: ts.Node) => {
          const name = assignedName(child);
          if (name && shared.has(name.text) && !own.has(name.text)) {
            const line = source.getLineAndCharacterOfPosition(name.getStart(source)).line + 1;
            found.push(`${file}:${line}: test '${title}' assigns '${name.text}'`);
          }
          ts.forEachChild(child, inBody);
        };
        inBody(body);
        return;
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function testFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(full);
    return entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

test('test isolation: no test assigns a file- or describe-level binding that another test could read', () => {
  const files = SUITES.flatMap((suite) => testFiles(path.join(ROOT, 'test', suite)));
  assert.ok(files.length > 40, `found ${files.length} test files`);
  const found = files.flatMap((file) => sharedAssignments(fs.readFileSync(file, 'utf8'), path.relative(ROOT, file)));
  assert.deepEqual(found, [], 'set these in a hook, or give each test its own binding');
});

test('test isolation: the check flags what a test leaves for the next, and lets hooks and own bindings be', () => {
  const text = [
    "import { before, describe, test } from 'node:test';",
    'let fixture = 0;',
    "let threadId = '';",
    'let counter = 0;',
    '// test-isolation: each test that restarts the server leaves a running one behind',
    'let server = 1;',
    'before(() => { fixture = 1; });',
    "test('first', () => { threadId = 'x'; counter++; server = 2; });",
    "test('second', () => { const threadId = 'own'; let fixture = 2; fixture += 1; return threadId; });",
    "describe('suite', () => {",
    "  let run = '';",
    "  before(() => { run = 'ok'; });",
    "  test.only('inner', async () => { await Promise.resolve(); run ??= 'late'; });",
    "  test('callback', () => [1].forEach((n) => { counter += n; }));",
    '});',
  ].join('\n');
  assert.deepEqual(sharedAssignments(text, 'x.test.ts'), [
    "x.test.ts:8: test 'first' assigns 'threadId'",
    "x.test.ts:8: test 'first' assigns 'counter'",
    "x.test.ts:13: test 'inner' assigns 'run'",
    "x.test.ts:14: test 'callback' assigns 'counter'",
  ]);
});
