/**
 * Run by `local-postgres.test.ts` as another OS user (`runuser`): starts the embedded server on the data directory
 * given as the only argument, prints where it put the cluster as one JSON line, and stops it.
 */
import fs from 'node:fs/promises';
import { startLocalPostgres } from '../../stack/local-postgres';

async function main(): Promise<void> {
  const [dataDir] = process.argv.slice(2);
  if (dataDir === undefined) throw new Error('usage: local-postgres-child.ts <dataDir>');
  const server = await startLocalPostgres({ dataDir });
  try {
    const owner = (await fs.stat(server.clusterDir)).uid;
    process.stdout.write(
      `${JSON.stringify({ uid: process.getuid?.(), home: server.home, relocated: server.relocated, clusterDir: server.clusterDir, owner })}\n`,
    );
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
