/**
 * Several model endpoints as a user configures them (README "Several model endpoints"): `BATON_PROVIDERS` on
 * `baton dev` and on `baton worker`, a lead on the default endpoint (the scripted model of `--model-script`) and a
 * helper naming `local/tiny-1`, served by a second scripted model; `baton transcript` and `baton tree` say which
 * provider answered; a bad `BATON_PROVIDERS`, or an agent naming a provider that is not configured, stops start-up
 * and a reload names the file and line.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readModelLog } from '../../testing/harness';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import { startWorkerProcess, type WorkerProcess } from '../../testing/worker-process';
import {
  baton,
  childEnv,
  describeRun,
  env,
  freshDir,
  parseJson,
  parseJsonArray,
  stackEnv,
  startDev,
  waitFor,
  type DevProcess,
  batonInProcess,
} from './cli-process';

const RELOAD_TIMEOUT_MS = 15_000;
const LEAD_REPLY = 'The helper counted nine.';
const HELPER_REPLY = 'nine';

const leadFile = '---\nname: lead\ndescription: Leads the count.\ncapabilities: [helper]\n---\nYou lead.\n';
const helperFile = (model: string) =>
  `---\nname: helper\ndescription: Counts cells.\nmodel: ${model}\n---\nYou count.\n`;
/** The default endpoint answers the lead only; the local provider the helper only. */
const DEFAULT_SCRIPT = {
  agents: { lead: [{ call: 'helper', args: { message: 'Count the cells.' } }, { say: LEAD_REPLY }] },
};
const LOCAL_SCRIPT = `agents:\n  helper:\n    - say: "${HELPER_REPLY}"\n`;

describe('providers through the CLI: baton dev and baton worker with BATON_PROVIDERS', () => {
  const agentsDir = freshDir('providers-agents');
  const logDir = freshDir('providers-log');
  const localLog = path.join(logDir, 'local.jsonl');
  const defaultLog = path.join(logDir, 'default.jsonl');
  const script = path.join(agentsDir, 'model-script.yaml');
  let local: ScriptedModelServer;
  let providersEnv: Record<string, string>;

  before(async () => {
    fs.writeFileSync(path.join(agentsDir, 'lead.md'), leadFile);
    fs.writeFileSync(path.join(agentsDir, 'helper.md'), helperFile('local/tiny-1'));
    fs.writeFileSync(script, YAML.stringify(DEFAULT_SCRIPT));
    // Scripted steps follow the assistant messages of each request, so every thread replays the script afresh.
    local = await startScriptedModelServer({ script: parseScript(LOCAL_SCRIPT, 'local'), logFile: localLog });
    providersEnv = {
      BATON_PROVIDERS: JSON.stringify({ local: { base_url: local.baseURL, api_key_env: 'LOCAL_API_KEY' } }),
      LOCAL_API_KEY: 'unused',
    };
  });

  after(async () => {
    await local?.close();
  });

  /** What the local endpoint received for one root thread: agent, model name sent, provider header. */
  const localRequests = (root: string) =>
    readModelLog(localLog)
      .filter((entry) => entry.headers['x-baton-root-thread'] === root)
      .map((entry) => [entry.agent, entry.model, entry.headers['x-baton-provider']]);

  describe('baton dev', () => {
    const stateDir = freshDir('providers-state');
    let dev: DevProcess | undefined;
    const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());

    before(async () => {
      dev = await startDev({
        stateDir,
        args: ['--agents', agentsDir, '--model-script', script, '--task-queue', uniqueTaskQueue('providers')],
        env: stackEnv({ ...providersEnv, BATON_MODEL_LOG: defaultLog }),
      });
    });

    after(async () => {
      await dev?.stop();
    });

    test('baton dev: the helper reaches the local provider, the lead the scripted default; transcript and tree say so', async () => {
      assert.match(
        dev?.output.stderr() ?? '',
        new RegExp(
          `^models: helper → local tiny-1 \\(${local.baseURL.replaceAll('.', '\\.')}\\); lead → default baton-scripted \\(http://127\\.0\\.0\\.1:\\d+/v1\\)$`,
          'm',
        ),
      );
      const root = uniqueThreadId('providers-dev');
      const run = await cli('run', 'lead', 'How many cells?', '--thread', root, '--json');
      assert.equal(run.code, 0, describeRun(run));
      assert.equal(parseJson(run).reply, LEAD_REPLY);

      assert.deepEqual(localRequests(root), [['helper', 'tiny-1', 'local']]);
      const defaultRequests = readModelLog(defaultLog).filter((entry) => entry.headers['x-baton-root-thread'] === root);
      assert.deepEqual(
        defaultRequests.map((entry) => [entry.agent, entry.model, entry.headers['x-baton-provider']]),
        [
          ['lead', 'baton-scripted', 'default'],
          ['lead', 'baton-scripted', 'default'],
        ],
      );

      const helperThread = `${root}/helper-1`;
      const transcript = await cli('transcript', helperThread);
      assert.equal(transcript.code, 0, describeRun(transcript));
      assert.match(
        transcript.stdout,
        new RegExp(`^\\[2\\] assistant \\(helper via local/tiny-1\\): ${HELPER_REPLY}$`, 'm'),
      );
      const rows = parseJsonArray(await cli('transcript', helperThread, '--json'));
      assert.deepEqual(
        rows.map((row) => [row.role, row.provider, row.model]),
        [
          ['user', null, null],
          ['assistant', 'local', 'tiny-1'],
        ],
      );
      const leadText = await cli('transcript', root);
      assert.match(leadText.stdout, /^\[2\] assistant \(lead\): → helper\(/m, 'the default endpoint is not named');

      const tree = await cli('tree', root);
      assert.equal(tree.code, 0, describeRun(tree));
      assert.match(
        tree.stdout,
        new RegExp(`^lead {2}completed {2}2 model calls {2}\\d+ tokens {2}\\(${root}\\)$`, 'm'),
      );
      assert.match(tree.stdout, /^└─ helper {2}completed {2}1 model call {2}\d+ tokens {2}via local {2}\(/m);
      assert.match(tree.stdout, /^total: \d+ tokens \(default \d+, local \d+\)$/m);
      const treeJson = parseJson(await cli('tree', root, '--json'));
      const helperNode = (treeJson.children as { providers: { provider: string; modelCalls: number }[] }[])[0];
      assert.deepEqual(
        helperNode?.providers.map((row) => [row.provider, row.modelCalls]),
        [['local', 1]],
      );
    });

    test('baton dev: a reload with an agent naming a provider that is not configured is refused with file and line', async () => {
      const helper = path.join(agentsDir, 'helper.md');
      fs.writeFileSync(helper, helperFile('lcoal/tiny-1'));
      try {
        await waitFor(
          'the refused reload',
          () =>
            (dev?.output.stderr() ?? '').includes(
              `agents: not reloaded: ${helper}:4: model 'lcoal/tiny-1' names provider 'lcoal', which is not configured (providers: local)`,
            ),
          { timeoutMs: RELOAD_TIMEOUT_MS, describe: () => dev?.output.stderr() ?? '' },
        );
      } finally {
        fs.writeFileSync(helper, helperFile('local/tiny-1'));
      }
    });
  });

  test('baton worker: BATON_PROVIDERS sends the helper to the local provider', async () => {
    const taskQueue = uniqueTaskQueue('providers-worker');
    let worker: WorkerProcess | undefined;
    try {
      worker = await startWorkerProcess({
        name: 'providers worker',
        env: {
          ...providersEnv,
          TEMPORAL_ADDRESS: env.temporalAddress,
          DATABASE_URL: env.databaseUrl,
          BATON_TASK_QUEUE: taskQueue,
          BATON_AGENTS_DIR: agentsDir,
          BATON_MODEL_SCRIPT: script,
          BATON_WORKFLOW_BUNDLE: env.workflowBundlePath,
          OPENAI_API_KEY: '',
        },
      });
      assert.match(
        worker.output(),
        /^baton worker: models: helper → local tiny-1 \(http:\/\/127\.0\.0\.1:\d+\/v1\); lead → default baton-scripted \(/m,
      );
      const root = uniqueThreadId('providers-worker');
      const run = await baton(
        ['run', 'lead', 'How many cells?', '--thread', root, '--json'],
        stackEnv({ BATON_TASK_QUEUE: taskQueue }),
      );
      assert.equal(run.code, 0, describeRun(run));
      assert.equal(parseJson(run).reply, LEAD_REPLY);
      assert.deepEqual(localRequests(root), [['helper', 'tiny-1', 'local']]);
    } finally {
      await worker?.kill();
    }
  });

  test('start-up stops on a bad BATON_PROVIDERS, and on an agent naming a provider that is not configured', async () => {
    const bad = await baton(
      ['--state-dir', freshDir('providers-bad'), 'dev', '--agents', agentsDir, '--model-script', script],
      stackEnv({
        BATON_PROVIDERS: '{"local": {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "NOT_SET_ANYWHERE"}}',
      }),
    );
    assert.equal(bad.code, 1, describeRun(bad));
    assert.match(
      bad.stderr,
      /^baton: invalid configuration:\n {2}- BATON_PROVIDERS provider 'local': its API key variable NOT_SET_ANYWHERE is not set$/m,
    );

    const unknown = await baton(
      ['--state-dir', freshDir('providers-unknown'), 'dev', '--agents', agentsDir, '--model-script', script],
      stackEnv({
        BATON_PROVIDERS: '{"hosted": {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "HOSTED_KEY"}}',
        HOSTED_KEY: 'unused',
      }),
    );
    assert.equal(unknown.code, 1, describeRun(unknown));
    assert.match(
      unknown.stderr,
      new RegExp(
        `^baton: ${path.join(agentsDir, 'helper.md').replaceAll('.', '\\.')}:4: model 'local/tiny-1' names provider 'local', which is not configured \\(providers: hosted\\)`,
        'm',
      ),
    );
  });
});
