import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  ConfigError,
  DEFAULT_ARC_DATA_DIR,
  describeDecisionSigning,
  readDecisionKey,
  readModelStream,
  runningStackDecisionKey,
  stackDecisionKey,
  UNSIGNED_DECISIONS_WARNING,
  readStepMode,
  readToolsConfig,
  readWorkerConfig,
} from '../../worker/config';
import { parseLogLevel } from '../../worker/runtime';

const minimal = {
  TEMPORAL_ADDRESS: '127.0.0.1:7233',
  DATABASE_URL: 'postgres://baton@127.0.0.1:5432/baton',
  OPENAI_API_KEY: 'sk-test',
};

test('worker config: defaults fill what is not set', () => {
  assert.deepEqual(readWorkerConfig(minimal, '/srv/app', { hostname: 'box', pid: 42 }), {
    temporalAddress: '127.0.0.1:7233',
    namespace: 'default',
    temporal: { address: '127.0.0.1:7233', namespace: 'default' },
    taskQueue: 'baton',
    databaseUrl: 'postgres://baton@127.0.0.1:5432/baton',
    dbPoolSize: 10,
    model: { baseURL: undefined, apiKey: 'sk-test', model: 'gpt-4o-mini' },
    providers: [],
    modelLimits: {},
    modelPrices: {},
    structuredOutput: [],
    modelStream: false,
    steps: 'activity',
    watchSweepSeconds: 10,
    agentsDir: 'agents',
    worker: {
      maxConcurrentActivityTaskExecutions: 100,
      maxConcurrentWorkflowTaskExecutions: 40,
      maxCachedWorkflows: 1000,
      identity: 'baton-worker 42@box',
      shutdownGraceTime: 30_000,
    },
    logLevel: 'WARN',
    tools: {
      filesRoot: '/srv/app',
      arcDataDir: DEFAULT_ARC_DATA_DIR,
      maxEnvValueBytes: 100 * 1024,
      shellEnv: {},
      sandbox: { mode: 'bwrap' },
      toolModules: [],
    },
  });
});

test('worker config: tool directories and tool modules resolve against the working directory', () => {
  const config = readWorkerConfig(
    { ...minimal, BATON_FILES_ROOT: 'data', BATON_ARC_DIR: '/arc', BATON_TOOLS: 'tools/a.ts, /opt/b.mjs,,' },
    '/srv/app',
  );
  assert.deepEqual(config.tools, {
    filesRoot: '/srv/app/data',
    arcDataDir: '/arc',
    maxEnvValueBytes: 100 * 1024,
    shellEnv: {},
    sandbox: { mode: 'bwrap' },
    toolModules: ['/srv/app/tools/a.ts', '/opt/b.mjs'],
  });
});

test('worker config: the env-data value limit is configurable and checked', () => {
  assert.equal(readWorkerConfig({ ...minimal, BATON_ENV_MAX_VALUE_BYTES: '4096' }).tools.maxEnvValueBytes, 4096);
  assert.throws(
    () => readWorkerConfig({ ...minimal, BATON_ENV_MAX_VALUE_BYTES: 'lots' }),
    /BATON_ENV_MAX_VALUE_BYTES must be a number of bytes/,
  );
});

test('worker config: every variable is read and the result is frozen', () => {
  const config = readWorkerConfig({
    ...minimal,
    TEMPORAL_NAMESPACE: 'prod',
    BATON_TASK_QUEUE: 'agents',
    OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1',
    BATON_MODEL: 'llama3',
    BATON_AGENTS_DIR: '/srv/agents',
  });
  assert.equal(config.namespace, 'prod');
  assert.equal(config.taskQueue, 'agents');
  assert.deepEqual(config.model, { baseURL: 'http://127.0.0.1:11434/v1', apiKey: 'sk-test', model: 'llama3' });
  assert.equal(config.agentsDir, '/srv/agents');
  assert.ok(Object.isFrozen(config) && Object.isFrozen(config.model));
});

test('worker config: every problem is named at once', () => {
  assert.throws(
    () => readWorkerConfig({ DATABASE_URL: 'not a url', OPENAI_BASE_URL: 'nope' }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.problems.length === 3 &&
      error.problems.some((p) => p.startsWith('TEMPORAL_ADDRESS')) &&
      error.problems.some((p) => p.startsWith('DATABASE_URL must be a postgres:// or postgresql:// URL')) &&
      error.problems.some((p) => p.startsWith('OPENAI_BASE_URL must be an http(s) URL')),
  );
});

test('worker config: a production worker needs an API key; an empty one counts as missing', () => {
  assert.throws(() => readWorkerConfig({ ...minimal, OPENAI_API_KEY: '  ' }), /OPENAI_API_KEY is required/);
});

test('log level: unset means WARN, names are case-insensitive, others are refused', () => {
  assert.equal(parseLogLevel(undefined), 'WARN');
  assert.equal(parseLogLevel('debug'), 'DEBUG');
  assert.throws(() => parseLogLevel('loud'), /BATON_LOG_LEVEL must be one of TRACE, DEBUG, INFO, WARN, ERROR/);
});

test('worker config: shell commands get PATH, HOME and LANG from the worker, never its secrets', () => {
  const config = readWorkerConfig({ ...minimal, PATH: '/bin', HOME: '/home/w', LANG: 'C.UTF-8', EXTRA: 'x' });
  assert.deepEqual(config.tools.shellEnv, { PATH: '/bin', HOME: '/home/w', LANG: 'C.UTF-8' });
});

test('worker config: the env-data value limit takes decimal digits only (not 0x10000 or 1e5)', () => {
  for (const raw of ['0x10000', '1e5', '2048.0']) {
    assert.throws(
      () => readWorkerConfig({ ...minimal, BATON_ENV_MAX_VALUE_BYTES: raw }),
      /BATON_ENV_MAX_VALUE_BYTES must be a number of bytes \(decimal digits only\)/,
      raw,
    );
  }
  assert.throws(() => readWorkerConfig({ ...minimal, BATON_ENV_MAX_VALUE_BYTES: '100' }), /at least 1024/);
});

test('worker config: the shutdown grace period is configurable in seconds', () => {
  assert.equal(readWorkerConfig({ ...minimal, BATON_SHUTDOWN_GRACE_S: '5' }).worker.shutdownGraceTime, 5000);
  assert.throws(() => readWorkerConfig({ ...minimal, BATON_SHUTDOWN_GRACE_S: 'soon' }), /BATON_SHUTDOWN_GRACE_S/);
});

test('worker config: the watch sweep runs every BATON_WATCH_SWEEP_SECONDS, from 1 to 3600', () => {
  assert.equal(readWorkerConfig({ ...minimal, BATON_WATCH_SWEEP_SECONDS: '2' }).watchSweepSeconds, 2);
  for (const raw of ['0', '3601', 'often', '1.5']) {
    assert.throws(
      () => readWorkerConfig({ ...minimal, BATON_WATCH_SWEEP_SECONDS: raw }),
      /BATON_WATCH_SWEEP_SECONDS/,
      raw,
    );
  }
});

test('worker config: the shell sandbox is bubblewrap unless BATON_SHELL_SANDBOX=none; BATON_BWRAP names bwrap, BATON_SLIRP4NETNS slirp4netns', () => {
  assert.deepEqual(readWorkerConfig(minimal, '/srv/app').tools.sandbox, { mode: 'bwrap' });
  assert.deepEqual(readWorkerConfig({ ...minimal, BATON_SHELL_SANDBOX: '' }).tools.sandbox, { mode: 'bwrap' });
  assert.deepEqual(readWorkerConfig({ ...minimal, BATON_SHELL_SANDBOX: ' None ' }).tools.sandbox, { mode: 'none' });
  assert.deepEqual(
    readWorkerConfig({ ...minimal, BATON_SHELL_SANDBOX: 'bwrap', BATON_BWRAP: 'bin/bwrap' }, '/srv/app').tools.sandbox,
    { mode: 'bwrap', bwrap: '/srv/app/bin/bwrap' },
  );
  assert.deepEqual(
    readWorkerConfig({ ...minimal, BATON_SLIRP4NETNS: ' /opt/slirp4netns ' }, '/srv/app').tools.sandbox,
    { mode: 'bwrap', slirp4netns: '/opt/slirp4netns' },
  );
  // `baton worker` and `baton dev` (which reads only the tool settings) both refuse another mode, naming it.
  assert.throws(
    () => readWorkerConfig({ ...minimal, BATON_SHELL_SANDBOX: 'off' }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.problems.some((p) => /^BATON_SHELL_SANDBOX must be bwrap .* or none/.test(p)),
  );
  assert.throws(() => readToolsConfig({ BATON_SHELL_SANDBOX: 'docker' }, '/srv/app'), /BATON_SHELL_SANDBOX must be/);
});

test('worker config: BATON_MODEL_STREAM is on or off (unset: off for a worker, on for baton dev), and anything else is refused naming it', () => {
  assert.equal(readWorkerConfig({ ...minimal, BATON_MODEL_STREAM: 'on' }).modelStream, true);
  assert.equal(readWorkerConfig({ ...minimal, BATON_MODEL_STREAM: ' OFF ' }).modelStream, false);
  assert.equal(readModelStream({}), false);
  // `baton dev` and the demo stream unless told not to: a person watches them.
  assert.equal(readModelStream({}, 'on'), true);
  assert.equal(readModelStream({ BATON_MODEL_STREAM: '' }, 'on'), true);
  assert.equal(readModelStream({ BATON_MODEL_STREAM: 'off' }, 'on'), false);
  assert.throws(
    () => readModelStream({ BATON_MODEL_STREAM: 'yes' }),
    /BATON_MODEL_STREAM must be on \(streamed model replies\) or off \(whole replies\)/,
  );
});

test('worker config: BATON_STEPS is local, batched or activity (the default), and anything else is refused naming it', () => {
  assert.equal(readWorkerConfig(minimal).steps, 'activity');
  assert.equal(readWorkerConfig({ ...minimal, BATON_STEPS: ' Local ' }).steps, 'local');
  assert.equal(readStepMode({ BATON_STEPS: 'batched' }), 'batched');
  assert.equal(readStepMode({ BATON_STEPS: 'activity' }), 'activity');
  assert.equal(readStepMode({}), 'activity');
  assert.throws(
    () => readStepMode({ BATON_STEPS: 'fast' }),
    /BATON_STEPS must be local \(steps inside the workflow task\), batched \(several steps per local activity\) or activity \(one task per step\)/,
  );
});

test('worker config: without BATON_DECISION_KEY decisions are not signed, and the worker says so as a warning', () => {
  const config = readWorkerConfig({ ...minimal, BATON_DECISION_KEY: '  ', BATON_DECISION_KEY_FILE: '' });
  assert.equal(config.decisionKey, undefined);
  assert.equal(
    describeDecisionSigning(config.decisionKey),
    'warning: approvals: decisions are not signed (no BATON_DECISION_KEY): anyone who reaches this Temporal namespace can decide them',
  );
  assert.equal(describeDecisionSigning(config.decisionKey), `warning: ${UNSIGNED_DECISIONS_WARNING}`);
});

test('worker config: BATON_DECISION_KEY or BATON_DECISION_KEY_FILE is the decision key, checked like a token', () => {
  const key = 'k'.repeat(40);
  const config = readWorkerConfig({ ...minimal, BATON_DECISION_KEY: ` ${key}\n` });
  assert.deepEqual(config.decisionKey, { key, source: 'BATON_DECISION_KEY' });
  assert.ok(Object.isFrozen(config.decisionKey));
  assert.equal(
    describeDecisionSigning(config.decisionKey),
    'approvals: decisions are signed with the key of BATON_DECISION_KEY; only clients holding it can decide',
  );
  assert.doesNotMatch(describeDecisionSigning(config.decisionKey), new RegExp(key), 'the key itself is never printed');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-decision-key-'));
  try {
    fs.writeFileSync(path.join(dir, 'decision-key'), `${key}\n`, { mode: 0o600 });
    assert.deepEqual(readDecisionKey({ BATON_DECISION_KEY_FILE: 'decision-key' }, dir), {
      key,
      source: path.join(dir, 'decision-key'),
    });
    for (const [env, problem] of [
      [{ BATON_DECISION_KEY: 'short' }, /^BATON_DECISION_KEY is 5 characters long; a token needs at least 32/],
      [{ BATON_DECISION_KEY: `${key} ${key}` }, /^BATON_DECISION_KEY holds characters other than/],
      [{ BATON_DECISION_KEY: key, BATON_DECISION_KEY_FILE: 'decision-key' }, /are both set: set one of them$/],
      [{ BATON_DECISION_KEY_FILE: 'missing' }, /^BATON_DECISION_KEY_FILE: cannot read the token file .*missing/],
    ] as const) {
      assert.throws(
        () => readDecisionKey(env, dir),
        (error: unknown) => error instanceof ConfigError && problem.test(error.problems[0] ?? ''),
        JSON.stringify(env),
      );
      // The worker refuses to start with it.
      assert.throws(() => readWorkerConfig({ ...minimal, ...env }, dir), ConfigError);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("worker config: a local stack's decision key is its state directory's token, made once and read by the CLI", () => {
  const stateDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-stack-key-')), '.baton');
  try {
    assert.equal(runningStackDecisionKey(stateDir), undefined, 'no stack, no key: the CLI makes none');
    const made = stackDecisionKey(stateDir);
    const file = path.join(stateDir, 'token');
    assert.equal(made.source, file);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(stackDecisionKey(stateDir), made, 'kept across restarts');
    assert.deepEqual(runningStackDecisionKey(stateDir), made, 'what the CLI beside the stack signs with');
  } finally {
    fs.rmSync(path.dirname(stateDir), { recursive: true, force: true });
  }
});
