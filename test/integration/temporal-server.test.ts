import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Connection } from '@temporalio/client';
import { BatonSearchAttributes, batonSearchAttributeKeys } from '../../common/search-attributes';
import type { TemporalResolution } from '../../testing/temporal-cli';
import { resolveTemporal } from '../../testing/temporal-cli';
import type { TemporalServerHandle } from '../../testing/temporal-server';
import { startTemporal, webUiWorkflowsUrl } from '../../testing/temporal-server';

/** A cold `go install` of the CLI takes 3–5 minutes on two cores; everything else here takes seconds. */
const RESOLVE_TIMEOUT_MS = 15 * 60_000;
const SERVER_TIMEOUT_MS = 60_000;

async function resolveLocalCli(): Promise<TemporalResolution | string> {
  try {
    // TEMPORAL_ADDRESS is left out on purpose: this test is about starting a dev server, not reaching one.
    const resolution = await resolveTemporal({
      env: { ...process.env, TEMPORAL_ADDRESS: undefined },
      allowSdkDownload: false,
      signal: AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
    });
    return resolution.kind === 'cli' ? resolution : `resolved to ${resolution.kind}, not a local CLI`;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

async function customAttributes(connection: Connection): Promise<Record<string, number>> {
  const response = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
  return Object.fromEntries(
    Object.entries(response.customAttributes ?? {}).filter(([name]) => name.startsWith('Baton')),
  );
}

test(
  'temporal server: the dev server starts with the Baton search attributes and the Web UI, and restarts on its database',
  { timeout: RESOLVE_TIMEOUT_MS + SERVER_TIMEOUT_MS },
  async (t) => {
    const resolution = await resolveLocalCli();
    if (typeof resolution === 'string') {
      t.skip(`no Temporal CLI could be resolved or built: ${resolution}`);
      return;
    }
    t.diagnostic(`CLI: ${resolution.kind === 'cli' ? `${resolution.path} (${resolution.source})` : resolution.kind}`);

    const stateDir = await mkdtemp(join(tmpdir(), 'baton-temporal-server-'));
    const dbFilename = join(stateDir, '.baton', 'temporal.db');
    const deadline = AbortSignal.timeout(SERVER_TIMEOUT_MS);
    let server: TemporalServerHandle | undefined;
    try {
      // First run registers only two attributes, as a database from an older Baton would have.
      let started = Date.now();
      server = await startTemporal({
        resolution,
        dbFilename,
        port: 0,
        uiPort: 0,
        searchAttributes: [BatonSearchAttributes.rootThreadId, BatonSearchAttributes.agent],
        stopGracePeriodMs: 10_000,
      });
      t.diagnostic(`first start: ${Date.now() - started} ms at ${server.address}, UI ${server.uiUrl ?? 'none'}`);
      const env = server.env;
      assert.ok(env !== undefined && server.uiUrl !== undefined);
      assert.match(server.address, /^127\.0\.0\.1:\d+$/);
      assert.deepEqual(Object.keys(await customAttributes(env.connection)).sort(), ['BatonAgent', 'BatonRootThreadId']);

      const ui = await fetch(server.uiUrl, { signal: deadline });
      assert.equal(ui.status, 200);
      assert.match(await ui.text(), /<html/i);

      // A workflow with no worker stays running, so it shows whether state survives the restart.
      await env.client.workflow.start('noSuchWorkflow', {
        taskQueue: 'baton-temporal-server-test',
        workflowId: 'baton/t1',
        typedSearchAttributes: [{ key: BatonSearchAttributes.rootThreadId, value: 't1' }],
      });

      started = Date.now();
      await server.stop();
      t.diagnostic(`graceful stop: ${Date.now() - started} ms`);
      server = undefined;
      assert.ok((await readdir(join(stateDir, '.baton'))).includes('temporal.db-wal'), 'SQLite runs in WAL mode');

      // The preferred port is taken, as when another dev server already runs: a free one is used instead.
      const squatter = createServer();
      await new Promise<void>((resolve) => squatter.listen({ host: '127.0.0.1', port: 0 }, resolve));
      const busyPort = (squatter.address() as AddressInfo).port;
      try {
        started = Date.now();
        server = await startTemporal({ resolution, dbFilename, port: busyPort, uiPort: 0, stopGracePeriodMs: 0 });
        t.diagnostic(`restart on the same database: ${Date.now() - started} ms`);
      } finally {
        squatter.close();
      }
      assert.notEqual(server.address, `127.0.0.1:${busyPort}`);
      const again = server.env;
      assert.ok(again !== undefined);
      const attributes = await customAttributes(again.connection);
      assert.deepEqual(
        Object.keys(attributes).sort(),
        batonSearchAttributeKeys.map((k) => k.name).sort(),
        'the attributes missing from the old database are added at start',
      );
      assert.ok(
        Object.values(attributes).every((type) => type === 2),
        'all Keyword (INDEXED_VALUE_TYPE_KEYWORD)',
      );

      const description = await again.client.workflow.getHandle('baton/t1').describe();
      assert.equal(description.status.name, 'RUNNING');
      assert.equal(description.typedSearchAttributes.get(BatonSearchAttributes.rootThreadId), 't1');
      let listed: string[] = [];
      while (listed.length === 0 && !deadline.aborted) {
        listed = [];
        for await (const wf of again.client.workflow.list({ query: 'BatonRootThreadId="t1"' }))
          listed.push(wf.workflowId);
        if (listed.length === 0) await new Promise((r) => setTimeout(r, 200));
      }
      assert.deepEqual(listed, ['baton/t1']);
      assert.ok(server.uiUrl !== undefined);
      const link = await fetch(webUiWorkflowsUrl(server.uiUrl, 'default', 'BatonRootThreadId="t1"'), {
        signal: deadline,
      });
      assert.equal(link.status, 200);

      await again.client.workflow.getHandle('baton/t1').terminate('test over');
    } finally {
      await server?.stop();
      await rm(stateDir, { recursive: true, force: true });
    }
  },
);
