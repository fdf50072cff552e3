import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { BatonSearchAttributes, batonSearchAttributeKeys } from '../../common/search-attributes';
import type { TemporalResolution } from '../../stack/temporal-cli';
import { resolveTemporal } from '../../stack/temporal-cli';
import type { TemporalServerHandle } from '../../stack/temporal-server';
import { choosePort, startTemporal, TemporalStartError, webUiWorkflowsUrl } from '../../stack/temporal-server';
import { skipUnlessCi } from '../../testing/ci';

/** A cold `go install` of the CLI takes 3–5 minutes on two cores; everything else here takes seconds. */
const RESOLVE_TIMEOUT_MS = 15 * 60_000;
const SERVER_TIMEOUT_MS = 60_000;
const REPO_ROOT = resolve(__dirname, '..', '..');

type CliResolution = Extract<TemporalResolution, { kind: 'cli' }>;

let resolving: Promise<CliResolution | string> | undefined;

/** The local CLI, resolved (or built) once for all tests here; a string says why there is none. */
function resolveLocalCli(): Promise<CliResolution | string> {
  return (resolving ??= (async () => {
    try {
      // TEMPORAL_ADDRESS is left out on purpose: these tests are about starting a dev server, not reaching one.
      const resolution = await resolveTemporal({
        env: { ...process.env, TEMPORAL_ADDRESS: undefined },
        allowSdkDownload: false,
        signal: AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
      });
      return resolution.kind === 'cli' ? resolution : `resolved to ${resolution.kind}, not a local CLI`;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  })());
}

/** Runs `body` with the local CLI, or skips the test when there is none (under CI=true, fails it). */
async function withCli(t: { skip(message: string): void }, body: (cli: CliResolution) => Promise<void>): Promise<void> {
  const resolution = await resolveLocalCli();
  if (typeof resolution === 'string') {
    skipUnlessCi(t, `no Temporal CLI could be resolved or built: ${resolution}`);
    return;
  }
  await body(resolution);
}

async function withTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'baton-temporal-server-'));
  try {
    await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function withClient<T>(address: string, body: (client: Client) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address });
  try {
    return await body(new Client({ connection, namespace: 'default' }));
  } finally {
    await connection.close();
  }
}

async function customAttributes(client: Client): Promise<Record<string, number>> {
  const response = await client.connection.operatorService.listSearchAttributes({ namespace: 'default' });
  return Object.fromEntries(
    Object.entries(response.customAttributes ?? {}).filter(([name]) => name.startsWith('Baton')),
  );
}

function accepts(address: string): Promise<boolean> {
  const [host = '', port = ''] = address.split(/:(?=\d+$)/);
  return new Promise((done) => {
    const socket = connect({ host, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

function runNode(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', ...args],
      { cwd: REPO_ROOT, timeout: SERVER_TIMEOUT_MS, encoding: 'utf8' },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        done({ code, stdout, stderr });
      },
    );
  });
}

test(
  'temporal server: the dev server starts with the Baton search attributes and the Web UI, and restarts on its database',
  { timeout: RESOLVE_TIMEOUT_MS + SERVER_TIMEOUT_MS },
  (t) =>
    withCli(t, (resolution) =>
      withTempDir(async (stateDir) => {
        t.diagnostic(`CLI: ${resolution.path} (${resolution.source})`);
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
          const { uiUrl } = server;
          assert.ok(uiUrl !== undefined);
          assert.match(server.address, /^127\.0\.0\.1:\d+$/);
          assert.equal(server.logFile, join(stateDir, '.baton', 'temporal.log'), 'the log sits beside the database');

          const ui = await fetch(uiUrl, { signal: deadline });
          assert.equal(ui.status, 200);
          assert.match(await ui.text(), /<html/i);

          await withClient(server.address, async (client) => {
            assert.deepEqual(Object.keys(await customAttributes(client)).sort(), ['BatonAgent', 'BatonRootThreadId']);
            // A workflow with no worker stays running, so it shows whether state survives the restart.
            await client.workflow.start('noSuchWorkflow', {
              taskQueue: 'baton-temporal-server-test',
              workflowId: 'baton/t1',
              typedSearchAttributes: [{ key: BatonSearchAttributes.rootThreadId, value: 't1' }],
            });
          });

          started = Date.now();
          await server.stop();
          t.diagnostic(`graceful stop: ${Date.now() - started} ms`);
          await server.stop();
          assert.equal(await accepts(server.address), false, 'the server is gone after stop()');
          server = undefined;
          assert.ok((await readdir(join(stateDir, '.baton'))).includes('temporal.db-wal'), 'SQLite runs in WAL mode');
          const log = await readFile(join(stateDir, '.baton', 'temporal.log'), 'utf8');
          assert.match(log, /^--- .* server start-dev /m, 'each run starts with a header line');
          assert.match(log, /Stopping server/, 'SIGINT gave the server an orderly stop');

          // The preferred port is taken, as when another dev server already runs: a free one is used instead.
          const squatter = createServer();
          await new Promise<void>((ready) => squatter.listen({ host: '127.0.0.1', port: 0 }, ready));
          const busyPort = (squatter.address() as AddressInfo).port;
          try {
            started = Date.now();
            server = await startTemporal({ resolution, dbFilename, port: busyPort, uiPort: 0, stopGracePeriodMs: 0 });
            t.diagnostic(`restart on the same database: ${Date.now() - started} ms`);
          } finally {
            squatter.close();
          }
          assert.notEqual(server.address, `127.0.0.1:${busyPort}`);
          assert.ok(server.uiUrl !== undefined);
          const restartedUi = server.uiUrl;

          await withClient(server.address, async (client) => {
            const attributes = await customAttributes(client);
            assert.deepEqual(
              Object.keys(attributes).sort(),
              batonSearchAttributeKeys.map((k) => k.name).sort(),
              'the attributes missing from the old database are added at start',
            );
            assert.ok(
              Object.values(attributes).every((type) => type === 2),
              'all Keyword (INDEXED_VALUE_TYPE_KEYWORD)',
            );

            const description = await client.workflow.getHandle('baton/t1').describe();
            assert.equal(description.status.name, 'RUNNING');
            assert.equal(description.typedSearchAttributes.get(BatonSearchAttributes.rootThreadId), 't1');
            let listed: string[] = [];
            while (listed.length === 0 && !deadline.aborted) {
              listed = [];
              for await (const wf of client.workflow.list({ query: 'BatonRootThreadId="t1"' }))
                listed.push(wf.workflowId);
              if (listed.length === 0) await new Promise((r) => setTimeout(r, 200));
            }
            assert.deepEqual(listed, ['baton/t1']);
            const link = await fetch(webUiWorkflowsUrl(restartedUi, 'default', 'BatonRootThreadId="t1"'), {
              signal: deadline,
            });
            assert.equal(link.status, 200);

            await client.workflow.getHandle('baton/t1').terminate('test over');
          });
        } finally {
          await server?.stop();
        }
      }),
    ),
);

/** A script that starts a server in its own process, so this test can watch that process's stdout and stderr. */
const CHILD_SCRIPT = `
import { startTemporal } from ${JSON.stringify(join(REPO_ROOT, 'stack', 'temporal-server'))};

const [path, mode, stateDir] = process.argv.slice(2);
async function main(): Promise<void> {
  const resolution = { kind: 'cli' as const, path: path ?? '', source: 'PATH' as const, attempts: [] };
  const inMemory = await startTemporal({ resolution, port: 0, uiPort: 0 });
  const onDisk = await startTemporal({ resolution, port: 0, uiPort: 0, dbFilename: stateDir + '/temporal.db' });
  process.stdout.write(JSON.stringify({ addresses: [inMemory.address, onDisk.address] }) + '\\n');
  if (mode === 'crash') throw new Error('crashed on purpose');
  await inMemory.stop();
  await onDisk.stop();
}
void main();
`;

test(
  "temporal server: nothing the server prints reaches the parent's stdout or stderr, and a crashing parent takes it down",
  { timeout: RESOLVE_TIMEOUT_MS + 2 * SERVER_TIMEOUT_MS },
  (t) =>
    withCli(t, (resolution) =>
      withTempDir(async (dir) => {
        const script = join(dir, 'start-and-stop.ts');
        await writeFile(script, CHILD_SCRIPT);

        const clean = await runNode([script, resolution.path, 'stop', dir]);
        assert.equal(clean.code, 0, clean.stderr);
        const { addresses } = JSON.parse(clean.stdout) as { addresses: string[] };
        assert.equal(clean.stdout, `${JSON.stringify({ addresses })}\n`, 'stdout carries only what the script wrote');
        assert.equal(clean.stderr, '', 'no banner or log lines on stderr either');
        assert.match(await readFile(join(dir, 'temporal.log'), 'utf8'), /Server: +localhost:\d+/);

        const crash = await runNode([script, resolution.path, 'crash', dir]);
        assert.notEqual(crash.code, 0);
        assert.match(crash.stderr, /crashed on purpose/);
        const crashed = (JSON.parse(crash.stdout) as { addresses: string[] }).addresses;
        assert.equal(crashed.length, 2);
        for (const address of crashed) {
          assert.equal(await accepts(address), false, `the server on ${address} died with its parent`);
        }
      }),
    ),
);

test(
  "temporal server: a start that fails throws an error carrying the server's last output",
  { timeout: RESOLVE_TIMEOUT_MS + SERVER_TIMEOUT_MS },
  (t) =>
    withCli(t, (resolution) =>
      withTempDir(async (dir) => {
        for (const dbFilename of [undefined, join(dir, 'temporal.db')]) {
          const started = Date.now();
          await assert.rejects(
            startTemporal({
              resolution,
              port: 0,
              ui: false,
              extraArgs: ['--no-such-flag'],
              ...(dbFilename === undefined ? {} : { dbFilename }),
            }),
            (error: unknown) => {
              assert.ok(error instanceof TemporalStartError);
              assert.match(error.message, /exited with code 1 before it was serving/);
              assert.match(error.message, /--- last server output ---\n[\s\S]*unknown flag: --no-such-flag/);
              assert.ok(error.outputTail.some((line) => line.includes('unknown flag: --no-such-flag')));
              if (dbFilename !== undefined) assert.match(error.message, /\(log: .*temporal\.log\)/);
              return true;
            },
          );
          t.diagnostic(
            `failed start (${dbFilename === undefined ? 'in memory' : 'log file'}): ${Date.now() - started} ms`,
          );
        }
      }),
    ),
);

for (const output of ['piped', 'logged'] as const) {
  test(
    `temporal server: a port taken between choosing it and the server binding it is retried on another (${output} output)`,
    { timeout: RESOLVE_TIMEOUT_MS + SERVER_TIMEOUT_MS },
    (t) =>
      withCli(t, (resolution) =>
        withTempDir(async (dir) => {
          // The first start fails as the real CLI does when it loses the race: the failed bind, then a panic whose
          // stack trace is longer than the output tail kept for errors. Later starts run the real CLI.
          const calls = join(dir, 'calls');
          const fake = join(dir, 'temporal');
          await writeExecutable(fake, [
            '#!/bin/sh',
            `echo x >> '${calls}'`,
            `if [ "$(wc -l < '${calls}')" -eq 1 ]; then`,
            `  echo 'level=ERROR msg="Failed to start gRPC listener" error="listen tcp 127.0.0.1:1: bind: address already in use"' >&2`,
            "  echo 'panic: runtime error: invalid memory address or nil pointer dereference' >&2",
            '  i=0; while [ $i -lt 80 ]; do echo "  go.uber.org/dig.paramList.BuildList(frame $i)" >&2; i=$((i+1)); done',
            '  exit 2',
            'fi',
            `exec '${resolution.path}' "$@"`,
          ]);

          const server = await startTemporal({
            resolution: { ...resolution, path: fake },
            port: 0,
            ui: false,
            ...(output === 'logged' ? { logFile: join(dir, 'temporal.log') } : {}),
          });
          try {
            assert.equal((await readFile(calls, 'utf8')).split('\n').filter(Boolean).length, 2);
            assert.equal(await accepts(server.address), true);
          } finally {
            await server.stop();
          }
        }),
      ),
  );
}

test(
  'temporal server: another server answering on the chosen ports while this one comes up is not taken for it',
  { timeout: RESOLVE_TIMEOUT_MS + 2 * SERVER_TIMEOUT_MS },
  (t) =>
    withCli(t, (resolution) =>
      withTempDir(async (dir) => {
        const port = await choosePort('127.0.0.1', 0);
        const uiPort = await choosePort('127.0.0.1', 0, [port]);
        // Two starts find the same free ports and both spawn a server on them. The second's comes up late (as on a
        // loaded machine): only once the first's listens, and after the second's probe, which the first's answers;
        // the second's own server would then lose its bind. The late one starts first, so that both choose the ports
        // while they are free.
        const late = join(dir, 'temporal');
        const spawned = join(dir, 'spawned');
        await writeExecutable(late, [
          '#!/bin/bash',
          `echo x >> '${spawned}'`,
          `until (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; do sleep 0.1; done`,
          'sleep 5',
          `exec '${resolution.path}' "$@"`,
        ]);
        const second = startTemporal({ resolution: { ...resolution, path: late }, port, uiPort, stopGracePeriodMs: 0 });
        second.catch(() => undefined);
        while (!(await readFile(spawned, 'utf8').catch(() => ''))) await new Promise((r) => setTimeout(r, 20));
        const first = await startTemporal({ resolution, port, uiPort, stopGracePeriodMs: 0 }).catch(async (error) => {
          await (await second).stop();
          throw error;
        });
        let secondServer: TemporalServerHandle | undefined;
        try {
          secondServer = await second;
          assert.equal(first.address, `127.0.0.1:${port}`);
          assert.notEqual(secondServer.address, first.address, 'the second runs a server of its own, elsewhere');
          assert.notEqual(secondServer.uiUrl, first.uiUrl);
          await first.stop();
          assert.equal(await accepts(secondServer.address), true, 'the second answers once the first has gone');
        } finally {
          await first.stop();
          await secondServer?.stop();
        }
      }),
    ),
);

/** Writes a script of `lines` at `file`, executable. */
async function writeExecutable(file: string, lines: readonly string[]): Promise<void> {
  await writeFile(file, [...lines, ''].join('\n'));
  await chmod(file, 0o755);
}
