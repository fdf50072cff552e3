/**
 * The published MCP reference servers (pinned dev dependencies) as tests start them: configuration entries for
 * `@modelcontextprotocol/server-everything`, `-filesystem` and `-memory` over stdio, and server-everything over
 * Streamable HTTP on a loopback port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const LOOPBACK_ONLY = path.join(__dirname, 'loopback-only.cjs');

/** The entry script of a reference server package. */
export function referenceServerScript(name: 'everything' | 'filesystem' | 'memory'): string {
  return require.resolve(`@modelcontextprotocol/server-${name}/dist/index.js`);
}

/** A stdio entry for an `mcpServers` configuration: the server run by this Node with its arguments. */
export function stdioServerEntry(
  name: 'everything' | 'filesystem' | 'memory',
  args: readonly string[] = name === 'everything' ? ['stdio'] : [],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { command: process.execPath, args: [referenceServerScript(name), ...args], ...extra };
}

/** Writes `{ "mcpServers": servers }` to `file` and returns the file. */
export function writeMcpConfig(file: string, servers: Record<string, Record<string, unknown>>): string {
  fs.writeFileSync(file, `${JSON.stringify({ mcpServers: servers }, null, 2)}\n`);
  return file;
}

export interface HttpReferenceServer {
  /** `http://127.0.0.1:<port>/mcp` */
  readonly url: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/** A free loopback port (taken and released at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** server-everything in its Streamable HTTP mode, on a loopback port, ready once it listens. */
export async function startEverythingOverHttp(port?: number): Promise<HttpReferenceServer> {
  const chosen = port ?? (await freePort());
  const child = spawn(
    process.execPath,
    ['--require', LOOPBACK_ONLY, referenceServerScript('everything'), 'streamableHttp'],
    {
      env: { PATH: process.env.PATH ?? '', PORT: String(chosen) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server-everything did not listen within 20 s: ${output}`)),
      20_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('listening on port')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}: ${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${chosen}/mcp`,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
