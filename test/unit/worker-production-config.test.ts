import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { batonEnvVariables, ConfigError, readSetupConfig, readWorkerConfig } from '../../worker/config';
import { WORKFLOWS_PATH } from '../../worker/workflow-bundle';

const minimal = {
  TEMPORAL_ADDRESS: 'temporal.example:7233',
  DATABASE_URL: 'postgres://baton@db.example:5432/baton',
  OPENAI_API_KEY: 'sk-test',
};

function withFiles<T>(use: (dir: string) => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-tls-'));
  try {
    fs.writeFileSync(path.join(dir, 'client.pem'), 'CERT');
    fs.writeFileSync(path.join(dir, 'client.key'), 'KEY');
    fs.writeFileSync(path.join(dir, 'ca.pem'), 'CA');
    return use(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('worker config: plaintext Temporal unless TLS or an API key is configured', () => {
  assert.deepEqual(readWorkerConfig(minimal).temporal, {
    address: 'temporal.example:7233',
    namespace: 'default',
  });
});

test('worker config: mTLS reads the certificate, key and CA files, relative to the working directory', () => {
  withFiles((dir) => {
    const config = readWorkerConfig(
      {
        ...minimal,
        TEMPORAL_TLS_CERT: 'client.pem',
        TEMPORAL_TLS_KEY: path.join(dir, 'client.key'),
        TEMPORAL_TLS_CA: 'ca.pem',
        TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
      },
      dir,
    );
    assert.deepEqual(config.temporal.tls, {
      serverNameOverride: 'temporal.internal',
      serverRootCACertificate: Buffer.from('CA'),
      clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
    });
    assert.equal(config.temporal.apiKey, undefined);
  });
});

test('worker config: an API key turns TLS on with the system roots (Temporal Cloud)', () => {
  const config = readWorkerConfig({ ...minimal, TEMPORAL_API_KEY: 'key-1' });
  assert.deepEqual(config.temporal, {
    address: 'temporal.example:7233',
    namespace: 'default',
    tls: {},
    apiKey: 'key-1',
  });
});

test('worker config: a certificate without its key, or a file that cannot be read, stops start-up', () => {
  withFiles((dir) => {
    assert.throws(
      () => readWorkerConfig({ ...minimal, TEMPORAL_TLS_CERT: 'client.pem' }, dir),
      (error: unknown) =>
        error instanceof ConfigError && error.problems.some((p) => /TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY/.test(p)),
    );
    assert.throws(
      () => readWorkerConfig({ ...minimal, TEMPORAL_TLS_CA: 'missing.pem' }, dir),
      /TEMPORAL_TLS_CA cannot be read: .*missing\.pem/,
    );
  });
});

test('worker config: pool size, concurrency, cache, identity, metrics and health are read and checked', () => {
  const config = readWorkerConfig({
    ...minimal,
    BATON_DB_POOL_SIZE: '25',
    BATON_MAX_CONCURRENT_ACTIVITIES: '8',
    BATON_MAX_CONCURRENT_WORKFLOW_TASKS: '4',
    BATON_MAX_CACHED_WORKFLOWS: '0',
    BATON_WORKER_IDENTITY: 'worker-a',
    BATON_METRICS_ADDRESS: '0.0.0.0:9464',
    BATON_HEALTH_ADDRESS: '[::1]:8081',
    BATON_LOG_LEVEL: 'info',
  });
  assert.equal(config.dbPoolSize, 25);
  assert.deepEqual(config.worker, {
    maxConcurrentActivityTaskExecutions: 8,
    maxConcurrentWorkflowTaskExecutions: 4,
    maxCachedWorkflows: 0,
    identity: 'worker-a',
    metricsAddress: '0.0.0.0:9464',
    healthAddress: '[::1]:8081',
    shutdownGraceTime: 30_000,
  });
  assert.equal(config.logLevel, 'INFO');
  assert.ok(Object.isFrozen(config.worker) && Object.isFrozen(config.temporal));

  assert.throws(
    () =>
      readWorkerConfig({
        ...minimal,
        BATON_DB_POOL_SIZE: '0',
        BATON_MAX_CONCURRENT_ACTIVITIES: 'many',
        BATON_MAX_CONCURRENT_WORKFLOW_TASKS: '1',
        BATON_METRICS_ADDRESS: '9464',
        BATON_LOG_LEVEL: 'loud',
      }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.problems.length === 5 &&
      error.problems.includes('BATON_DB_POOL_SIZE must be at least 1') &&
      error.problems.includes('BATON_MAX_CONCURRENT_ACTIVITIES must be a number of activities') &&
      error.problems.includes('BATON_MAX_CONCURRENT_WORKFLOW_TASKS must be at least 2') &&
      error.problems.includes('BATON_METRICS_ADDRESS must be host:port, e.g. 0.0.0.0:9464') &&
      error.problems.includes('BATON_LOG_LEVEL must be TRACE, DEBUG, INFO, WARN or ERROR'),
  );
});

test('worker config: empty values (an unset `${VAR:-}` in docker-compose.yml) count as unset', () => {
  const config = readWorkerConfig({
    ...minimal,
    OPENAI_BASE_URL: '',
    BATON_DB_POOL_SIZE: '',
    BATON_METRICS_ADDRESS: ' ',
    TEMPORAL_API_KEY: '',
  });
  assert.equal(config.model.baseURL, undefined);
  assert.equal(config.dbPoolSize, 10);
  assert.equal(config.worker.metricsAddress, undefined);
  assert.equal(config.temporal.tls, undefined);
});

test('worker config: without an API key, a model script runs the scripted model; with one, the key wins', () => {
  const scripted = readWorkerConfig(
    { ...minimal, OPENAI_API_KEY: '', BATON_MODEL_SCRIPT: 'agents/model-script.yaml' },
    '/srv/app',
  );
  assert.equal(scripted.modelScript, '/srv/app/agents/model-script.yaml');
  const real = readWorkerConfig({ ...minimal, BATON_MODEL_SCRIPT: 'agents/model-script.yaml' }, '/srv/app');
  assert.equal(real.modelScript, undefined);
  assert.equal(real.model.apiKey, 'sk-test');
  assert.throws(() => readWorkerConfig({ ...minimal, OPENAI_API_KEY: '' }), /OPENAI_API_KEY is required/);
});

test('setup config: Temporal and Baton database, retention in days (default 7, checked)', () => {
  const config = readSetupConfig({
    TEMPORAL_ADDRESS: 'temporal:7233',
    TEMPORAL_NAMESPACE: 'agents',
    DATABASE_URL: 'postgres://baton@db/baton',
  });
  assert.deepEqual(config, {
    temporal: { address: 'temporal:7233', namespace: 'agents' },
    databaseUrl: 'postgres://baton@db/baton',
    retentionDays: 7,
    logLevel: 'WARN',
  });
  assert.equal(readSetupConfig({ ...minimal, BATON_NAMESPACE_RETENTION_DAYS: '30' }).retentionDays, 30);
  assert.throws(() => readSetupConfig({ ...minimal, BATON_NAMESPACE_RETENTION_DAYS: '0' }), /must be at least 1/);
});

test('config: the documented variables are exactly those the schemas read', () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');
  for (const variable of batonEnvVariables()) {
    assert.ok(readme.includes(`| \`${variable}\``), `README's configuration table lacks ${variable}`);
  }
});

test('worker config: BATON_WORKFLOW_BUNDLE names a bundle of these workflows, relative to the working directory', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-bundle-config-'));
  try {
    // What the check reads of a bundle: its inline source map, naming the workflows entry with its text.
    const bundleOf = (entryText: string) => {
      const map = { version: 3, sources: ['/build/app/workflows/index.ts'], sourcesContent: [entryText], mappings: '' };
      return `var __TEMPORAL__;\n//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
    };
    const entryText = fs.readFileSync(WORKFLOWS_PATH, 'utf8');
    fs.writeFileSync(path.join(dir, 'bundle.js'), bundleOf(entryText));
    fs.writeFileSync(path.join(dir, 'stale.js'), bundleOf(`${entryText}// an older version\n`));
    assert.equal(
      readWorkerConfig({ ...minimal, BATON_WORKFLOW_BUNDLE: 'bundle.js' }, dir).workflowBundle,
      path.join(dir, 'bundle.js'),
    );
    assert.equal(readWorkerConfig(minimal, dir).workflowBundle, undefined, 'unset: the worker bundles itself');
    assert.throws(
      () => readWorkerConfig({ ...minimal, BATON_WORKFLOW_BUNDLE: 'missing.js' }, dir),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.problems.some((p) => /BATON_WORKFLOW_BUNDLE: .*missing\.js is not a file/.test(p)),
    );
    assert.throws(() => readWorkerConfig({ ...minimal, BATON_WORKFLOW_BUNDLE: '.' }, dir), /is not a file/);
    assert.throws(
      () => readWorkerConfig({ ...minimal, BATON_WORKFLOW_BUNDLE: 'stale.js' }, dir),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.problems.some((p) =>
          /BATON_WORKFLOW_BUNDLE: .*stale\.js was built from other sources than this worker's \(changed or missing here: workflows\/index\.ts\)/.test(
            p,
          ),
        ),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
