/** `baton bundle <file>` writes the workflow bundle a worker can start from (`BATON_WORKFLOW_BUNDLE`). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { readTestEnv } from '../../testing/test-env';
import { baton, describeRun, parseJson } from './cli-process';

test('baton bundle writes the workflow bundle and reports it as JSON', async () => {
  const dir = fs.mkdtempSync(path.join(readTestEnv().stateDir, 'bundle-'));
  const file = path.join(dir, 'nested', 'workflows.js');
  const result = await baton(['bundle', file, '--json'], process.env);
  assert.equal(result.code, 0, describeRun(result));
  assert.deepEqual(parseJson(result), { file, bytes: fs.statSync(file).size });
  const code = fs.readFileSync(file, 'utf8');
  assert.match(code, /threadWorkflow/, 'the bundle holds the thread workflow');
  assert.match(code, /agentTurnWorkflow/, 'and the turn workflow');
  fs.rmSync(dir, { recursive: true, force: true });
});
