import { NativeConnection } from '@temporalio/worker';
import type { TemporalConnectionConfig } from './config';

/**
 * Connects to Temporal as configured: plaintext, TLS (optionally mTLS with a client certificate) or an API key
 * over TLS (Temporal Cloud). The caller closes the connection.
 */
export function connectTemporal(config: TemporalConnectionConfig): Promise<NativeConnection> {
  return NativeConnection.connect({
    address: config.address,
    ...(config.tls ? { tls: config.tls } : {}),
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
  });
}
