import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { z } from 'zod';
import { SHELL_RUN_MARKER } from '../../activities/tools/shell';
import { WORLD_VARIABLES } from '../../common/world-variables';
import {
  batonEnvVariables,
  ConfigError,
  readSetupConfig,
  readWorkerConfig,
  setupEnvSchema,
  workerEnvSchema,
} from '../../worker/config';
import { environmentVariables } from '../../worker/environment';
import { WORKFLOWS_PATH } from '../../worker/workflow-bundle';

const ROOT = path.join(__dirname, '..', '..');

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
        error instanceof ConfigError &&
        error.problems.some((p) => /TEMPORAL_TLS_CERT and TEMPORAL_TLS_CLIENT_KEY_PATH go together/.test(p)),
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

test('config: DATABASE_URL must be a Postgres URL and TEMPORAL_ADDRESS host:port, for the worker and setup', () => {
  for (const read of [readWorkerConfig, readSetupConfig]) {
    for (const url of [
      'postgres://baton@db.example:5432/baton',
      'postgresql://baton:secret@db/baton?sslmode=require',
    ]) {
      assert.equal(read({ ...minimal, DATABASE_URL: url }).databaseUrl, url);
    }
    for (const [url, scheme] of [
      ['http://db.example:5432/baton', 'http:'],
      ['mysql://baton:secret@db.example/baton', 'mysql:'],
    ] as const) {
      assert.throws(
        () => read({ ...minimal, DATABASE_URL: url }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.problems.length === 1 &&
          error.problems[0] === `DATABASE_URL must be a postgres:// or postgresql:// URL, not ${scheme}` &&
          !error.message.includes('secret'),
      );
    }
    assert.throws(
      () => read({ ...minimal, DATABASE_URL: 'db.example:5432' }),
      /DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL$/m,
    );
    for (const address of ['temporal.example:7233', '10.0.0.7:7233', '[::1]:7233', 'temporal:1']) {
      assert.equal(read({ ...minimal, TEMPORAL_ADDRESS: address }).temporal.address, address);
    }
    for (const address of [
      'temporal.example',
      'http://temporal.example:7233',
      'temporal.example:',
      ':7233',
      'temporal:0',
      'temporal:65536',
      '::1:7233',
    ]) {
      assert.throws(
        () => read({ ...minimal, TEMPORAL_ADDRESS: address }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.problems.length === 1 &&
          error.problems[0] ===
            `TEMPORAL_ADDRESS must be host:port of the Temporal frontend (e.g. temporal.example:7233 or [::1]:7233), not '${address}'`,
        address,
      );
    }
  }
});

/**
 * Every variable the project's code reads from an environment, comment lines left out, with the top directory of each
 * file that reads it: `env.NAME`, `env?.NAME` and `env['NAME']`, and a name quoted whole (`'BATON_TEST_DATABASE_URL'`)
 * in code, which reaches an environment through a constant (`env[TEST_ENV.databaseUrl]`).
 */
function variablesReadBySources(): Map<string, Set<string>> {
  const read = new Map<string, Set<string>>();
  const note = (name: string, file: string) => {
    const top = path.relative(ROOT, file).split(path.sep)[0] ?? '';
    read.set(name, (read.get(name) ?? new Set()).add(top));
  };
  // examples/ are users' projects, with settings of their own.
  const skip = new Set(['node_modules', 'dist', '.git', '.baton', 'examples']);
  const visit = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skip.has(entry.name) && !entry.name.startsWith('.')) visit(path.join(dir, entry.name));
      } else if (/\.(ts|mts|cts|mjs|cjs|js)$/.test(entry.name)) {
        const file = path.join(dir, entry.name);
        for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
          if (/^\s*(\/\/|\/\*|\*)/.test(line)) continue;
          // Not a world variable's name in quotes (`'env.TOOL_TOKEN'`).
          for (const match of line.matchAll(/(?<![\w'"`])env(?:\?\.|\.|\[['"])([A-Z][A-Z0-9_]*)\b/g)) {
            note(match[1] ?? '', file);
          }
          for (const match of line.matchAll(/(?<![\w.])['"]((?:BATON|TEMPORAL|OPENAI)_[A-Z0-9_]+)['"]/g)) {
            note(match[1] ?? '', file);
          }
        }
      }
    }
  };
  visit(ROOT);
  return read;
}

/** Variables of the system, Node and npm (`INIT_CWD`), not Baton's settings: read, documented elsewhere. */
const PLATFORM_VARIABLES = new Set([
  'PATH',
  'HOME',
  'LANG',
  'NODE_TEST_CONTEXT',
  'INIT_CWD',
  // Where the user's temporal.toml is, as the Temporal CLI finds it (worker/temporal-settings.ts).
  'XDG_CONFIG_HOME',
  'APPDATA',
]);
/** Variables tests set for a process they start and read back there: fixtures, nobody's configuration. */
const TEST_FIXTURE_VARIABLES = new Set([
  'FAKE_GO_LOG',
  'LEAKY_LITERAL',
  'LEAKY_TOKEN',
  'DEBIAN_FRONTEND',
  'BATON_TEST_TAG',
]);
/** Quoted names that are no variable of a process's configuration. */
const NOT_CONFIGURATION = new Set([
  SHELL_RUN_MARKER, // what the shell tool marks its commands' processes with, to find them
  ...WORLD_VARIABLES.map((variable) => variable.name), // set with `baton world set`, not in an environment
]);
/** The rooms that only Baton's own tests and benchmarks run. */
const TEST_ROOMS = new Set(['test', 'testing', 'bench']);

test('config: the registry of environment variables holds exactly those the code reads, both ways', () => {
  const registered = new Map(environmentVariables().map((variable) => [variable.name, variable]));
  assert.ok(registered.size > 40, `the registry was read (${registered.size} variables)`);
  const fromSources = variablesReadBySources();
  // What the worker's and setup's schemas hold, worker/config.ts reads (as `value.NAME`, after parsing).
  for (const name of batonEnvVariables()) fromSources.set(name, (fromSources.get(name) ?? new Set()).add('worker'));
  for (const [name, rooms] of fromSources) {
    if (PLATFORM_VARIABLES.has(name) || TEST_FIXTURE_VARIABLES.has(name)) continue;
    if (NOT_CONFIGURATION.has(name) && !registered.has(name)) continue;
    const variable = registered.get(name);
    assert.ok(variable, `${[...rooms].join(', ')} read ${name}, which worker/environment.ts does not register`);
    if ([...rooms].every((room) => TEST_ROOMS.has(room))) {
      assert.ok(variable.testOnly, `only ${[...rooms].join(', ')} read ${name}: register it in TEST_VARIABLES`);
    }
  }
  const schemas = new Set(batonEnvVariables());
  for (const name of registered.keys()) {
    assert.ok(
      schemas.has(name) || fromSources.has(name),
      `worker/environment.ts registers ${name}, which nothing reads`,
    );
  }
  assert.deepEqual(
    [...registered.keys()].filter((name) => PLATFORM_VARIABLES.has(name) || TEST_FIXTURE_VARIABLES.has(name)),
    [],
    'the registry holds no platform variable or test fixture',
  );
});

test("config: the registry says the worker and setup read exactly their schemas' variables, with their defaults", () => {
  const worker = new Set(Object.keys(workerEnvSchema.shape));
  const setup = new Set(Object.keys(setupEnvSchema.shape));
  for (const variable of environmentVariables()) {
    for (const [reader, schema] of [
      ['worker', worker],
      ['setup', setup],
    ] as const) {
      assert.equal(
        variable.readBy.includes(reader),
        schema.has(variable.name),
        `${variable.name}: the registry ${variable.readBy.includes(reader) ? 'says' : 'does not say'} ${reader} ` +
          `reads it, and its schema ${schema.has(variable.name) ? 'holds' : 'lacks'} it`,
      );
    }
  }
  // A default the schema applies is the one the registry names.
  const shapes: Record<string, z.ZodType> = { ...setupEnvSchema.shape, ...workerEnvSchema.shape };
  const registered = new Map(environmentVariables().map((variable) => [variable.name, variable]));
  let checked = 0;
  for (const [name, schema] of Object.entries(shapes)) {
    const parsed = schema.safeParse(undefined);
    if (!parsed.success || (typeof parsed.data !== 'string' && typeof parsed.data !== 'number')) continue;
    checked += 1;
    const value = String(parsed.data);
    assert.ok(
      registered.get(name)?.default.includes(`\`${value}\``),
      `${name} defaults to ${value}, but the registry says: ${registered.get(name)?.default}`,
    );
  }
  // TEMPORAL_NAMESPACE's default is applied after its profile is read (worker/config.ts readTemporalConnection).
  assert.ok(checked >= 14, `defaults were compared (${checked})`);
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
