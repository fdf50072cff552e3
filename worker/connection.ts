import { NativeConnection } from '@temporalio/worker';
import type { TemporalConnectionConfig } from './config';
import { describeConnectFailure } from './temporal-settings';

/** Temporal could not be reached with the settings given; the message names the setting to look at where it can. */
export class TemporalConnectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalConnectError';
  }
}

/**
 * Connects to Temporal as configured: plaintext, TLS (optionally mTLS with a client certificate) or an API key
 * over TLS (Temporal Cloud). The caller closes the connection.
 * @throws TemporalConnectError when the server cannot be reached with these settings
 */
export async function connectTemporal(config: TemporalConnectionConfig): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect({
      address: config.address,
      ...(config.tls ? { tls: config.tls } : {}),
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
      ...(config.metadata ? { metadata: { ...config.metadata } } : {}),
    });
  } catch (error) {
    // No `cause`: the message quotes it, and a CLI that prints an error's root cause then prints this line.
    throw new TemporalConnectError(describeConnectFailure(config, error));
  }
}
