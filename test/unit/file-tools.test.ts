import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { z } from 'zod';
import { createFileTools, MAX_LIST_ENTRIES } from '../../activities/tools/files';
import { createToolRegistry } from '../../activities/tools';
import { fakeToolContext } from '../../testing/tool-context';
import { ToolError, type ToolContext, type ToolDefinition } from '../../activities/tools/types';

const fakeContext = fakeToolContext;

interface Fixture {
  /** Holds `root` and `outside`; never shown to the model. */
  base: string;
  root: string;
  outside: string;
  readFile: ToolDefinition;
  listFiles: ToolDefinition;
}

/**
 * root/                      outside/
 *   a/x.txt                    secret.txt
 *   a/deep/y.txt               dir/inner.txt
 *   b.txt
 *   c.md
 */
function fixture(t: TestContext): Fixture {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-files-')));
  t.after(() => fs.rmSync(base, { recursive: true, force: true }));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(path.join(root, 'a', 'deep'), { recursive: true });
  fs.mkdirSync(path.join(outside, 'dir'), { recursive: true });
  fs.writeFileSync(path.join(root, 'a', 'x.txt'), 'x\n');
  fs.writeFileSync(path.join(root, 'a', 'deep', 'y.txt'), 'y\n');
  fs.writeFileSync(path.join(root, 'b.txt'), 'hello\nwörld\n');
  fs.writeFileSync(path.join(root, 'c.md'), '# c\n');
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
  fs.writeFileSync(path.join(outside, 'dir', 'inner.txt'), 'inner\n');
  return { base, root, outside, ...tools(root) };
}

function tools(root: string, hidden?: string[]): { readFile: ToolDefinition; listFiles: ToolDefinition } {
  const all = createFileTools({ root, ...(hidden === undefined ? {} : { hidden }) });
  const readFile = all.find((tool) => tool.name === 'read_file');
  const listFiles = all.find((tool) => tool.name === 'list_files');
  assert.ok(readFile && listFiles);
  return { readFile, listFiles };
}

async function run(tool: ToolDefinition, args: unknown, context: ToolContext = fakeContext()): Promise<unknown> {
  assert.ok(tool.run !== undefined, `${tool.name} runs in the activity`);
  return tool.run(tool.parameters.parse(args), context);
}

/** Asserts a ToolError matching `message` that mentions none of `hidden` (real paths the model never passed). */
async function assertToolError(promise: Promise<unknown>, message: RegExp, hidden: string[] = []): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    assert.match(error.message, message);
    for (const secret of hidden) assert.ok(!error.message.includes(secret), `'${error.message}' reveals ${secret}`);
    return true;
  });
}

const OUTSIDE = /outside the allowed directory/;

test('file tools: read_file returns the UTF-8 text of a file', async (t) => {
  const fx = fixture(t);
  assert.equal(await run(fx.readFile, { path: 'b.txt' }), 'hello\nwörld\n');
  assert.equal(await run(fx.readFile, { path: 'a/deep/y.txt' }), 'y\n');
  assert.equal(await run(fx.readFile, { path: './a/../c.md' }), '# c\n');
});

test('file tools: read_file truncates at a character boundary and says so with the full size', async (t) => {
  const fx = fixture(t);
  // 'ab€cd': € is 3 bytes (e2 82 ac), so the file is 7 bytes and a 4-byte cut would split it.
  fs.writeFileSync(path.join(fx.root, 'euro.txt'), 'ab€cd');
  const cut = await run(fx.readFile, { path: 'euro.txt', max_bytes: 4 });
  assert.equal(typeof cut, 'string');
  const [text, note, ...rest] = String(cut).split('\n');
  assert.equal(text, 'ab');
  assert.match(note ?? '', /truncated.*first 2 of 7 bytes/);
  assert.deepEqual(rest, []);
  assert.ok(!String(cut).includes('\uFFFD'));

  const whole = await run(fx.readFile, { path: 'euro.txt', max_bytes: 5 });
  assert.match(String(whole), /^ab€\n\[truncated.*first 5 of 7 bytes/);
  assert.equal(await run(fx.readFile, { path: 'euro.txt', max_bytes: 7 }), 'ab€cd');

  fs.writeFileSync(path.join(fx.root, 'emoji.txt'), '😀😀'); // two 4-byte characters
  assert.match(String(await run(fx.readFile, { path: 'emoji.txt', max_bytes: 7 })), /^😀\n\[truncated.*first 4 of 8/);
  assert.match(String(await run(fx.readFile, { path: 'emoji.txt', max_bytes: 3 })), /^\n?\[truncated.*first 0 of 8/);
});

test('file tools: read_file reads 65536 bytes by default', async (t) => {
  const fx = fixture(t);
  fs.writeFileSync(path.join(fx.root, 'big.txt'), 'z'.repeat(70_000));
  const result = String(await run(fx.readFile, { path: 'big.txt' }));
  assert.ok(result.startsWith(`${'z'.repeat(65_536)}\n[truncated`));
  assert.match(result, /first 65536 of 70000 bytes/);
});

test('file tools: read_file refuses a binary file', async (t) => {
  const fx = fixture(t);
  const bytes = Buffer.from('PNG-ish header then a NUL');
  bytes[10] = 0;
  fs.writeFileSync(path.join(fx.root, 'image.bin'), bytes);
  await assertToolError(run(fx.readFile, { path: 'image.bin' }), /'image\.bin' is a binary file/);
  // Even when max_bytes stops before the NUL, the first 8 KiB decide.
  await assertToolError(run(fx.readFile, { path: 'image.bin', max_bytes: 2 }), /binary/);
});

test('file tools: list_files lists one directory sorted, directories ending in /', async (t) => {
  const fx = fixture(t);
  assert.equal(await run(fx.listFiles, {}), 'a/\nb.txt\nc.md');
  assert.equal(await run(fx.listFiles, { path: 'a' }), 'a/deep/\na/x.txt');
  assert.equal(await run(fx.listFiles, { path: 'a/deep/' }), 'a/deep/y.txt');
});

test('file tools: list_files recursive lists the whole tree depth-first', async (t) => {
  const fx = fixture(t);
  assert.equal(
    await run(fx.listFiles, { recursive: true }),
    ['a/', 'a/deep/', 'a/deep/y.txt', 'a/x.txt', 'b.txt', 'c.md'].join('\n'),
  );
});

test('file tools: list_files says when a directory is empty', async (t) => {
  const fx = fixture(t);
  fs.mkdirSync(path.join(fx.root, 'empty'));
  assert.equal(await run(fx.listFiles, { path: 'empty' }), '(empty is empty)');
});

test('file tools: list_files shows at most 1000 entries and says how many it left out', async (t) => {
  const fx = fixture(t);
  const many = path.join(fx.root, 'many');
  fs.mkdirSync(path.join(many, 'sub'), { recursive: true });
  for (let i = 0; i < 1003; i += 1) fs.writeFileSync(path.join(many, `f${String(i).padStart(4, '0')}`), '');
  for (let i = 0; i < 4; i += 1) fs.writeFileSync(path.join(many, 'sub', `g${i}`), '');

  const flat = String(await run(fx.listFiles, { path: 'many' })).split('\n');
  assert.equal(flat.length, MAX_LIST_ENTRIES + 1);
  assert.equal(flat[0], 'many/f0000');
  assert.equal(flat[MAX_LIST_ENTRIES - 1], 'many/f0999');
  assert.match(flat[MAX_LIST_ENTRIES] ?? '', /^\[4 more entries left out/); // f1000-f1002 and sub/

  const deep = String(await run(fx.listFiles, { path: 'many', recursive: true })).split('\n');
  assert.match(deep[MAX_LIST_ENTRIES] ?? '', /^\[8 more entries left out/); // sub/ counts its 4 files too
});

test('file tools: ../ traversal is refused without revealing the root', async (t) => {
  const fx = fixture(t);
  const hidden = [fx.base];
  await assertToolError(
    run(fx.readFile, { path: '../outside/secret.txt' }),
    /^Path '\.\.\/outside\/secret\.txt' is outside the allowed directory\.$/,
    hidden,
  );
  await assertToolError(run(fx.readFile, { path: 'a/../../outside/secret.txt' }), OUTSIDE, hidden);
  await assertToolError(run(fx.listFiles, { path: '..' }), OUTSIDE, hidden);
  // Probing outside learns nothing: a missing path outside gets the same answer as an existing one.
  await assertToolError(run(fx.readFile, { path: '../no-such-file' }), OUTSIDE, hidden);
});

test('file tools: an absolute path is accepted inside the root and refused outside it', async (t) => {
  const fx = fixture(t);
  assert.equal(await run(fx.readFile, { path: path.join(fx.root, 'c.md') }), '# c\n');
  const secret = path.join(fx.outside, 'secret.txt');
  await assertToolError(run(fx.readFile, { path: secret }), OUTSIDE);
  await assertToolError(run(fx.readFile, { path: '/etc/passwd' }), OUTSIDE);
  await assertToolError(run(fx.listFiles, { path: '/' }), OUTSIDE);
});

test('file tools: a symlinked file pointing outside is refused without revealing its target', async (t) => {
  const fx = fixture(t);
  fs.symlinkSync(path.join(fx.outside, 'secret.txt'), path.join(fx.root, 'leak.txt'));
  fs.symlinkSync('../../outside/secret.txt', path.join(fx.root, 'a', 'relative-leak.txt'));
  const hidden = [fx.base, 'secret'];
  await assertToolError(run(fx.readFile, { path: 'leak.txt' }), /^Path 'leak\.txt' is outside/, hidden);
  await assertToolError(run(fx.readFile, { path: 'a/relative-leak.txt' }), OUTSIDE, hidden);
  // Listing still shows the link (nothing is skipped silently), as a plain entry.
  assert.equal(
    await run(fx.listFiles, { path: 'a', recursive: true }),
    'a/deep/\na/deep/y.txt\na/relative-leak.txt\na/x.txt',
  );
});

test('file tools: a symlinked directory pointing outside is refused anywhere in the path', async (t) => {
  const fx = fixture(t);
  fs.symlinkSync(fx.outside, path.join(fx.root, 'a', 'ext'), 'dir');
  const hidden = [fx.base];
  await assertToolError(run(fx.readFile, { path: 'a/ext/secret.txt' }), OUTSIDE, hidden);
  await assertToolError(run(fx.readFile, { path: 'a/ext/dir/inner.txt' }), OUTSIDE, hidden);
  await assertToolError(run(fx.listFiles, { path: 'a/ext' }), OUTSIDE, hidden);
  await assertToolError(run(fx.listFiles, { path: 'a/ext/dir' }), OUTSIDE, hidden);
  // A missing file behind the link is "outside" too, not "not found": nothing is learned about the target.
  await assertToolError(run(fx.readFile, { path: 'a/ext/missing.txt' }), OUTSIDE, hidden);
  const listing = String(await run(fx.listFiles, { recursive: true }));
  assert.ok(listing.split('\n').includes('a/ext'), listing);
  assert.ok(!listing.includes('secret') && !listing.includes('inner'), listing);
});

test('file tools: a dangling symlink is "outside" when it points outside and "not found" inside', async (t) => {
  const fx = fixture(t);
  fs.symlinkSync(path.join(fx.outside, 'gone.txt'), path.join(fx.root, 'dangling-out'));
  fs.symlinkSync('gone.txt', path.join(fx.root, 'dangling-in'));
  fs.symlinkSync('../dangling-out', path.join(fx.root, 'a', 'chain')); // an inside hop, then outside
  await assertToolError(run(fx.readFile, { path: 'dangling-out' }), OUTSIDE, [fx.base, 'gone']);
  await assertToolError(run(fx.readFile, { path: 'a/chain' }), OUTSIDE, [fx.base, 'gone']);
  await assertToolError(run(fx.readFile, { path: 'dangling-in' }), /^File not found: dangling-in$/);
});

test('file tools: symlinks that stay inside the root are followed, and the root may be a symlink', async (t) => {
  const fx = fixture(t);
  fs.symlinkSync('b.txt', path.join(fx.root, 'alias.txt'));
  fs.symlinkSync('a', path.join(fx.root, 'alias-dir'), 'dir');
  assert.equal(await run(fx.readFile, { path: 'alias.txt' }), 'hello\nwörld\n');
  assert.equal(await run(fx.readFile, { path: 'alias-dir/x.txt' }), 'x\n');
  assert.equal(await run(fx.listFiles, { path: 'alias-dir' }), 'a/deep/\na/x.txt');
  // Recursion shows a symlinked directory but does not descend into it (no cycles, no duplicates).
  assert.equal(
    await run(fx.listFiles, { recursive: true }),
    ['a/', 'a/deep/', 'a/deep/y.txt', 'a/x.txt', 'alias-dir/', 'alias.txt', 'b.txt', 'c.md'].join('\n'),
  );

  const linkedRoot = path.join(fx.base, 'root-link');
  fs.symlinkSync(fx.root, linkedRoot, 'dir');
  const viaLink = tools(linkedRoot);
  assert.equal(await run(viaLink.readFile, { path: 'c.md' }), '# c\n');
  assert.equal(await run(viaLink.readFile, { path: path.join(linkedRoot, 'c.md') }), '# c\n');
  assert.equal(await run(viaLink.readFile, { path: path.join(fx.root, 'c.md') }), '# c\n');
  assert.equal(await run(viaLink.listFiles, {}), 'a/\nalias-dir/\nalias.txt\nb.txt\nc.md');
  await assertToolError(run(viaLink.readFile, { path: '../outside/secret.txt' }), OUTSIDE, [fx.base]);
});

test('file tools: missing files, wrong kinds and NUL bytes get errors the model can act on', async (t) => {
  const fx = fixture(t);
  await assertToolError(run(fx.readFile, { path: 'nope.txt' }), /^File not found: nope\.txt$/);
  await assertToolError(run(fx.readFile, { path: 'b.txt/inner' }), /^File not found: b\.txt\/inner$/);
  await assertToolError(run(fx.listFiles, { path: 'nope' }), /^File not found: nope$/);
  await assertToolError(run(fx.readFile, { path: 'a' }), /'a' is a directory; use list_files/);
  await assertToolError(run(fx.listFiles, { path: 'b.txt' }), /'b\.txt' is not a directory; use read_file/);
  await assertToolError(run(fx.readFile, { path: 'b.txt\0.png' }), /NUL/);
});

test('file tools: a missing root is reported without naming it', async (t) => {
  const fx = fixture(t);
  const missing = tools(path.join(fx.base, 'not-there'));
  await assertToolError(run(missing.readFile, { path: 'b.txt' }), /not configured or does not exist/, [fx.base]);
  await assertToolError(run(missing.listFiles, {}), /not configured or does not exist/, [fx.base]);
  // Created later, it is picked up: a failed root lookup is not cached.
  fs.mkdirSync(path.join(fx.base, 'not-there'));
  assert.equal(await run(missing.listFiles, {}), '(. is empty)');
});

test('file tools: the strict schemas refuse unknown arguments and out-of-range values', (t) => {
  const fx = fixture(t);
  const refused: [ToolDefinition, unknown][] = [
    [fx.readFile, { path: 'b.txt', root: '/' }],
    [fx.readFile, { path: 'b.txt', scope: { rootThreadId: 'other' } }],
    [fx.readFile, {}],
    [fx.readFile, { path: '' }],
    [fx.readFile, { path: 'b.txt', max_bytes: 0 }],
    [fx.readFile, { path: 'b.txt', max_bytes: 1_048_577 }],
    [fx.readFile, { path: 'b.txt', max_bytes: 1.5 }],
    [fx.listFiles, { path: '.', root: '/' }],
    [fx.listFiles, { recursive: 'yes' }],
  ];
  for (const [tool, args] of refused) {
    assert.equal(tool.parameters.safeParse(args).success, false, `${tool.name} ${JSON.stringify(args)}`);
  }
  assert.deepEqual(fx.readFile.parameters.parse({ path: 'b.txt' }), { path: 'b.txt', max_bytes: 65_536 });
  assert.deepEqual(fx.listFiles.parameters.parse({}), { path: '.', recursive: false });
});

test('file tools: the JSON Schema forbids extra properties and describes every field', (t) => {
  const fx = fixture(t);
  for (const tool of [fx.readFile, fx.listFiles]) {
    assert.ok(tool.description.length > 0);
    const schema = z.toJSONSchema(tool.parameters) as { additionalProperties?: unknown; properties?: object };
    assert.equal(schema.additionalProperties, false, tool.name);
    const properties = Object.entries(schema.properties ?? {}) as [string, { description?: string }][];
    assert.ok(properties.length > 0);
    for (const [name, property] of properties) {
      assert.ok((property.description ?? '').length > 10, `${tool.name}.${name} has a description`);
    }
  }
  // As the model sees it (input side), fields with defaults are optional.
  assert.deepEqual((z.toJSONSchema(fx.readFile.parameters, { io: 'input' }) as { required?: string[] }).required, [
    'path',
  ]);
  assert.equal(
    (z.toJSONSchema(fx.listFiles.parameters, { io: 'input' }) as { required?: string[] }).required,
    undefined,
  );
});

test('file tools: a cancelled activity stops a listing', async (t) => {
  const fx = fixture(t);
  const before = new AbortController();
  before.abort(new Error('cancelled before'));
  await assert.rejects(run(fx.listFiles, {}, fakeContext({ signal: before.signal })), /cancelled before/);
  await assert.rejects(run(fx.readFile, { path: 'b.txt' }, fakeContext({ signal: before.signal })), /cancelled before/);

  // Cancelled while the first subdirectory is read: the next step notices.
  const during = new AbortController();
  let heartbeats = 0;
  const context = fakeContext({
    signal: during.signal,
    heartbeat: () => {
      heartbeats += 1;
      during.abort(new Error('cancelled during'));
    },
  });
  await assert.rejects(run(fx.listFiles, { recursive: true }, context), /cancelled during/);
  assert.equal(heartbeats, 1);
});

test("file tools: the world's working_directory, when set, is the root instead of the configured one", async (t) => {
  const { readFile, outside, root } = fixture(t);
  const inWorld = fakeContext({ world: { name: 'w', variables: { working_directory: outside } } });
  assert.equal(await run(readFile, { path: 'secret.txt' }, inWorld), 'secret\n');
  // The configured root is now outside: reaching back into it is refused like any other escape.
  await assert.rejects(
    run(readFile, { path: path.join(root, 'b.txt') }, inWorld),
    (error: unknown) => error instanceof ToolError && /outside the allowed directory/.test(error.message),
  );
  const blank = fakeContext({ world: { name: 'w', variables: { working_directory: '  ' } } });
  assert.equal(await run(readFile, { path: 'b.txt' }, blank), 'hello\nwörld\n', 'a blank value counts as unset');
});

const HIDDEN = /hidden from the file tools.*cannot be read or listed/;
const PASSWORD = 'pg-password-7f3a';

/**
 * A project as `baton dev` leaves it: its state directory `.baton/` holds the stack file with the database password
 * (and a cluster directory), beside the project's own files; the tools hide `.baton/`.
 */
function project(t: TestContext) {
  const fx = fixture(t);
  const state = path.join(fx.root, '.baton');
  fs.mkdirSync(path.join(state, 'pg'), { recursive: true });
  fs.writeFileSync(
    path.join(state, 'stack.json'),
    JSON.stringify({ databaseUrl: `postgres://baton:${PASSWORD}@x/db` }),
  );
  fs.writeFileSync(path.join(state, 'pg', 'local-postgres.json'), JSON.stringify({ password: PASSWORD }));
  return { ...fx, state, ...tools(fx.root, [state]) };
}

/** The result of `promise` as the model reads it: the text, or `Error: <message>` for a ToolError. */
async function asModelSees(promise: Promise<unknown>): Promise<string> {
  try {
    return String(await promise);
  } catch (error) {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    return `Error: ${error.message}`;
  }
}

test('file tools: the state directory cannot be read or listed, by any path that names it', async (t) => {
  const fx = project(t);
  for (const requested of [
    '.baton/stack.json',
    './a/../.baton/stack.json',
    '.baton/./pg/../stack.json',
    '.baton/pg/local-postgres.json',
  ]) {
    await assertToolError(run(fx.readFile, { path: requested }), HIDDEN, [fx.root]);
  }
  await assertToolError(run(fx.readFile, { path: path.join(fx.root, '.baton', 'stack.json') }), HIDDEN);
  for (const requested of ['.baton', '.baton/', '.baton/pg', 'a/../.baton']) {
    await assertToolError(run(fx.listFiles, { path: requested }), HIDDEN, [fx.root]);
  }
  // What does not exist in it is refused the same way: probing learns nothing of what it holds.
  await assertToolError(run(fx.readFile, { path: '.baton/explorer-token' }), HIDDEN);
  await assertToolError(run(fx.listFiles, { path: '.baton/nothing/here' }), HIDDEN);
  // Another spelling is another (missing) file on a case-sensitive file system; on a case-insensitive one the
  // directory's identity refuses it. Either way its text never comes back.
  for (const requested of ['.BATON/stack.json', '.Baton/pg/local-postgres.json']) {
    const seen = await asModelSees(run(fx.readFile, { path: requested }));
    assert.ok(seen.startsWith('Error: ') && !seen.includes(PASSWORD), seen);
  }
  // The rest of the project reads as before.
  assert.equal(await run(fx.readFile, { path: 'b.txt' }), 'hello\nwörld\n');
});

test('file tools: a symlink into the state directory, to a file or to the directory, is refused', async (t) => {
  const fx = project(t);
  fs.symlinkSync(path.join(fx.state, 'stack.json'), path.join(fx.root, 'peek.json'));
  fs.symlinkSync('.baton', path.join(fx.root, 'state'));
  fs.symlinkSync(path.join('..', '.baton', 'pg'), path.join(fx.root, 'a', 'cluster'));
  fs.symlinkSync(path.join(fx.state, 'not-yet'), path.join(fx.root, 'dangling'));
  await assertToolError(run(fx.readFile, { path: 'peek.json' }), HIDDEN, [fx.state]);
  await assertToolError(run(fx.readFile, { path: 'state/stack.json' }), HIDDEN, [fx.state]);
  await assertToolError(run(fx.readFile, { path: 'a/cluster/local-postgres.json' }), HIDDEN, [fx.state]);
  await assertToolError(run(fx.listFiles, { path: 'state' }), HIDDEN, [fx.state]);
  await assertToolError(run(fx.listFiles, { path: 'a/cluster' }), HIDDEN, [fx.state]);
  await assertToolError(run(fx.readFile, { path: 'dangling' }), HIDDEN, [fx.state]);
  // A listing shows the links as plain entries, never as directories to descend into.
  const listed = String(await run(fx.listFiles, { recursive: true }));
  assert.deepEqual(listed.split('\n'), [
    'a/',
    'a/cluster',
    'a/deep/',
    'a/deep/y.txt',
    'a/x.txt',
    'b.txt',
    'c.md',
    'dangling',
    'peek.json',
    'state',
  ]);
});

test('file tools: a listing of the project, or of a parent of the state directory, leaves the state directory out', async (t) => {
  const fx = project(t);
  assert.equal(await run(fx.listFiles, {}), 'a/\nb.txt\nc.md');
  const whole = String(await run(fx.listFiles, { recursive: true }));
  assert.ok(!whole.includes('.baton') && !whole.includes('stack.json') && !whole.includes('local-postgres'), whole);
  assert.equal(whole, 'a/\na/deep/\na/deep/y.txt\na/x.txt\nb.txt\nc.md');
  // A root above the project: the project is listed, its state directory is not.
  const above = tools(fx.base, [fx.state]);
  const fromAbove = String(await run(above.listFiles, { path: 'root', recursive: true }));
  assert.ok(fromAbove.split('\n').includes('root/b.txt'), fromAbove);
  assert.ok(!fromAbove.includes('.baton'), fromAbove);
  await assertToolError(run(above.readFile, { path: 'root/.baton/stack.json' }), HIDDEN);
});

test('file tools: a world whose working directory is the project, or is inside the state directory', async (t) => {
  const fx = project(t);
  const elsewhere = tools(fx.outside, [fx.state]);
  const inProject = fakeContext({ world: { name: 'w', variables: { working_directory: fx.root } } });
  await assertToolError(run(elsewhere.readFile, { path: '.baton/stack.json' }, inProject), HIDDEN);
  assert.equal(await run(elsewhere.listFiles, {}, inProject), 'a/\nb.txt\nc.md');
  for (const dir of [fx.state, path.join(fx.state, 'pg')]) {
    const inState = fakeContext({ world: { name: 'w', variables: { working_directory: dir } } });
    await assertToolError(run(elsewhere.readFile, { path: 'stack.json' }, inState), /inside a directory hidden/);
    await assertToolError(run(elsewhere.listFiles, {}, inState), /inside a directory hidden/);
  }
});

test('file tools: a state directory made after the tools were, or named through a symlink, is hidden too', async (t) => {
  const fx = fixture(t);
  const later = path.join(fx.root, '.baton');
  const link = path.join(fx.base, 'state-link');
  const { readFile, listFiles } = tools(fx.root, [later]);
  const viaLink = tools(fx.root, [link]);
  assert.equal(await run(listFiles, {}), 'a/\nb.txt\nc.md');
  fs.mkdirSync(later);
  fs.writeFileSync(path.join(later, 'stack.json'), PASSWORD);
  fs.symlinkSync(later, link);
  await assertToolError(run(readFile, { path: '.baton/stack.json' }), HIDDEN);
  await assertToolError(run(viaLink.readFile, { path: '.baton/stack.json' }), HIDDEN);
  assert.equal(await run(viaLink.listFiles, {}), 'a/\nb.txt\nc.md');
});

test('tool registry: the directories the shell sandbox masks are hidden from the file tools as well', async (t) => {
  const fx = project(t);
  const registry = createToolRegistry({
    filesRoot: fx.root,
    arcDataDir: fx.outside,
    describeAgent: () => undefined,
    shellSandbox: { kind: 'bwrap', bwrap: '/usr/bin/bwrap', system: [], hidden: [fx.state] },
  });
  const readFile = registry.get('read_file');
  assert.ok(readFile);
  await assertToolError(run(readFile, { path: '.baton/stack.json' }), HIDDEN);
  const named = createToolRegistry({
    filesRoot: fx.root,
    arcDataDir: fx.outside,
    describeAgent: () => undefined,
    hiddenDirectories: [fx.state],
  }).get('list_files');
  assert.ok(named);
  assert.equal(await run(named, {}), 'a/\nb.txt\nc.md');
});

test('file tools: a directory swapped for a link into the state directory while read_file runs never leaks it', async (t) => {
  const fx = project(t);
  fs.mkdirSync(path.join(fx.root, 'box'));
  fs.writeFileSync(path.join(fx.root, 'box', 'stack.json'), 'an ordinary file\n');
  // What a command of the same reply can do while read_file checks its path and opens it: swap `box` for a link into
  // the state directory and back, as fast as it can (a process of its own, bounded in count and time).
  const swapper = spawn(
    process.execPath,
    [
      '-e',
      `const fs = require('node:fs');
       const [box, aside] = process.argv.slice(1);
       const end = Date.now() + 60000;
       for (let i = 0; i < 5000000 && Date.now() < end; i++) {
         fs.renameSync(box, aside);
         fs.symlinkSync('.baton', box);
         fs.unlinkSync(box);
         fs.renameSync(aside, box);
       }`,
      path.join(fx.root, 'box'),
      path.join(fx.root, 'box-aside'),
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => swapper.once('exit', resolve));
  let ordinary = 0;
  try {
    for (let attempt = 0; attempt < 3000; attempt++) {
      const seen = await asModelSees(run(fx.readFile, { path: 'box/stack.json' }));
      assert.ok(!seen.includes(PASSWORD), `attempt ${attempt} read the stack file: ${seen}`);
      if (seen === 'an ordinary file\n') ordinary += 1;
      else assert.match(seen, /^Error: (Path 'box\/stack\.json' is (in a directory hidden|outside)|File not found)/);
    }
    assert.ok(swapper.exitCode === null, 'the swapping went on through every attempt');
  } finally {
    // Stopped before the fixture's directory is removed, which it would otherwise race.
    swapper.kill('SIGKILL');
    await exited;
  }
  assert.ok(ordinary > 0, 'some attempts found the ordinary file');
});
