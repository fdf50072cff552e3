/**
 * How to reach Temporal (worker/temporal-settings.ts), read one way for the worker, `baton setup`, the CLI and
 * `connect()`: Temporal's standard variables and `temporal.toml` profiles (through @temporalio/envconfig), Baton's
 * deprecated TLS names with a notice, and one line naming the setting for each thing that cannot be used. Then where
 * `findConnection` goes once profiles exist, and the line a failed connection gets.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { findConnection } from '../../client';
import { writeStackFile } from '../../stack/stack-file';
import { ConfigError, readSetupConfig, readTemporalConnection } from '../../worker/config';
import { describeConnectFailure, readTemporalSettings, TemporalSettingsError } from '../../worker/temporal-settings';

/** A directory with a certificate, a key and a CA (their contents stand in for PEM), and a `temporal.toml`. */
function files(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-temporal-settings-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'client.pem'), 'CERT');
  fs.writeFileSync(path.join(dir, 'client.key'), 'KEY');
  fs.writeFileSync(path.join(dir, 'ca.pem'), 'CA');
  fs.writeFileSync(
    path.join(dir, 'temporal.toml'),
    [
      '[profile.default]',
      'address = "localhost:7233"',
      '',
      '[profile.cloud]',
      'address = "baton.a1b2c.tmprl.cloud:7233"',
      'namespace = "baton.a1b2c"',
      'api_key = "cloud-key"',
      '',
      '[profile.mtls]',
      'address = "temporal.internal:7233"',
      'namespace = "agents"',
      '[profile.mtls.tls]',
      `client_cert_path = "${path.join(dir, 'client.pem')}"`,
      `client_key_path = "${path.join(dir, 'client.key')}"`,
      'server_ca_cert_path = "ca.pem"',
      'server_name = "temporal"',
      '[profile.mtls.grpc_meta]',
      'x-team = "agents"',
      '',
      '[profile.broken]',
      'address = "temporal.internal:7233"',
      '[profile.broken.tls]',
      'client_cert_path = "missing.pem"',
      'client_key_path = "client.key"',
      '',
    ].join('\n'),
  );
  return dir;
}

test('temporal settings: the standard variables, files read relative to the working directory', (t) => {
  const dir = files(t);
  const settings = readTemporalSettings(
    {
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      TEMPORAL_NAMESPACE: 'agents',
      TEMPORAL_TLS_CLIENT_CERT_PATH: 'client.pem',
      TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(dir, 'client.key'),
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: 'ca.pem',
      TEMPORAL_TLS_SERVER_NAME: 'temporal',
      TEMPORAL_API_KEY: '',
    },
    dir,
  );
  assert.deepEqual(settings, {
    address: 'temporal.internal:7233',
    namespace: 'agents',
    tls: {
      serverNameOverride: 'temporal',
      serverRootCACertificate: Buffer.from('CA'),
      clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
    },
    notices: [],
  });
  // Nothing but an address: plaintext. An API key alone: TLS with the system's roots. TEMPORAL_TLS=false: plaintext.
  assert.deepEqual(readTemporalSettings({ TEMPORAL_ADDRESS: 'a:1' }, dir), { address: 'a:1', notices: [] });
  assert.deepEqual(readTemporalSettings({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_API_KEY: 'k' }, dir).tls, {});
  assert.deepEqual(readTemporalSettings({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS: 'true' }, dir).tls, {});
  assert.equal(readTemporalSettings({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS: 'false' }, dir).tls, undefined);
  // The PEM itself in a variable, as a mounted secret often is.
  assert.deepEqual(
    readTemporalSettings(
      { TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CLIENT_CERT_DATA: 'C', TEMPORAL_TLS_CLIENT_KEY_DATA: 'K' },
      dir,
    ).tls,
    { clientCertPair: { crt: Buffer.from('C'), key: Buffer.from('K') } },
  );
});

test("temporal settings: Baton's earlier TLS names still work, each with a notice naming the standard one", (t) => {
  const dir = files(t);
  const legacy = readTemporalSettings(
    {
      TEMPORAL_ADDRESS: 'a:1',
      TEMPORAL_TLS_CERT: 'client.pem',
      TEMPORAL_TLS_KEY: 'client.key',
      TEMPORAL_TLS_CA: 'ca.pem',
    },
    dir,
  );
  assert.deepEqual(legacy.tls, {
    serverRootCACertificate: Buffer.from('CA'),
    clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
  });
  assert.deepEqual(legacy.notices, [
    "TEMPORAL_TLS_CERT is deprecated: name it TEMPORAL_TLS_CLIENT_CERT_PATH, as Temporal's tools do",
    "TEMPORAL_TLS_KEY is deprecated: name it TEMPORAL_TLS_CLIENT_KEY_PATH, as Temporal's tools do",
    "TEMPORAL_TLS_CA is deprecated: name it TEMPORAL_TLS_SERVER_CA_CERT_PATH, as Temporal's tools do",
  ]);
  const both = readTemporalSettings(
    { TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CA: 'missing.pem', TEMPORAL_TLS_SERVER_CA_CERT_PATH: 'ca.pem' },
    dir,
  );
  assert.deepEqual(both.tls, { serverRootCACertificate: Buffer.from('CA') });
  assert.deepEqual(both.notices, [
    'TEMPORAL_TLS_CA is ignored: TEMPORAL_TLS_SERVER_CA_CERT_PATH is set (and is the name to keep)',
  ]);
  // The worker's configuration carries the notices for its start-up lines.
  const config = readTemporalConnection({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CA: 'ca.pem' }, dir);
  assert.equal(config.notices?.length, 1);
});

test('temporal settings: a temporal.toml profile, named or the default, with the variables laid over it', (t) => {
  const dir = files(t);
  const file = path.join(dir, 'temporal.toml');
  const cloud = readTemporalSettings({ TEMPORAL_CONFIG_FILE: 'temporal.toml', TEMPORAL_PROFILE: 'cloud' }, dir);
  assert.deepEqual(cloud, {
    address: 'baton.a1b2c.tmprl.cloud:7233',
    namespace: 'baton.a1b2c',
    tls: {},
    apiKey: 'cloud-key',
    profile: { name: 'cloud', file },
    notices: [],
  });
  const mtls = readTemporalSettings({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_NAMESPACE: 'other' }, dir, {
    profile: 'mtls',
  });
  assert.deepEqual(mtls, {
    address: 'temporal.internal:7233',
    namespace: 'other',
    tls: {
      serverNameOverride: 'temporal',
      serverRootCACertificate: Buffer.from('CA'),
      clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
    },
    metadata: { 'x-team': 'agents' },
    profile: { name: 'mtls', file },
    notices: [],
  });
  // Where the Temporal CLI keeps it: $XDG_CONFIG_HOME/temporalio/temporal.toml, else ~/.config/temporalio/.
  fs.mkdirSync(path.join(dir, 'home', '.config', 'temporalio'), { recursive: true });
  fs.copyFileSync(file, path.join(dir, 'home', '.config', 'temporalio', 'temporal.toml'));
  const home = readTemporalSettings({ HOME: path.join(dir, 'home') }, dir);
  assert.equal(home.address, 'localhost:7233');
  assert.equal(home.profile?.name, 'default');
  assert.deepEqual(readTemporalSettings({ HOME: path.join(dir, 'nobody') }, dir), { notices: [] });
});

test('temporal settings: what cannot be used is named, with the setting, all at once', (t) => {
  const dir = files(t);
  const problems = (env: Record<string, string>, profile?: string): readonly string[] => {
    try {
      readTemporalSettings(env, dir, profile === undefined ? {} : { profile });
    } catch (error) {
      assert.ok(error instanceof TemporalSettingsError, String(error));
      return error.problems;
    }
    return assert.fail('no error');
  };
  assert.deepEqual(problems({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CLIENT_CERT_PATH: 'client.pem' }), [
    'TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH go together: set both for mTLS, or neither',
  ]);
  assert.deepEqual(problems({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CERT: 'client.pem' }), [
    'TEMPORAL_TLS_CERT and TEMPORAL_TLS_CLIENT_KEY_PATH go together: set both for mTLS, or neither',
  ]);
  assert.deepEqual(problems({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_CLIENT_CERT_DATA: 'C' }), [
    'TEMPORAL_TLS_CLIENT_CERT_DATA and TEMPORAL_TLS_CLIENT_KEY_PATH go together: set both for mTLS, or neither',
  ]);
  const [unreadable] = problems({ TEMPORAL_ADDRESS: 'a:1', TEMPORAL_TLS_SERVER_CA_CERT_PATH: 'nope.pem' });
  assert.match(unreadable ?? '', /^TEMPORAL_TLS_SERVER_CA_CERT_PATH cannot be read: ENOENT.*nope\.pem/);
  const file = path.join(dir, 'temporal.toml');
  const [inProfile] = problems({ TEMPORAL_CONFIG_FILE: file }, 'broken');
  assert.match(
    inProfile ?? '',
    new RegExp(`^tls\\.client_cert_path of profile 'broken' in ${file} cannot be read: ENOENT.*missing\\.pem`),
  );
  assert.deepEqual(problems({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'staging' }), [
    `profile 'staging' is not in ${file} (TEMPORAL_PROFILE)`,
  ]);
  assert.deepEqual(problems({ TEMPORAL_CONFIG_FILE: 'elsewhere.toml' }), [
    `TEMPORAL_CONFIG_FILE: no file at ${path.join(dir, 'elsewhere.toml')}`,
  ]);
  fs.writeFileSync(path.join(dir, 'bad.toml'), '[profile.default\naddress = 1\n');
  const [unparsed] = problems({ TEMPORAL_CONFIG_FILE: 'bad.toml' });
  assert.match(unparsed ?? '', new RegExp(`^${path.join(dir, 'bad.toml')}: `));
  // The worker and `baton setup` name every problem at once: here the address and a TLS file.
  assert.throws(
    () => readSetupConfig({ DATABASE_URL: 'postgres://x@h/db', TEMPORAL_TLS_SERVER_CA_CERT_PATH: 'nope.pem' }, dir),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.problems.length === 2 &&
      error.problems.some((p) => p.startsWith('TEMPORAL_TLS_SERVER_CA_CERT_PATH cannot be read')) &&
      error.problems.some((p) => p.startsWith('TEMPORAL_ADDRESS is required')),
  );
  // Without an address anywhere, the profile is the other way to give one.
  assert.throws(
    () => readTemporalConnection({}, dir),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.problems.join('|') ===
        'TEMPORAL_ADDRESS is required (host:port of the Temporal frontend), or a temporal.toml profile with an ' +
          'address (TEMPORAL_PROFILE)',
  );
});

test('find connection: a named profile wins over the running baton dev; the default profile comes after it', (t) => {
  const dir = files(t);
  const env = { TEMPORAL_CONFIG_FILE: path.join(dir, 'temporal.toml') };
  // No stack running: the default profile of the file.
  const fallback = findConnection({ env, cwd: dir });
  assert.equal(fallback.address, 'localhost:7233');
  assert.equal(fallback.source, `profile 'default' of ${env.TEMPORAL_CONFIG_FILE} (localhost:7233)`);
  writeStackFile(path.join(dir, '.baton'), {
    temporalAddress: '127.0.0.1:7999',
    namespace: 'default',
    taskQueue: 'baton',
    databaseUrl: 'postgres://baton:secret@127.0.0.1:5999/baton',
    scriptedModel: true,
    pid: process.pid,
    startedAt: new Date(0).toISOString(),
  });
  assert.equal(findConnection({ env, cwd: dir }).address, '127.0.0.1:7999', 'the running baton dev first');
  const cloud = findConnection({ env, cwd: dir, profile: 'cloud' });
  assert.deepEqual(
    [cloud.address, cloud.namespace, cloud.apiKey, cloud.tls, cloud.source],
    [
      'baton.a1b2c.tmprl.cloud:7233',
      'baton.a1b2c',
      'cloud-key',
      {},
      `profile 'cloud' of ${env.TEMPORAL_CONFIG_FILE} (baton.a1b2c.tmprl.cloud:7233)`,
    ],
  );
  assert.equal(findConnection({ env: { ...env, TEMPORAL_PROFILE: 'mtls' }, cwd: dir }).namespace, 'agents');
  assert.throws(() => findConnection({ env, cwd: dir, profile: 'cloud', needsDatabase: true }), {
    message: "this reads Baton's database: set DATABASE_URL as well as the profile",
  });
});

test('a failed connection names the setting that explains it', () => {
  const attempt = { address: 'temporal.internal:7233' };
  assert.equal(
    describeConnectFailure(attempt, new Error('tcp connect error: Connection refused (os error 111)')),
    'cannot reach Temporal at temporal.internal:7233: tcp connect error: Connection refused (os error 111)',
  );
  assert.match(describeConnectFailure(attempt, new Error('h2 protocol error: frame')), /set TEMPORAL_TLS=true/);
  assert.match(
    describeConnectFailure({ ...attempt, tls: {} }, new Error('invalid peer certificate: UnknownIssuer')),
    /over TLS: .*UnknownIssuer; the server's certificate is not trusted: name its CA in TEMPORAL_TLS_SERVER_CA_CERT_PATH$/,
  );
  assert.match(
    describeConnectFailure(
      { ...attempt, tls: { serverRootCACertificate: Buffer.from('CA') } },
      new Error('received fatal alert: CertificateRequired'),
    ),
    /set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
  );
});
