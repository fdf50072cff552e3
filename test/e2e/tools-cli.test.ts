/**
 * A bad tool module stops `baton worker` and `baton dev` at start, before they open anything, with one line naming
 * the file and the reason.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { baton, describeRun, freshDir, stackEnv } from './cli-process';

const dir = freshDir('tools');
const agentsDir = path.join(dir, 'agents');
fs.mkdirSync(agentsDir, { recursive: true });
fs.writeFileSync(path.join(agentsDir, 'a.md'), '---\nname: a\ndescription: An agent.\n---\nYou act.\n');
fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), 'agents:\n  a:\n    - say: "hi"\n');
const typo = path.join(dir, 'typo.mjs');
fs.writeFileSync(
  typo,
  "import { z } from 'zod';\n" +
    "export default [{ name: 'slow', description: 'Slow.', parameters: z.object({}), timeout: 5, run: () => 'ok' }];\n",
);
const clash = path.join(dir, 'clash.mjs');
fs.writeFileSync(
  clash,
  "import { z } from 'zod';\n" +
    "export const tools = [{ name: 'shell', description: 'Mine.', parameters: z.object({}), run: () => 'ok' }];\n",
);

test('baton worker refuses a tool module with a bad field, naming the file, the tool and the field', async () => {
  const result = await baton(
    ['worker'],
    stackEnv({
      BATON_AGENTS_DIR: agentsDir,
      BATON_MODEL_SCRIPT: path.join(agentsDir, 'model-script.yaml'),
      BATON_TOOLS: typo,
      BATON_TASK_QUEUE: 'tools-cli-never-polled',
    }),
  );
  assert.equal(result.code, 1, describeRun(result));
  assert.equal(result.stderr, `baton: ${typo}: tool 'slow': unknown field 'timeout'\n`);
});

test("baton dev refuses a missing module and a tool named like one of Baton's, before starting anything", async () => {
  const missing = path.join(dir, 'missing.ts');
  const absent = await baton(['--state-dir', dir, 'dev', '--agents', agentsDir, '--tools', missing], stackEnv());
  assert.equal(absent.code, 1, describeRun(absent));
  assert.equal(absent.stderr, `baton: ${missing}: tool module not found\n`);

  const named = await baton(['--state-dir', dir, 'dev', '--agents', agentsDir, '--tools', clash], stackEnv());
  assert.equal(named.code, 1, describeRun(named));
  assert.equal(named.stderr, `baton: ${clash}: tool 'shell' has the name of one of Baton's own tools: rename it\n`);
  assert.ok(!fs.existsSync(path.join(dir, 'stack.json')), 'nothing was started');
});
