/**
 * Reaching a Temporal that requires mTLS: temporal-server (the production topology's, built from Go) with TLS on its
 * frontend and a client CA (deploy/temporal/production.yaml's `FRONTEND_TLS_*`), its certificates made here with
 * openssl. `baton setup`, `baton worker`, `baton run` and `connect()` reach it with Temporal's standard variables
 * (`TEMPORAL_TLS_CLIENT_CERT_PATH`, …) and with a `temporal.toml` profile (`TEMPORAL_PROFILE`, `--profile`,
 * `findConnection({ profile })`); without the client certificate each fails with one line naming the settings to set.
 *
 * A campaign file (testing/test-tiers.ts): the first run builds temporal-server from Go. Without Go and without a
 * cached build the tests skip, except under CI=true, where they fail.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { BatonClientError, connect, findConnection } from '../../client';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import type { ProductionTopology } from '../../stack/production';
import { skipUnlessCi } from '../../testing/ci';
import { readTestEnv, uniqueTaskQueue } from '../../testing/test-env';
import { startTestTopology, TOPOLOGY_SETUP_TIMEOUT_MS, type TestTopology } from '../../testing/test-topology';
import { startWorkerProcess, type WorkerProcess } from '../../testing/worker-process';
import { baton, childEnv, describeRun, parseJson, startDev } from '../e2e/cli-process';

const execFileAsync = promisify(execFile);
const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'temporal-mtls-'));
const certs = path.join(workDir, 'certs');
const agentsDir = path.join(workDir, 'agents');
const taskQueue = uniqueTaskQueue('mtls');
const REPLY = 'Hello over mTLS.';
/** The one line a client without a certificate gets, after `baton: ` on the CLI. */
const NO_CLIENT_CERT =
  /cannot reach Temporal at 127\.0\.0\.1:\d+ over TLS: .*; if the server requires a client certificate \(mTLS\), set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/;

let started: TestTopology | undefined;
let skipReason: string | undefined;
let topology: ProductionTopology | undefined;
let model: ScriptedModelServer | undefined;
const workers: WorkerProcess[] = [];

/** A CA, the server's certificate (for `localhost`, allowed as a client too) and a client's, made with openssl. */
async function makeCertificates(): Promise<void> {
  fs.mkdirSync(certs, { recursive: true });
  const openssl = (...args: string[]) => execFileAsync('openssl', args, { cwd: certs });
  await openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=baton-test-ca',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  for (const [name, extensions] of [
    ['server', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth'],
    ['client', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    fs.writeFileSync(path.join(certs, `${name}.ext`), `basicConstraints=CA:FALSE\n${extensions}\n`);
    await openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=baton-test-${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
    );
    await openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    );
  }
}

/** Temporal's standard variables for this server; `withCertificate: false` leaves the client certificate out. */
function standardVariables(withCertificate = true): Record<string, string> {
  assert.ok(topology);
  return {
    TEMPORAL_ADDRESS: topology.temporalAddress,
    TEMPORAL_NAMESPACE: topology.namespace,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(certs, 'ca.pem'),
    TEMPORAL_TLS_SERVER_NAME: 'localhost',
    ...(withCertificate
      ? {
          TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(certs, 'client.pem'),
          TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(certs, 'client.key'),
        }
      : {}),
    DATABASE_URL: topology.databaseUrl,
    BATON_TASK_QUEUE: taskQueue,
  };
}

/** The profile `secure` of a temporal.toml, as `temporal config set` writes one; no TEMPORAL_ADDRESS beside it. */
function profileVariables(): Record<string, string> {
  assert.ok(topology);
  return {
    TEMPORAL_CONFIG_FILE: path.join(workDir, 'temporal.toml'),
    TEMPORAL_ADDRESS: '',
    DATABASE_URL: topology.databaseUrl,
    BATON_TASK_QUEUE: taskQueue,
  };
}

function startWorker(name: string, variables: Record<string, string>): Promise<WorkerProcess> {
  return startWorkerProcess({
    name,
    readyTimeoutMs: 120_000,
    env: {
      ...variables,
      OPENAI_BASE_URL: model?.baseURL ?? '',
      OPENAI_API_KEY: 'scripted',
      BATON_MODEL: 'baton-scripted',
      BATON_AGENTS_DIR: agentsDir,
      BATON_WORKFLOW_BUNDLE: env.workflowBundlePath,
      BATON_HEALTH_ADDRESS: '127.0.0.1:0',
      BATON_LOG_LEVEL: 'WARN',
    },
  }).then((worker) => {
    workers.push(worker);
    return worker;
  });
}

before(
  async () => {
    // The certificates first: the server starts with them.
    await makeCertificates();
    started = await startTestTopology({
      prefix: 'bt',
      label: 'mtls topology',
      stateDir: workDir,
      tls: {
        certFile: path.join(certs, 'server.pem'),
        keyFile: path.join(certs, 'server.key'),
        caFile: path.join(certs, 'ca.pem'),
      },
    });
    ({ topology, skipReason } = started);
    if (topology === undefined) return;
    fs.mkdirSync(agentsDir, { recursive: true });
    fs.writeFileSync(path.join(agentsDir, 'greeter.md'), '---\nname: greeter\ndescription: Greets.\n---\nGreet.\n');
    // The workers' model server answers from this script, and `baton dev` serves the same file itself.
    const script = `agents:\n  greeter:\n${'    - say: "Hello over mTLS."\n'.repeat(6)}`;
    fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), script);
    model = await startScriptedModelServer({ script: parseScript(script, 'mtls') });
    fs.writeFileSync(
      path.join(workDir, 'temporal.toml'),
      [
        '[profile.secure]',
        `address = "${topology.temporalAddress}"`,
        `namespace = "${topology.namespace}"`,
        '[profile.secure.tls]',
        `client_cert_path = "${path.join(certs, 'client.pem')}"`,
        `client_key_path = "${path.join(certs, 'client.key')}"`,
        `server_ca_cert_path = "${path.join(certs, 'ca.pem')}"`,
        'server_name = "localhost"',
        '',
      ].join('\n'),
    );
  },
  { timeout: TOPOLOGY_SETUP_TIMEOUT_MS },
);

after(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await model?.close();
  await started?.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
});

test('mTLS: baton setup reaches the server with the standard variables and with a profile; not without a certificate', async (t) => {
  if (skipReason) return skipUnlessCi(t, skipReason);
  for (const [args, variables] of [
    [['setup', '--json'], standardVariables()],
    [['--profile', 'secure', 'setup', '--json'], profileVariables()],
  ] as const) {
    const result = await baton(args, childEnv(variables));
    assert.equal(result.code, 0, describeRun(result));
    assert.equal(parseJson(result).changed, false, 'the topology had set it up');
  }
  const refused = await baton(['setup'], childEnv(standardVariables(false)));
  assert.equal(refused.code, 1, describeRun(refused));
  assert.match(refused.stderr, new RegExp(`^baton: ${NO_CLIENT_CERT.source}`));
  assert.equal(refused.stderr.trim().split('\n').length, 1, `one line:\n${refused.stderr}`);
});

test('mTLS: a worker and baton run with the standard variables, then with a profile', async (t) => {
  if (skipReason) return skipUnlessCi(t, skipReason);
  const first = await startWorker('worker with the standard variables', standardVariables());
  const run = await baton(['run', 'greeter', 'Hi', '--json'], childEnv(standardVariables()));
  assert.equal(run.code, 0, describeRun(run));
  assert.equal(parseJson(run).reply, REPLY);
  await first.kill();

  await startWorker('worker with a profile', { ...profileVariables(), TEMPORAL_PROFILE: 'secure' });
  const viaProfile = await baton(
    ['--profile', 'secure', 'run', 'greeter', 'Hi again', '--json'],
    childEnv(profileVariables()),
  );
  assert.equal(viaProfile.code, 0, describeRun(viaProfile));
  assert.equal(parseJson(viaProfile).reply, REPLY);

  // The SDK: findConnection reads the profile, connect() takes what it found.
  const client = await connect(findConnection({ env: profileVariables(), profile: 'secure' }));
  try {
    assert.match(client.connectedVia, /^profile 'secure' of .*temporal\.toml \(127\.0\.0\.1:\d+\)$/);
    const answered = await client.run({ agent: 'greeter', message: 'Hi from the SDK' });
    assert.equal(answered.result.reply, REPLY);
  } finally {
    await client.close();
  }
});

test('mTLS: without the client certificate, baton run, baton worker and connect() each fail with one line', async (t) => {
  if (skipReason) return skipUnlessCi(t, skipReason);
  const run = await baton(['run', 'greeter', 'Hi', '--json'], childEnv(standardVariables(false)));
  assert.equal(run.code, 1, describeRun(run));
  assert.match(run.stderr, new RegExp(`^baton: ${NO_CLIENT_CERT.source}`));
  assert.equal(run.stderr.trim().split('\n').length, 1, `one line:\n${run.stderr}`);

  const worker = await baton(
    ['worker'],
    childEnv({ ...standardVariables(false), OPENAI_API_KEY: 'unused', BATON_AGENTS_DIR: agentsDir }),
  );
  assert.equal(worker.code, 1, describeRun(worker));
  assert.match(worker.stderr, NO_CLIENT_CERT);

  const { TEMPORAL_ADDRESS: address = '' } = standardVariables();
  await assert.rejects(
    connect({
      address,
      tls: { serverNameOverride: 'localhost', serverRootCACertificate: fs.readFileSync(path.join(certs, 'ca.pem')) },
    }),
    (error: unknown) => error instanceof BatonClientError && NO_CLIENT_CERT.test(error.message),
  );
});

test('mTLS: baton dev with TEMPORAL_ADDRESS runs its worker against the server with the same settings', async (t) => {
  if (skipReason) return skipUnlessCi(t, skipReason);
  const devQueue = uniqueTaskQueue('mtls-dev');
  const dev = await startDev({
    stateDir: path.join(workDir, 'dev-state'),
    args: ['--agents', agentsDir, '--task-queue', devQueue],
    env: childEnv({ ...standardVariables(), BATON_WORKFLOW_BUNDLE: env.workflowBundlePath }),
  });
  try {
    assert.match(dev.output.stderr(), /^temporal: 127\.0\.0\.1:\d+ \(TEMPORAL_ADDRESS\)$/m);
    const run = await baton(
      ['run', 'greeter', 'Hi', '--json'],
      childEnv({ ...standardVariables(), BATON_TASK_QUEUE: devQueue }),
    );
    assert.equal(run.code, 0, `${describeRun(run)}\nbaton dev:\n${dev.output.stderr()}`);
    assert.equal(parseJson(run).reply, REPLY);
  } finally {
    await dev.stop();
  }
});
