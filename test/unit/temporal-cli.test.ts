import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProgressStream, ResolveTemporalOptions } from '../../stack/temporal-cli';
import {
  TEMPORAL_CLI_VERSION,
  TemporalUnavailableError,
  resolveTemporal,
  temporalCliCacheDir,
} from '../../stack/temporal-cli';
import { webUiWorkflowsUrl } from '../../stack/temporal-server';

const FAKE_TEMPORAL = '#!/bin/sh\necho "temporal version 0.0.0-fake (Server 0.0.0, UI 0.0.0)"\n';

/**
 * A fake `go` that behaves like `go install` enough for the resolver: it prints progress, logs its arguments and
 * environment, and writes a fake CLI into $GOBIN. Only absolute paths and shell built-ins, as PATH is a temp dir.
 */
const FAKE_GO = `#!/bin/sh
echo "$* GOBIN=$GOBIN CGO_ENABLED=$CGO_ENABLED" >> "$FAKE_GO_LOG"
echo "go: downloading github.com/temporalio/cli ${TEMPORAL_CLI_VERSION}" >&2
if [ -n "$FAKE_GO_SLEEP" ]; then /bin/sleep "$FAKE_GO_SLEEP"; fi
echo "github.com/temporalio/cli/temporalcli" >&2
printf '#!/bin/sh\\necho "temporal version 0.0.0-DEV (fake build)"\\n' > "$GOBIN/temporal"
if [ -n "$FAKE_GO_FAIL" ]; then echo "compile: $FAKE_GO_FAIL" >&2; exit 1; fi
/bin/chmod +x "$GOBIN/temporal"
`;

interface Sandbox {
  readonly root: string;
  readonly cacheHome: string;
  readonly cacheDir: string;
  readonly goLog: string;
  dir(name: string): Promise<string>;
  exe(dir: string, name: string, body: string): Promise<string>;
  options(env: Record<string, string | undefined>, extra?: Partial<ResolveTemporalOptions>): ResolveTemporalOptions;
  goCalls(): Promise<string[]>;
}

async function withSandbox(fn: (sb: Sandbox) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'baton-temporal-cli-'));
  const cacheHome = join(root, 'xdg-cache');
  const goLog = join(root, 'go.log');
  const sb: Sandbox = {
    root,
    cacheHome,
    cacheDir: join(cacheHome, 'baton', `temporal-${TEMPORAL_CLI_VERSION}`),
    goLog,
    async dir(name) {
      const dir = join(root, name);
      await mkdir(dir, { recursive: true });
      return dir;
    },
    async exe(dir, name, body) {
      const file = join(dir, name);
      await writeFile(file, body);
      await chmod(file, 0o755);
      return file;
    },
    options: (env, extra = {}) => ({
      env: { HOME: join(root, 'home'), XDG_CACHE_HOME: cacheHome, FAKE_GO_LOG: goLog, ...env },
      progress: null,
      ...extra,
    }),
    goCalls: async () => (await readFile(goLog, 'utf8').catch(() => '')).split('\n').filter((l) => l !== ''),
  };
  try {
    await fn(sb);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

function captureStream(isTTY: boolean): ProgressStream & { readonly text: () => string } {
  const chunks: string[] = [];
  return { isTTY, columns: 200, write: (chunk: string) => chunks.push(chunk), text: () => chunks.join('') };
}

test('temporal cli: TEMPORAL_ADDRESS wins over every CLI route and starts nothing', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    const cli = await sb.exe(bin, 'temporal', FAKE_TEMPORAL);
    const result = await resolveTemporal(
      sb.options({ TEMPORAL_ADDRESS: 'temporal.internal:7233', TEMPORAL_CLI_PATH: cli, PATH: bin }),
    );
    assert.equal(result.kind, 'address');
    assert.equal(result.kind === 'address' && result.address, 'temporal.internal:7233');
  });
});

test('temporal cli: TEMPORAL_CLI_PATH is used before a temporal on the PATH', async () => {
  await withSandbox(async (sb) => {
    const explicit = await sb.exe(await sb.dir('explicit'), 'my-temporal', FAKE_TEMPORAL);
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'temporal', FAKE_TEMPORAL);
    const result = await resolveTemporal(sb.options({ TEMPORAL_CLI_PATH: explicit, PATH: bin }));
    assert.deepEqual(result.kind === 'cli' && { path: result.path, source: result.source, version: result.version }, {
      path: explicit,
      source: 'TEMPORAL_CLI_PATH',
      version: 'temporal version 0.0.0-fake (Server 0.0.0, UI 0.0.0)',
    });
  });
});

test('temporal cli: a TEMPORAL_CLI_PATH that is not executable is an error, not a reason to look elsewhere', async () => {
  await withSandbox(async (sb) => {
    const file = join(await sb.dir('explicit'), 'temporal');
    await writeFile(file, FAKE_TEMPORAL);
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'temporal', FAKE_TEMPORAL);
    await assert.rejects(resolveTemporal(sb.options({ TEMPORAL_CLI_PATH: file, PATH: bin })), (error) => {
      assert.ok(error instanceof TemporalUnavailableError);
      assert.match(error.message, /TEMPORAL_CLI_PATH: .*temporal: not executable/);
      assert.equal(error.attempts.at(-1)?.route, 'TEMPORAL_CLI_PATH');
      return true;
    });
  });
});

test('temporal cli: the first working temporal on the PATH is used and an impostor is skipped', async () => {
  await withSandbox(async (sb) => {
    const empty = await sb.dir('empty');
    const impostor = await sb.dir('impostor');
    await sb.exe(impostor, 'temporal', '#!/bin/sh\necho "temporal: a time-travel toy"\n');
    const real = await sb.dir('real');
    const cli = await sb.exe(real, 'temporal', FAKE_TEMPORAL);
    const result = await resolveTemporal(sb.options({ PATH: [empty, impostor, real].join(':') }));
    assert.equal(result.kind === 'cli' && result.source, 'PATH');
    assert.equal(result.kind === 'cli' && result.path, cli);
  });
});

test('temporal cli: the user cache is used when the PATH has none', async () => {
  await withSandbox(async (sb) => {
    await mkdir(sb.cacheDir, { recursive: true });
    const cached = await sb.exe(sb.cacheDir, 'temporal', FAKE_TEMPORAL);
    const result = await resolveTemporal(sb.options({ PATH: await sb.dir('bin') }));
    assert.deepEqual(result.kind === 'cli' && [result.source, result.path], ['cache', cached]);
    assert.deepEqual(
      result.attempts.map((a) => [a.route, a.outcome]),
      [
        ['TEMPORAL_ADDRESS', 'skipped'],
        ['TEMPORAL_CLI_PATH', 'skipped'],
        ['PATH', 'failed'],
        ['cache', 'used'],
      ],
    );
  });
});

test('temporal cli: the cache lives under XDG_CACHE_HOME, else ~/.cache, ignoring a relative XDG_CACHE_HOME', () => {
  assert.equal(
    temporalCliCacheDir({ env: { XDG_CACHE_HOME: '/x/cache', HOME: '/home/u' } }),
    `/x/cache/baton/temporal-${TEMPORAL_CLI_VERSION}`,
  );
  assert.equal(
    temporalCliCacheDir({ env: { HOME: '/home/u' } }),
    `/home/u/.cache/baton/temporal-${TEMPORAL_CLI_VERSION}`,
  );
  assert.equal(
    temporalCliCacheDir({ env: { XDG_CACHE_HOME: 'rel', HOME: '/home/u' } }),
    `/home/u/.cache/baton/temporal-${TEMPORAL_CLI_VERSION}`,
  );
  assert.equal(temporalCliCacheDir({ env: {}, homeDir: '/h' }), `/h/.cache/baton/temporal-${TEMPORAL_CLI_VERSION}`);
});

test('temporal cli: go installs into a temporary GOBIN in the cache, renames it into place, then reuses it', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', FAKE_GO);
    const first = await resolveTemporal(sb.options({ PATH: bin }));
    assert.deepEqual(first.kind === 'cli' && [first.source, first.path], ['built', join(sb.cacheDir, 'temporal')]);
    assert.equal(first.kind === 'cli' && first.version, 'temporal version 0.0.0-DEV (fake build)');

    const calls = await sb.goCalls();
    assert.equal(calls.length, 1);
    const call = calls[0] ?? '';
    assert.match(call, new RegExp(`^install -v github\\.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION} `));
    assert.ok(call.includes(`GOBIN=${join(sb.cacheDir, '.build-')}`), call);
    assert.ok(call.endsWith('CGO_ENABLED=0'), call);
    assert.deepEqual(await readdir(sb.cacheDir), ['temporal'], 'no temporary GOBIN or lock left behind');

    const second = await resolveTemporal(sb.options({ PATH: bin }));
    assert.equal(second.kind === 'cli' && second.source, 'cache');
    assert.equal((await sb.goCalls()).length, 1);
  });
});

test('temporal cli: two processes resolving at once build once; the second waits on the lock', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', FAKE_GO);
    const waitLines = captureStream(false);
    const first = resolveTemporal(sb.options({ PATH: bin, FAKE_GO_SLEEP: '1' }));
    // The second starts once the first holds the lock (its file exists), not after a head start assumed to suffice.
    for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 10))) {
      if ((await readdir(sb.cacheDir).catch((): string[] => [])).includes('build.lock')) break;
      assert.ok(Date.now() < deadline, 'the first process never took the build lock');
    }
    const [a, b] = await Promise.all([
      first,
      resolveTemporal(sb.options({ PATH: bin, FAKE_GO_SLEEP: '1' }, { progress: waitLines })),
    ]);
    assert.equal((await sb.goCalls()).length, 1);
    assert.deepEqual([a.kind === 'cli' && a.source, b.kind === 'cli' && b.source], ['built', 'cache']);
    assert.match(waitLines.text(), /Waiting for another process \(pid \d+ on .*\) that is building the Temporal CLI/);
  });
});

test('temporal cli: a lock left by a dead process is taken over', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', FAKE_GO);
    const dead = spawn('/bin/sh', ['-c', 'exit 0']);
    const deadPid = dead.pid;
    await new Promise((r) => dead.once('close', r));
    await mkdir(sb.cacheDir, { recursive: true });
    await writeFile(
      join(sb.cacheDir, 'build.lock'),
      JSON.stringify({ pid: deadPid, host: hostname(), at: Date.now() }),
    );
    await mkdir(join(sb.cacheDir, '.build-1-1'));
    await writeFile(join(sb.cacheDir, '.build-1-1', 'temporal'), 'half a binary');

    const result = await resolveTemporal(sb.options({ PATH: bin }, { lockWaitTimeoutMs: 5_000 }));
    assert.equal(result.kind === 'cli' && result.source, 'built');
    assert.deepEqual(await readdir(sb.cacheDir), ['temporal'], 'stale lock and killed build dir are cleaned up');
  });
});

test('temporal cli: build progress shows elapsed time and the latest go line, then the total time', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', FAKE_GO);
    const plain = captureStream(false);
    await resolveTemporal(
      sb.options({ PATH: bin, FAKE_GO_SLEEP: '0.5' }, { progress: plain, progressIntervalMs: 100 }),
    );
    const lines = plain.text().split('\n');
    assert.match(
      lines[0] ?? '',
      /building it once with `go install github\.com\/temporalio\/cli\/cmd\/temporal@v1\.5\.1`/,
    );
    assert.ok(
      lines.some((l) =>
        /^ {2}building temporal v1\.5\.1: \d+\.\ds {2}go: downloading github\.com\/temporalio\/cli/.test(l),
      ),
      plain.text(),
    );
    assert.match(plain.text(), /Built the Temporal CLI in \d+\.\ds: .*temporal\n$/);
    assert.ok(!plain.text().includes('\r'), 'no carriage returns when stderr is not a TTY');

    await rm(sb.cacheDir, { recursive: true });
    const tty = captureStream(true);
    await resolveTemporal(sb.options({ PATH: bin, FAKE_GO_SLEEP: '1.3' }, { progress: tty }));
    // Shown with the escape spelled out: each update clears the line (CR, ESC[2K) and rewrites it.
    const screen = tty.text().replaceAll('\x1b', '<ESC>');
    assert.match(screen, /\r<ESC>\[2K {2}building temporal v1\.5\.1: 1\.\ds {2}go: downloading/);
    assert.match(screen, /\r<ESC>\[2KBuilt the Temporal CLI in/);
  });
});

test('temporal cli: a failed build leaves no binary in the cache and its output is in the error', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', FAKE_GO);
    const options = sb.options({ PATH: bin, FAKE_GO_FAIL: 'out of memory' }, { allowSdkDownload: false });
    await assert.rejects(resolveTemporal(options), (error) => {
      assert.ok(error instanceof TemporalUnavailableError);
      assert.match(error.message, /go build: with .*\/go: go install exited with code 1: .*compile: out of memory/);
      return true;
    });
    assert.equal(existsSync(join(sb.cacheDir, 'temporal')), false);
    assert.deepEqual(await readdir(sb.cacheDir), []);
  });
});

test('temporal cli: aborting a build stops go and rejects', async () => {
  await withSandbox(async (sb) => {
    const bin = await sb.dir('bin');
    await sb.exe(bin, 'go', '#!/bin/sh\nexec /bin/sleep 30\n');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();
    await assert.rejects(resolveTemporal(sb.options({ PATH: bin }, { signal: controller.signal })));
    assert.ok(Date.now() - started < 5_000, 'go was stopped, not waited for');
    assert.equal(existsSync(join(sb.cacheDir, 'temporal')), false);
  });
});

test('temporal cli: with no route at all the error names each route and why it failed', async () => {
  await withSandbox(async (sb) => {
    const empty = await sb.dir('empty');
    await assert.rejects(resolveTemporal(sb.options({ PATH: empty }, { allowSdkDownload: false })), (error) => {
      assert.ok(error instanceof TemporalUnavailableError);
      assert.deepEqual(
        error.attempts.map((a) => a.route),
        ['TEMPORAL_ADDRESS', 'TEMPORAL_CLI_PATH', 'PATH', 'cache', 'go build', 'SDK download'],
      );
      const lines = error.message.split('\n');
      assert.ok(lines.includes('  - TEMPORAL_ADDRESS: skipped, not set'), error.message);
      assert.ok(lines.includes('  - TEMPORAL_CLI_PATH: skipped, not set'), error.message);
      assert.ok(lines.includes('  - PATH: no executable `temporal` in 1 PATH directory'), error.message);
      assert.ok(lines.includes(`  - cache: ${join(sb.cacheDir, 'temporal')}: does not exist`), error.message);
      assert.ok(lines.includes('  - go build: `go` not found: no executable `go` in 1 PATH directory'), error.message);
      assert.ok(lines.includes('  - SDK download: skipped, disabled (allowSdkDownload: false)'), error.message);
      return true;
    });
  });
});

test('temporal cli: with no CLI and no go it falls back to the SDK download', async () => {
  await withSandbox(async (sb) => {
    const result = await resolveTemporal(sb.options({ PATH: await sb.dir('empty') }));
    assert.equal(result.kind, 'sdk-download');
    assert.deepEqual(result.attempts.at(-1), {
      route: 'SDK download',
      outcome: 'used',
      detail: 'TestWorkflowEnvironment.createLocal() download',
    });
  });
});

test('temporal server: webUiWorkflowsUrl links to the workflow list filtered by a visibility query', () => {
  assert.equal(
    webUiWorkflowsUrl('http://127.0.0.1:8233/', 'default', 'BatonRootThreadId="abc"'),
    'http://127.0.0.1:8233/namespaces/default/workflows?query=BatonRootThreadId%3D%22abc%22',
  );
  assert.equal(
    webUiWorkflowsUrl('http://localhost:9000', 'team a', 'BatonAgent="solver" AND BatonThreadId="t 1"'),
    'http://localhost:9000/namespaces/team%20a/workflows?query=BatonAgent%3D%22solver%22%20AND%20BatonThreadId%3D%22t%201%22',
  );
});
