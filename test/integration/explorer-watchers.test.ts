/**
 * The explorer's view of a root's watchers against the test stack's Postgres: watchers and wake-ups written through
 * `db/watchers.ts` as fixtures (no watcher workflow runs), shown on the root's page (each watcher with its state and
 * its wake-ups, newest first, with the changes that caused them), in the JSON API, as marked threads of the tree and
 * on a wake-up's transcript; every value escaped. A root without watchers has no Watchers section.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import { wakeupThreadId, type WatchChange } from '../../common/watchers';
import { createPool } from '../../db/pool';
import { ensureThread } from '../../db/threads';
import { endWatcher, finishWakeup, openWakeup, registerWatcher, setWatcherPause } from '../../db/watchers';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { explorerHttp, flat, textOf } from './explorer-http';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, max: 4 });
const SCRIPT = '<script>alert("owned")</script>';
const ESCAPED = '&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;';
const root = uniqueThreadId('xwatch');
const first = wakeupThreadId(root, 'reviewer', 1);
const second = wakeupThreadId(root, 'reviewer', 2);
const PAUSED_UNTIL = '2099-01-02T03:04:05.000Z';

let client: BatonClient;
let explorer: ExplorerServer;
const { json, markup } = explorerHttp(() => explorer);
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const p = (id: string) => encodeURIComponent(id);

const change = (seq: number, key: string, oldVersion: number | null, newVersion: number | null): WatchChange => ({
  seq,
  key,
  action: oldVersion === null ? 'stored' : 'updated',
  oldVersion,
  newVersion,
  writer: { agent: 'finder', thread: root },
  at: new Date().toISOString(),
});

before(async () => {
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
  await registerWatcher(pool, {
    rootThreadId: root,
    name: 'reviewer',
    agent: 'reviewer',
    spec: { keys: ['findings/*'], message: `Review ${SCRIPT}` },
    origin: 'run_time',
    createdBy: 'cli',
  });
  await registerWatcher(pool, {
    rootThreadId: root,
    name: 'auditor',
    agent: 'auditor',
    spec: { keys: ['arc/**'] },
    origin: 'frontmatter',
    createdBy: 'frontmatter of auditor',
  });
  await endWatcher(pool, root, 'auditor', 'removed', `no longer needed ${SCRIPT}`);
  await registerWatcher(pool, {
    rootThreadId: root,
    name: 'pauser',
    agent: 'auditor',
    spec: { keys: ['notes'], debounceS: 5 },
    origin: 'run_time',
    createdBy: 'lead',
  });
  await setWatcherPause(pool, root, 'pauser', { reason: 'rate limit', until: PAUSED_UNTIL });
  const wake = (operation: string, depth: number, changes: WatchChange[]) =>
    openWakeup(pool, {
      rootThreadId: root,
      watcher: 'reviewer',
      operationId: `${root}:${operation}`,
      depth,
      changes,
      cursor: 0,
      message: (n) => `wake-up ${n}`,
    });
  await wake('w1', 1, [change(1, 'findings/a', null, 1)]);
  await finishWakeup(pool, { rootThreadId: root, watcher: 'reviewer', wakeup: 1, status: 'completed' });
  await wake('w2', 2, [change(2, 'findings/a', 1, 2), change(3, `findings/${SCRIPT}`, null, 1)]);

  client = await connect({ address: env.temporalAddress, databaseUrl: env.databaseUrl });
  explorer = await startExplorer({ client, port: 0 });
});

after(async () => {
  await explorer?.close();
  await client?.close();
  await pool.end();
});

test('explorer watchers: the root page lists each watcher with its state and its wake-ups newest first, escaped', async () => {
  const raw = await markup(`/threads/${p(root)}`);
  const html = flat(raw);
  const section = /<section id="watchers">(.*?)<\/section>/s.exec(raw)?.[1] ?? '';
  const card = (name: string) => new RegExp(`data-watcher="${name}">(.*?)(?=<div class="watcher"|$)`, 's');
  const auditor = card('auditor').exec(section)?.[1] ?? '';
  const pauser = card('pauser').exec(section)?.[1] ?? '';
  const reviewer = card('reviewer').exec(section)?.[1] ?? '';
  assert.ok(auditor && pauser && reviewer, 'a Watchers section with each watcher, by name');
  assert.match(
    textOf(pauser),
    /^pauser · agent auditor · paused until 2099-01-02 03:04:05 \(in \d+ days\): rate limit keys notes · added at run time by lead · since .* · debounce 5 s · 0 wake-ups$/,
  );
  assert.match(
    textOf(auditor),
    new RegExp(
      `^auditor · agent auditor · removed: no longer needed ${escapeRegExp(SCRIPT)} keys arc/\\*\\* · declared in auditor's frontmatter · since .* · 0 wake-ups$`,
    ),
  );
  assert.match(
    textOf(reviewer),
    /^reviewer · agent reviewer · active keys findings\/\* · added at run time by cli · since .* · 2 wake-ups · last woke /,
  );
  const rows = [...reviewer.matchAll(/<tr data-wakeup="(\d+)">(.*?)<\/tr>/gs)];
  assert.deepEqual(
    rows.map(([, n]) => n),
    ['2', '1'],
    'newest first',
  );
  assert.match(
    textOf(rows[0]?.[2] ?? ''),
    new RegExp(
      `^2 ${second} 2 running .* findings/a v1→2 by finder \\(${root}\\) findings/${escapeRegExp(SCRIPT)} v0→1 by finder`,
    ),
  );
  assert.match(textOf(rows[1]?.[2] ?? ''), new RegExp(`^1 ${first} 1 completed .* findings/a v0→1 by finder`));
  assert.ok(reviewer.includes(`<a href="/threads/${p(first)}/transcript">${first}</a>`), 'a link to the wake-up');
  for (const escaped of [`<pre>Review ${ESCAPED}</pre>`, `<code>findings/${ESCAPED}</code>`, `needed ${ESCAPED}`]) {
    assert.ok(section.includes(escaped), escaped);
  }
  assert.ok(!html.includes(SCRIPT));
  // In the tree, each wake-up's thread is marked as the watcher's.
  const badge = (text: string) => `<a class="badge badge-watcher" href="#watcher-reviewer">${text}</a>`;
  assert.ok(html.includes(badge('watcher reviewer, wake-up 1')));
  assert.ok(html.includes(badge('watcher reviewer, wake-up 2 (depth 2)')));

  const transcript = textOf(await markup(`/threads/${p(first)}/transcript`));
  assert.ok(transcript.includes(`watcher reviewer, wake-up 1 of ${root} · tree`), transcript);

  const bare = uniqueThreadId('xwatch-none');
  await ensureThread(pool, { threadId: bare, rootThreadId: bare, agent: 'lead' });
  assert.doesNotMatch(await markup(`/threads/${p(bare)}`), /id="watchers"/, 'no watchers, no section');
});

test('explorer watchers: the JSON API gives the watchers with their wake-ups, and marks the wake-up threads', async () => {
  interface Node {
    threadId: string;
    workflowId: string;
    watcher: string | null;
    wakeup: { watcher: string; number: number; depth: number } | null;
    children: Node[];
  }
  const overview = (await json(`/api/threads/${p(root)}`)) as {
    watchers: {
      name: string;
      status: string;
      reason?: string;
      wakeups: number;
      recentWakeups: { wakeup: number; threadId: string; status: string; changes: WatchChange[] }[];
    }[];
    tree: Node;
  };
  assert.deepEqual(
    overview.watchers.map((w) => [w.name, w.status, w.wakeups, w.recentWakeups.map((u) => [u.wakeup, u.status])]),
    [
      ['auditor', 'removed', 0, []],
      ['pauser', 'paused', 0, []],
      [
        'reviewer',
        'active',
        2,
        [
          [2, 'running'],
          [1, 'completed'],
        ],
      ],
    ],
  );
  assert.equal(overview.watchers[0]?.reason, `no longer needed ${SCRIPT}`);
  assert.deepEqual(
    overview.watchers[2]?.recentWakeups[0]?.changes.map((c) => [c.key, c.oldVersion, c.newVersion]),
    [
      ['findings/a', 1, 2],
      [`findings/${SCRIPT}`, null, 1],
    ],
  );
  const node = overview.tree.children.find((child) => child.threadId === second);
  assert.deepEqual(
    [node?.watcher, node?.wakeup?.number, node?.wakeup?.depth, node?.workflowId],
    ['reviewer', 2, 2, `baton/${second}`],
  );
  assert.deepEqual(await json(`/api/threads/${p(root)}/watchers`), overview.watchers);
});
