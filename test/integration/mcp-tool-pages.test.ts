/**
 * A server's tools listed a page at a time, at start and again when it says they changed; and servers whose listing
 * never ends (a new cursor on every page, or a cursor given twice), which must fail clearly, naming the server, and
 * never hold a worker.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { McpConfigError } from '../../activities/tools/mcp-config';
import { MAX_MCP_TOOL_PAGES } from '../../activities/tools/mcp-servers';
import { writeMcpConfig } from '../../testing/mcp-reference-servers';
import { readTestEnv } from '../../testing/test-env';
import { fakeToolContext } from '../../testing/tool-context';
import { startMcpServers } from '../../worker/mcp';
import { waitFor } from '../chaos/waiting';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'mcp-tool-pages-'));
const PAGED_SERVER = path.join(__dirname, '..', 'fixtures', 'mcp-paged-server.mjs');
/** A listing that spun would hang the test: it fails at this bound instead. */
const BOUND = { timeout: 60_000 };

function config(name: string, mode: string): string {
  const dir = fs.mkdtempSync(path.join(workDir, `${name}-`));
  return writeMcpConfig(path.join(dir, 'mcp.json'), {
    [name]: { command: process.execPath, args: [PAGED_SERVER, mode] },
  });
}

test(
  'mcp tool pages: every page is listed at start, and again when the server says its tools changed',
  BOUND,
  async () => {
    const lines: string[] = [];
    const mcp = await startMcpServers(config('paged', 'paged'), {}, { log: (line) => lines.push(line) });
    try {
      const names = () => [...mcp.tools().keys()].sort();
      assert.deepEqual(names(), ['paged__first', 'paged__grow', 'paged__second', 'paged__turn']);
      await mcp.tools().get('paged__grow')?.tool.run?.({}, fakeToolContext());
      // `third` is on the second page: a refresh that read only the first page would drop it and `second`.
      await waitFor('the refreshed list', 20_000, () => (mcp.tools().has('paged__third') ? true : undefined));
      assert.deepEqual(names(), ['paged__first', 'paged__grow', 'paged__second', 'paged__third', 'paged__turn']);

      // A refresh that never ends is refused, naming the server, and the earlier list is kept.
      await mcp.tools().get('paged__turn')?.tool.run?.({}, fakeToolContext());
      const refused = await waitFor('the refused refresh', 20_000, () =>
        lines.find((line) => line.includes('listing them failed')),
      );
      assert.match(
        refused,
        new RegExp(
          `^baton: MCP server 'paged' changed its tools, and listing them failed: .*ran past ${MAX_MCP_TOOL_PAGES} pages`,
        ),
      );
      assert.deepEqual(names(), ['paged__first', 'paged__grow', 'paged__second', 'paged__third', 'paged__turn']);
    } finally {
      await mcp.close();
    }
  },
);

test(
  'mcp tool pages: a server whose every page names a new cursor is refused at start after a bounded number of pages',
  BOUND,
  async () => {
    const file = config('endless', 'endless');
    await assert.rejects(startMcpServers(file, {}, { log: () => undefined }), (error: unknown) => {
      assert.ok(error instanceof McpConfigError, String(error));
      assert.match(
        error.message,
        new RegExp(
          `^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: MCP server 'endless' .* could not be started: its tool list ` +
            `ran past ${MAX_MCP_TOOL_PAGES} pages`,
        ),
      );
      return true;
    });
  },
);

test(
  'mcp tool pages: a server that names a cursor it gave before is refused at start, naming the server',
  BOUND,
  async () => {
    const mcp = await startMcpServers(config('repeat', 'repeat'), {}, { strict: false, log: () => undefined });
    try {
      const [status] = mcp.status();
      assert.equal(status?.state, 'failed');
      assert.match(
        status?.error ?? '',
        /^MCP server 'repeat' .* could not be started: its tool list gave the cursor "again" twice/,
      );
      assert.equal(mcp.tools().size, 0);
    } finally {
      await mcp.close();
    }
  },
);
