/**
 * How to reach Temporal, read one way for `baton worker`, `baton setup`, every CLI command and `connect()` with no
 * options: Temporal's own environment variables and `temporal.toml` profiles, through `@temporalio/envconfig`, as the
 * Temporal CLI and SDKs read them (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS_*`,
 * `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`). Baton's earlier TLS names (`TEMPORAL_TLS_CERT`, `TEMPORAL_TLS_KEY`,
 * `TEMPORAL_TLS_CA`) keep working with a notice naming their standard replacements.
 *
 * The files a setting names are read here, so a missing or unreadable one stops start-up with a line naming the
 * setting, never as a handshake failure later.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  loadClientConfig,
  loadClientConfigProfile,
  type ClientConfigProfile,
  type ConfigDataSource,
} from '@temporalio/envconfig';

/** Baton's earlier TLS variables and the standard names that replace them. */
export const DEPRECATED_TLS_VARIABLES = {
  TEMPORAL_TLS_CERT: 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  TEMPORAL_TLS_KEY: 'TEMPORAL_TLS_CLIENT_KEY_PATH',
  TEMPORAL_TLS_CA: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
} as const;

/** Each TLS file setting: its `_PATH` variable, its `_DATA` variable, and the profile key they share a stem with. */
type TlsField = readonly [string, string, string];
const TLS_FIELDS = {
  clientCert: ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_CERT_DATA', 'client_cert'],
  clientKey: ['TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_CLIENT_KEY_DATA', 'client_key'],
  serverCACert: ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_SERVER_CA_CERT_DATA', 'server_ca_cert'],
} as const satisfies Record<string, TlsField>;

/** TLS settings for the Temporal connection, files already read. */
export interface TemporalTlsConfig {
  readonly serverNameOverride?: string;
  readonly serverRootCACertificate?: Buffer;
  readonly clientCertPair?: { readonly crt: Buffer; readonly key: Buffer };
}

/** What the environment and the profile say about reaching Temporal. */
export interface TemporalSettings {
  /** `host:port`, unchecked; `undefined` when neither the environment nor a profile names one. */
  readonly address?: string;
  readonly namespace?: string;
  /** TLS, or `undefined` for plaintext. */
  readonly tls?: TemporalTlsConfig;
  readonly apiKey?: string;
  /** gRPC headers of the profile or `TEMPORAL_GRPC_META_*`. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The profile these came from, when a configuration file held one. */
  readonly profile?: { readonly name: string; readonly file: string };
  /** Lines for a person: deprecated variables in use. */
  readonly notices: readonly string[];
}

export interface ReadTemporalSettingsOptions {
  /** The `temporal.toml` profile to read; `TEMPORAL_PROFILE` when not given, else `default` if the file has one. */
  readonly profile?: string;
}

/** A setting that cannot be used, with what is wrong. */
export class TemporalSettingsError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('; '));
    this.name = 'TemporalSettingsError';
  }
}

/**
 * Reads how to reach Temporal from `env` (paths relative to `cwd`) and the `temporal.toml` it points to.
 * @throws TemporalSettingsError naming each setting that cannot be used (a file that cannot be read, a certificate
 * without its key, a profile that is not there, a configuration file that does not parse).
 */
export function readTemporalSettings(
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  options: ReadTemporalSettingsOptions = {},
): TemporalSettings {
  const problems: string[] = [];
  const notices: string[] = [];
  // `''` counts as unset, as docker-compose.yml passes an unset `${VAR:-}`.
  const given: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith('TEMPORAL_') && value !== undefined && value.trim() !== '') given[name] = value.trim();
    else if (value !== undefined && ['HOME', 'XDG_CONFIG_HOME', 'APPDATA'].includes(name)) given[name] = value;
  }
  /** Which variable set each standard TLS path, for error messages. */
  const setBy: Record<string, string> = {};
  for (const [old, standard] of Object.entries(DEPRECATED_TLS_VARIABLES)) {
    if (given[old] === undefined) continue;
    if (given[standard] === undefined) {
      given[standard] = given[old];
      setBy[standard] = old;
      notices.push(`${old} is deprecated: name it ${standard}, as Temporal's tools do`);
    } else {
      notices.push(`${old} is ignored: ${standard} is set (and is the name to keep)`);
    }
    delete given[old];
  }
  const file = configFilePath(given, cwd);
  if (given.TEMPORAL_CONFIG_FILE !== undefined) {
    given.TEMPORAL_CONFIG_FILE = file ?? given.TEMPORAL_CONFIG_FILE;
    if (file !== undefined && !fs.existsSync(file)) problems.push(`TEMPORAL_CONFIG_FILE: no file at ${file}`);
  }
  const profileName = options.profile ?? given.TEMPORAL_PROFILE;
  let profile: ClientConfigProfile = {};
  if (problems.length === 0) {
    try {
      profile = loadClientConfigProfile({
        ...(profileName === undefined ? {} : { profile: profileName }),
        overrideEnvVars: given,
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      problems.push(
        /^Profile '.*' not found/.test(message)
          ? `profile '${profileName ?? 'default'}' is not in ${file ?? 'the Temporal configuration file'}` +
              `${options.profile === undefined ? ' (TEMPORAL_PROFILE)' : ''}`
          : `${file ?? 'the Temporal configuration file'}: ${message}`,
      );
    }
  }
  const profileFile =
    problems.length === 0 && file !== undefined && fileHoldsProfile(file, given, profileName ?? 'default')
      ? { name: profileName ?? 'default', file }
      : undefined;
  /** The setting a TLS field came from: its variable (or the deprecated one), else the profile's key. */
  const settingOf = (variable: string, key: string): string => {
    if (setBy[variable] !== undefined) return setBy[variable];
    if (given[variable] !== undefined || profileFile === undefined) return variable;
    return `tls.${key} of profile '${profileFile.name}' in ${profileFile.file}`;
  };
  const read = (source: ConfigDataSource | undefined, setting: string): Buffer | undefined => {
    if (source === undefined) return undefined;
    if ('data' in source) return Buffer.from(source.data);
    try {
      return fs.readFileSync(path.resolve(cwd, source.path));
    } catch (error) {
      problems.push(`${setting} cannot be read: ${(error as Error).message}`);
      return undefined;
    }
  };
  const tlsSettings = profile.tls;
  let tls: TemporalTlsConfig | undefined;
  if (tlsSettings?.disabled !== true && (tlsSettings !== undefined || profile.apiKey !== undefined)) {
    /** The variable (or profile key) of a TLS field: the `_PATH` or the `_DATA` one, by what it holds. */
    const settingFor = (source: ConfigDataSource | undefined, [pathVariable, dataVariable, key]: TlsField): string =>
      source !== undefined && 'data' in source
        ? settingOf(dataVariable, `${key}_data`)
        : settingOf(pathVariable, `${key}_path`);
    const certSetting = settingFor(tlsSettings?.clientCert, TLS_FIELDS.clientCert);
    const keySetting = settingFor(tlsSettings?.clientKey, TLS_FIELDS.clientKey);
    if ((tlsSettings?.clientCert === undefined) !== (tlsSettings?.clientKey === undefined)) {
      problems.push(`${certSetting} and ${keySetting} go together: set both for mTLS, or neither`);
    }
    const crt = read(tlsSettings?.clientCert, certSetting);
    const key = read(tlsSettings?.clientKey, keySetting);
    const ca = read(tlsSettings?.serverCACert, settingFor(tlsSettings?.serverCACert, TLS_FIELDS.serverCACert));
    tls = Object.freeze({
      ...(tlsSettings?.serverName ? { serverNameOverride: tlsSettings.serverName } : {}),
      ...(ca ? { serverRootCACertificate: ca } : {}),
      ...(crt && key ? { clientCertPair: Object.freeze({ crt, key }) } : {}),
    });
  }
  if (problems.length > 0) throw new TemporalSettingsError(problems);
  const metadata = profile.grpcMeta && Object.keys(profile.grpcMeta).length > 0 ? profile.grpcMeta : undefined;
  return Object.freeze({
    ...(profile.address ? { address: profile.address } : {}),
    ...(profile.namespace ? { namespace: profile.namespace } : {}),
    ...(tls ? { tls } : {}),
    ...(profile.apiKey ? { apiKey: profile.apiKey } : {}),
    ...(metadata ? { metadata: Object.freeze({ ...metadata }) } : {}),
    ...(profileFile ? { profile: profileFile } : {}),
    notices,
  });
}

/**
 * Whether the settings name a profile explicitly (`options.profile` or `TEMPORAL_PROFILE`), which then wins over a
 * running `baton dev` as `TEMPORAL_ADDRESS` does.
 */
export function profileNamed(
  env: Readonly<Record<string, string | undefined>>,
  options: ReadTemporalSettingsOptions = {},
): string | undefined {
  return options.profile ?? (env.TEMPORAL_PROFILE?.trim() || undefined);
}

/** Whether the configuration file at `file` exists and defines the profile `name`. */
function fileHoldsProfile(file: string, env: Record<string, string>, name: string): boolean {
  if (!fs.existsSync(file)) return false;
  return loadClientConfig({ configSource: { path: file }, overrideEnvVars: env }).profiles[name] !== undefined;
}

/** `TEMPORAL_CONFIG_FILE` (resolved against `cwd`), else the user's `temporal.toml` where the Temporal CLI keeps it. */
function configFilePath(env: Readonly<Record<string, string>>, cwd: string): string | undefined {
  if (env.TEMPORAL_CONFIG_FILE !== undefined) return path.resolve(cwd, env.TEMPORAL_CONFIG_FILE);
  if (os.platform() === 'win32') return env.APPDATA ? path.join(env.APPDATA, 'temporalio', 'temporal.toml') : undefined;
  if (os.platform() === 'darwin') {
    return env.HOME ? path.join(env.HOME, 'Library', 'Application Support', 'temporalio', 'temporal.toml') : undefined;
  }
  // As @temporalio/envconfig finds it: a relative XDG_CONFIG_HOME means no file at all.
  if (env.XDG_CONFIG_HOME) {
    return path.isAbsolute(env.XDG_CONFIG_HOME)
      ? path.join(env.XDG_CONFIG_HOME, 'temporalio', 'temporal.toml')
      : undefined;
  }
  return env.HOME ? path.join(env.HOME, '.config', 'temporalio', 'temporal.toml') : undefined;
}

/** What a connection attempt used, as far as explaining its failure goes. */
export interface AttemptedTemporalConnection {
  readonly address: string;
  /** `TemporalTlsConfig`, or the client's `TLSConfig` (the same fields, with `Uint8Array` for files). */
  readonly tls?: boolean | { readonly serverRootCACertificate?: unknown; readonly clientCertPair?: unknown };
  readonly apiKey?: string;
}

/**
 * One line saying that Temporal at `attempt.address` could not be reached and, where the settings explain it, which
 * setting to look at: a server that wants a client certificate, a certificate its CA does not trust, TLS to a
 * plaintext server or plaintext to a TLS one.
 */
export function describeConnectFailure(attempt: AttemptedTemporalConnection, error: unknown): string {
  const cause = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
  const tls = attempt.tls !== undefined && attempt.tls !== false;
  const tlsConfig = typeof attempt.tls === 'object' ? attempt.tls : undefined;
  let hint = '';
  if (/refused|unreachable|timed? ?out|dns|resolve|not known|no such host/i.test(cause)) {
    hint = ''; // nobody answered there: the address, not the security settings
  } else if (!tls) {
    hint =
      '; if the server takes TLS, set TEMPORAL_TLS=true (or its CA in TEMPORAL_TLS_SERVER_CA_CERT_PATH, and a client ' +
      'certificate for mTLS in TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)';
  } else if (
    /certificate|unknown ca|UnknownIssuer|self.signed|verify/i.test(cause) &&
    !tlsConfig?.serverRootCACertificate
  ) {
    hint = "; the server's certificate is not trusted: name its CA in TEMPORAL_TLS_SERVER_CA_CERT_PATH";
  } else if (!tlsConfig?.clientCertPair && attempt.apiKey === undefined) {
    hint =
      '; if the server requires a client certificate (mTLS), set TEMPORAL_TLS_CLIENT_CERT_PATH and ' +
      'TEMPORAL_TLS_CLIENT_KEY_PATH (or tls.client_cert_path and client_key_path in the profile)';
  }
  return `cannot reach Temporal at ${attempt.address}${tls ? ' over TLS' : ''}: ${cause}${hint}`;
}
