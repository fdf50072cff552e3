import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { z } from 'zod';
import { createArcTool } from '../../activities/tools/arc';
import { fakeToolContext } from '../../testing/tool-context';
import { ToolError, type ToolDefinition } from '../../activities/tools/types';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';

/** The real ARC training set the repository carries (`data/arc/training`), load_arc_task's default. */
const ARC_TRAINING_DIR = DEFAULT_ARC_DATA_DIR;

const context = fakeToolContext();

async function run(tool: ToolDefinition, args: unknown): Promise<unknown> {
  assert.ok(tool.run !== undefined, `${tool.name} runs in the activity`);
  return tool.run(tool.parameters.parse(args), context);
}

async function assertToolError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)}`);
    assert.match(error.message, message);
    return true;
  });
}

function tempDir(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-arc-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const GRID = [
  [0, 1],
  [2, 3],
];

test('arc tool: loads 007bbfb7 with its real grids', async () => {
  const tool = createArcTool({ dataDir: ARC_TRAINING_DIR });
  assert.equal(tool.name, 'load_arc_task');
  assert.equal(tool.handledBy, 'activity');
  const task = (await run(tool, { task_id: '007bbfb7' })) as {
    task_id: string;
    train: { input: number[][]; output: number[][] }[];
    test: { input: number[][]; output?: number[][] }[];
  };
  assert.deepEqual(Object.keys(task).sort(), ['task_id', 'test', 'train']);
  assert.equal(task.task_id, '007bbfb7');
  assert.deepEqual(task.train[0]?.input, [
    [0, 7, 7],
    [7, 7, 7],
    [0, 7, 7],
  ]);
  assert.equal(task.train.length, 5);
  assert.equal(task.train[0]?.output.length, 9);
  assert.deepEqual(task.test[0]?.input, [
    [7, 0, 7],
    [7, 0, 7],
    [7, 7, 0],
  ]);
  assert.deepEqual(Object.keys(task.test[0] ?? {}), ['input'], 'the answer (test output) is withheld');
  // The caller JSON-encodes the result; it round-trips unchanged.
  assert.deepEqual(JSON.parse(JSON.stringify(task)), task);
});

test('arc tool: an unknown task id is refused, saying how many tasks exist', async () => {
  const tool = createArcTool({ dataDir: ARC_TRAINING_DIR });
  await assertToolError(
    run(tool, { task_id: 'ffffffff' }),
    /^Unknown ARC task 'ffffffff'\. The data directory holds 400 tasks\.$/,
  );
});

test('arc tool: a badly formed task id is refused by the schema', () => {
  const { parameters } = createArcTool({ dataDir: ARC_TRAINING_DIR });
  for (const task_id of ['007bbfb', '007bbfb7a', '007BBFB7', '../../x', '007bbfb7.json', 'zzzzzzzz', '']) {
    const result = parameters.safeParse({ task_id });
    assert.equal(result.success, false, task_id);
    assert.match(result.error?.issues[0]?.message ?? '', /8 lowercase hex digits, e\.g\. "007bbfb7"/);
  }
  assert.equal(parameters.safeParse({}).success, false);
  assert.equal(parameters.safeParse({ task_id: '007bbfb7', scope: { rootThreadId: 'x' } }).success, false);
  assert.equal(parameters.safeParse({ task_id: '007bbfb7', dataDir: '/' }).success, false);
});

test('arc tool: the JSON Schema forbids extra properties and describes the id', () => {
  const tool = createArcTool({ dataDir: ARC_TRAINING_DIR });
  const schema = z.toJSONSchema(tool.parameters) as {
    additionalProperties?: unknown;
    required?: string[];
    properties?: { task_id?: { description?: string; pattern?: string } };
  };
  assert.equal(schema.additionalProperties, false);
  assert.deepEqual(schema.required, ['task_id']);
  assert.match(schema.properties?.task_id?.description ?? '', /ARC task id/);
  assert.equal(schema.properties?.task_id?.pattern, '^[0-9a-f]{8}$');
});

test('arc tool: a missing data directory names BATON_ARC_DIR', async (t) => {
  const tool = createArcTool({ dataDir: path.join(tempDir(t), 'nope') });
  await assertToolError(run(tool, { task_id: '007bbfb7' }), /ARC data directory is missing.*BATON_ARC_DIR/);
});

test('arc tool: a malformed task file is refused, naming the task', async (t) => {
  const dir = tempDir(t);
  const tool = createArcTool({ dataDir: dir });
  const files: Record<string, string> = {
    aaaaaaaa: '{ not json',
    bbbbbbbb: JSON.stringify({ train: [{ input: GRID }], test: [{ input: GRID }] }),
    cccccccc: JSON.stringify({ train: [{ input: [[0, 10]], output: GRID }], test: [{ input: GRID }] }),
    dddddddd: JSON.stringify({ train: [{ input: [[0, 1], [2]], output: GRID }], test: [{ input: GRID }] }),
    eeeeeeee: JSON.stringify([]),
  };
  for (const [id, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, `${id}.json`), text);
  for (const id of Object.keys(files)) {
    await assertToolError(run(tool, { task_id: id }), new RegExp(`^ARC task '${id}' has a malformed data file: .+`));
  }
  await assertToolError(run(tool, { task_id: 'bbbbbbbb' }), /train\.0\.output/);
  await assertToolError(run(tool, { task_id: 'dddddddd' }), /same length/);
});

test('arc tool: a task without test outputs loads (hidden evaluation sets)', async (t) => {
  const dir = tempDir(t);
  fs.writeFileSync(
    path.join(dir, '0a1b2c3d.json'),
    JSON.stringify({ train: [{ input: GRID, output: GRID }], test: [{ input: GRID }] }),
  );
  assert.deepEqual(await run(createArcTool({ dataDir: dir }), { task_id: '0a1b2c3d' }), {
    task_id: '0a1b2c3d',
    train: [{ input: GRID, output: GRID }],
    test: [{ input: GRID }],
  });
  await assertToolError(
    run(createArcTool({ dataDir: dir }), { task_id: '00000000' }),
    /^Unknown ARC task '00000000'\. The data directory holds 1 task\.$/,
  );
});
