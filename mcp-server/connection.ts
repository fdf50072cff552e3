import { connect, type BatonClient, type ConnectOptions } from '../client';

/**
 * The Baton client of a long-running MCP server. It connects at the first call, not at start, so an MCP client may
 * start the server before `baton dev` runs (each call until then says how to start one), and it connects again when
 * the place Baton runs changes (a restarted `baton dev` wrote another stack.json).
 */
export class ClientSource {
  private current: { key: string; client: Promise<BatonClient> } | undefined;

  /** `where` says where Baton runs now; it throws, saying why, when it cannot tell (no stack is running). */
  constructor(private readonly where: () => ConnectOptions) {}

  /** @throws what `where` throws, or why the connection failed. */
  async get(): Promise<BatonClient> {
    const options = this.where();
    const key = JSON.stringify(options);
    if (this.current?.key !== key) {
      const previous = this.current;
      const client = connect(options);
      const current = { key, client };
      this.current = current;
      // A failed connection is not kept: the next call tries again.
      client.catch(() => {
        if (this.current === current) this.current = undefined;
      });
      if (previous) void closeClient(previous.client);
    }
    return this.current.client;
  }

  async close(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current) await closeClient(current.client);
  }
}

async function closeClient(client: Promise<BatonClient>): Promise<void> {
  await client.then((connected) => connected.close()).catch(() => undefined);
}
