import type { Readable, Writable } from 'node:stream';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

/**
 * Serves `server` on stdin and stdout (one JSON-RPC message a line) until the client closes stdin or `stop`
 * settles; resolves once the transport has closed. Nothing else may write to `output`.
 */
export async function serveStdio(
  server: Server,
  options: { input?: Readable; output?: Writable; stop?: Promise<unknown> } = {},
): Promise<void> {
  const input = options.input ?? process.stdin;
  const transport = new StdioServerTransport(input, options.output ?? process.stdout);
  const closed = new Promise<void>((resolve) => (server.onclose = resolve));
  // The transport does not watch for the end of its input: a client that went away closes stdin, nothing more.
  const end = () => void server.close();
  input.once('end', end);
  input.once('close', end);
  void options.stop?.then(end, end);
  try {
    await server.connect(transport);
    await closed;
  } finally {
    input.off('end', end);
    input.off('close', end);
  }
}
