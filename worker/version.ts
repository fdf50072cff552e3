import fs from 'node:fs';

/** Baton's version, from its own package.json (a package may name itself: its `exports` lists the file). */
function readVersion(): string {
  try {
    const manifest = JSON.parse(fs.readFileSync(require.resolve('baton/package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof manifest.version === 'string' ? manifest.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** What Baton calls itself in protocol handshakes (the MCP server's and the MCP client's). */
export const BATON_VERSION = readVersion();
