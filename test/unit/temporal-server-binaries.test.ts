import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  resolveTemporalServerBinaries,
  TEMPORAL_SERVER_VERSION,
  temporalServerCacheDir,
} from '../../stack/temporal-server-binaries';

/**
 * A fake `go install` of the server module: logs its arguments, prints a line of progress, and writes `server` and
 * `sql` into $GOBIN answering `--version` like the real programs. Absolute paths only, as PATH is a temp dir.
 */
const FAKE_GO = `#!/bin/sh
echo "$* GOBIN=$GOBIN" >> "$FAKE_GO_LOG"
echo "go: downloading go.temporal.io/server ${TEMPORAL_SERVER_VERSION}" >&2
V=\${FAKE_VERSION:-1.29.1}
printf '#!/bin/sh\\necho "temporal version %s"\\n' "$V" > "$GOBIN/server"
printf '#!/bin/sh\\necho "temporal-sql-tool version %s"\\n' "$V" > "$GOBIN/sql"
/bin/chmod +x "$GOBIN/server" "$GOBIN/sql"
`;

async function withSandbox(
  fn: (sb: { env: Record<string, string>; cacheDir: string; goLog: string }) => Promise<void>,
) {
  const root = await mkdtemp(join(tmpdir(), 'baton-temporal-server-'));
  try {
    const bin = join(root, 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'go'), FAKE_GO);
    await chmod(join(bin, 'go'), 0o755);
    const env = {
      PATH: bin,
      HOME: join(root, 'home'),
      XDG_CACHE_HOME: join(root, 'cache'),
      FAKE_GO_LOG: join(root, 'go.log'),
    };
    await fn({ env, cacheDir: temporalServerCacheDir({ env }), goLog: env.FAKE_GO_LOG });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

test('temporal-server binaries: cached beside the Temporal CLI, under XDG_CACHE_HOME', () => {
  assert.equal(
    temporalServerCacheDir({ env: { XDG_CACHE_HOME: '/x/cache' } }),
    `/x/cache/baton/temporal-server-${TEMPORAL_SERVER_VERSION}`,
  );
  assert.equal(
    temporalServerCacheDir({ env: {}, homeDir: '/h' }),
    `/h/.cache/baton/temporal-server-${TEMPORAL_SERVER_VERSION}`,
  );
});

test('temporal-server binaries: one go install of both packages, renamed into place, then reused', async () => {
  await withSandbox(async ({ env, cacheDir, goLog }) => {
    const progress: string[] = [];
    const first = await resolveTemporalServerBinaries({ env, progress: { write: (chunk) => progress.push(chunk) } });
    assert.deepEqual(first, {
      server: join(cacheDir, 'temporal-server'),
      sqlTool: join(cacheDir, 'temporal-sql-tool'),
      source: 'built',
      version: '1.29.1',
    });
    const calls = (await readFile(goLog, 'utf8')).trim().split('\n');
    assert.equal(calls.length, 1);
    assert.match(
      calls[0] ?? '',
      /^install -v go\.temporal\.io\/server\/cmd\/server@v1\.29\.1 go\.temporal\.io\/server\/cmd\/tools\/sql@v1\.29\.1 GOBIN=.*\.build-/,
    );
    assert.deepEqual((await readdir(cacheDir)).sort(), ['temporal-server', 'temporal-sql-tool']);
    assert.match(progress.join(''), /No temporal-server v1\.29\.1 in the cache; building it once with `go install/);
    assert.match(progress.join(''), /Built temporal-server and temporal-sql-tool in /);

    const second = await resolveTemporalServerBinaries({ env, progress: null });
    assert.equal(second.source, 'cache');
    assert.equal((await readFile(goLog, 'utf8')).trim().split('\n').length, 1, 'no second build');
  });
});

test('temporal-server binaries: a cached build of another release is rebuilt; no go and no cache is an error', async () => {
  await withSandbox(async ({ env, goLog }) => {
    await resolveTemporalServerBinaries({ env: { ...env, FAKE_VERSION: '1.28.0' }, progress: null }).then(
      () => assert.fail('a build reporting 1.28.0 must not be accepted'),
      (error: unknown) => assert.match(String(error), /do not report v1\.29\.1/),
    );
    const rebuilt = await resolveTemporalServerBinaries({ env, progress: null });
    assert.equal(rebuilt.source, 'built');
    assert.equal((await readFile(goLog, 'utf8')).trim().split('\n').length, 2);
  });
  await withSandbox(async ({ env }) => {
    await assert.rejects(
      resolveTemporalServerBinaries({ env: { ...env, PATH: '/nonexistent' }, progress: null }),
      /`go` is not on the PATH/,
    );
    await assert.rejects(
      resolveTemporalServerBinaries({ env, allowBuild: false, progress: null }),
      /building is disabled/,
    );
  });
});
