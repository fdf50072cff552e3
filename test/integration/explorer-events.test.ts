/**
 * The explorer's run feed over Server-Sent Events (`/api/threads/<root>/events`), against the test stack's Postgres:
 * a tree written as fixtures (the triggers of migration 014 make its events), each stored event sent once, in order,
 * with its id (`seq`, or `seq.n` for the further events of one write); `since` and `Last-Event-ID` resuming after
 * exactly the event they name, in the middle of one write too; events committed while the stream is open, streamed
 * text and `stream_abandoned` without an id; the pages pointing their script at the feed; refused requests, and the
 * stream's place freed when its request closes.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import { runEventsOf, type RunEvent } from '../../common/run-events';
import type { ThreadScope } from '../../common/types';
import { EnvStore } from '../../db/env-data';
import { createPool } from '../../db/pool';
import { announceRunEvents, publishDeltas, readRunFeed, recordModelCallStarted } from '../../db/run-events';
import { ensureThread } from '../../db/threads';
import { appendMessage } from '../../db/transcripts';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { runEventFrame } from '../../explorer/server';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { waitFor } from '../chaos/waiting';
import { bearer, explorerHttp, type ExplorerAddress } from './explorer-http';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, max: 4 });
const root = uniqueThreadId('xfeed');
const helper = `${root}/helper-1`;
const rootScope: ThreadScope = { rootThreadId: root, threadId: root, agent: 'lead', epoch: 0 };
const WAIT_MS = 20_000;

let client: BatonClient;
let explorer: ExplorerServer;
const { request, markup } = explorerHttp(() => explorer);
const p = (id: string) => encodeURIComponent(id);
const feedPath = (query = '') => `/api/threads/${p(root)}/events${query}`;

/** One Server-Sent Event as received: its id when it had one, and its data parsed. */
interface Frame {
  id: string | undefined;
  event: RunEvent;
}

/** An open feed: the frames so far, a wait for one, and the response's status. */
interface OpenFeed {
  status: number;
  frames: Frame[];
  next(what: string, match: (frame: Frame) => boolean): Promise<Frame>;
  close(): void;
}

/** Opens a feed stream and parses its frames as they come (comments and `retry:` are skipped). */
function openFeed(
  path: string,
  headers: Record<string, string> = {},
  server: ExplorerAddress = explorer,
): Promise<OpenFeed> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${server.url}${path}`, { headers: { ...bearer(server.token), ...headers } }, (res) => {
      const frames: Frame[] = [];
      const waiters: (() => void)[] = [];
      let buffer = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          let data: string | undefined;
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) id = line.slice(4);
            if (line.startsWith('data: ')) data = line.slice(6);
          }
          if (data !== undefined) frames.push({ id, event: JSON.parse(data) as RunEvent });
        }
        for (const wake of waiters.splice(0)) wake();
      });
      const next = async (what: string, match: (frame: Frame) => boolean): Promise<Frame> => {
        const deadline = Date.now() + WAIT_MS;
        for (;;) {
          const found = frames.find(match);
          if (found) return found;
          if (Date.now() > deadline) {
            throw new Error(
              `no ${what} within ${WAIT_MS} ms; got ${frames.map((f) => f.id ?? f.event.type).join(' ')}`,
            );
          }
          // Woken by the next chunk, or after a while to check the deadline.
          await new Promise<void>((wake) => {
            waiters.push(wake);
            setTimeout(wake, 500);
          });
        }
      };
      resolve({ status: res.statusCode ?? 0, frames, next, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

/** The ids of the root's stored events after feed number `since`, as the feed's rows decode them. */
async function storedIds(since = 0): Promise<string[]> {
  const rows = await readRunFeed(pool, root, { since, limit: 10_000 });
  return rows.flatMap((row) => runEventsOf(row).map((event) => event.id));
}

/** The ids `feed` delivered, up to and including `last` (waited for). */
async function idsUpTo(feed: OpenFeed, last: string): Promise<string[]> {
  await feed.next(`event ${last}`, (frame) => frame.id === last);
  const ids = feed.frames.flatMap((frame) => (frame.id === undefined ? [] : [frame.id]));
  return ids.slice(0, ids.indexOf(last) + 1);
}

/** The feed number of the assistant message with two tool calls: one write, four events. */
let assistantSeq = 0;

before(async () => {
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
  await pool.query(
    `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller) VALUES ($1, $2, $2, 'helper', 'lead')`,
    [helper, root],
  );
  await appendMessage(pool, rootScope, `${root}:m1`, { role: 'user', content: 'Plan <b>it</b>.' });
  await appendMessage(pool, rootScope, `${root}:m2`, {
    role: 'assistant',
    content: 'Two things first.',
    toolCalls: [
      { id: 'call-1', name: 'think', arguments: '{"thought":"a"}' },
      { id: 'call-2', name: 'helper', arguments: '{"message":"Help."}' },
    ],
    usage: { promptTokens: 10, completionTokens: 5, totalTokens: 15 },
  });
  const { rows } = await pool.query<{ seq: string }>(
    `SELECT seq FROM run_events WHERE root_thread_id = $1 AND kind = 'assistant_message'`,
    [root],
  );
  assistantSeq = Number(rows[0]?.seq);
  await pool.query(
    `INSERT INTO delegations (root_thread_id, operation_id, parent_thread_id, caller, agent, number, thread_id, workflow_id, mode, message)
     VALUES ($1, $1 || ':d1', $1, 'lead', 'helper', 1, $2, $3, 'new', 'Help.')`,
    [root, helper, `baton/${helper}`],
  );
  await appendMessage(pool, rootScope, `${root}:m3`, { role: 'tool', toolCallId: 'call-1', content: 'noted' });
  await new EnvStore(pool).store(rootScope, `${root}:e1`, { key: 'plan', shortDescription: 'The plan.', value: [1] });
  await appendMessage(pool, rootScope, `${root}:m4`, { role: 'tool', toolCallId: 'call-2', content: 'Helped.' });

  client = await connect({ address: env.temporalAddress, databaseUrl: env.databaseUrl });
  explorer = await startExplorer({ client, port: 0 });
});

after(async () => {
  await explorer?.close();
  await client?.close();
  await pool.end();
});

describe('the explorer run feed', () => {
  test('explorer feed: every stored event once, in order, each with its id; since= starts after a feed number', async () => {
    const expected = await storedIds();
    // The fixture's one write with several events is what resumption is about: make sure it is there.
    assert.deepEqual(
      expected.filter((id) => id.split('.')[0] === String(assistantSeq)),
      [0, 1, 2, 3].map((n) => (n === 0 ? `${assistantSeq}` : `${assistantSeq}.${n}`)),
    );
    const types = new Set<string>();
    const all = await openFeed(feedPath());
    try {
      assert.equal(all.status, 200);
      const got = await idsUpTo(all, expected.at(-1) ?? '');
      assert.deepEqual(got, expected);
      for (const frame of all.frames) {
        types.add(frame.event.type);
        assert.equal(frame.id, 'id' in frame.event ? frame.event.id : undefined, 'the frame id is the event id');
      }
    } finally {
      all.close();
    }
    assert.ok(
      ['message', 'model_call_ended', 'assistant_message', 'tool_call', 'delegation_started', 'env_written'].every(
        (type) => types.has(type),
      ),
      [...types].join(', '),
    );

    const firstSeq = Number(expected[0]);
    const after = await openFeed(feedPath(`?since=${firstSeq}`));
    try {
      assert.deepEqual(await idsUpTo(after, expected.at(-1) ?? ''), await storedIds(firstSeq));
    } finally {
      after.close();
    }
  });

  test('explorer feed: Last-Event-ID resumes after exactly the event it names, in the middle of a write too', async () => {
    const expected = await storedIds();
    const last = expected.at(-1) ?? '';
    // As a browser reconnects: the address it opened (since=0 here) and the id of the last event it got.
    for (const lastEventId of [`${assistantSeq}`, `${assistantSeq}.1`, `${assistantSeq}.3`, expected[0] ?? '']) {
      const rest = expected.slice(expected.indexOf(lastEventId) + 1);
      const resumed = await openFeed(feedPath('?since=0'), { 'last-event-id': lastEventId });
      try {
        assert.deepEqual(await idsUpTo(resumed, last), rest, `after ${lastEventId}`);
      } finally {
        resumed.close();
      }
    }
  });

  test('explorer feed: events committed while it is open arrive; streamed text and stream_abandoned have no id', async () => {
    const since = Number((await storedIds()).at(-1)?.split('.')[0]);
    const feed = await openFeed(feedPath(`?since=${since}`));
    try {
      const operationId = `${helper}:call-op`;
      await recordModelCallStarted(pool, {
        rootThreadId: root,
        threadId: helper,
        agent: 'helper',
        operationId,
        step: 1,
        attempt: 1,
        stream: `${operationId}#1`,
        streaming: true,
        provider: 'default',
        model: 'scripted',
      });
      const started = await feed.next('model_call_started', (f) => f.event.type === 'model_call_started');
      assert.match(started.id ?? '', /^\d+$/);
      assert.ok(Number(started.id) > since);
      await publishDeltas(pool, [
        {
          rootThreadId: root,
          threadId: helper,
          agent: 'helper',
          stream: `${operationId}#1`,
          step: 1,
          attempt: 1,
          part: 0,
          text: 'Half a <b>reply</b>',
        },
      ]);
      const delta = await feed.next('the delta', (f) => f.event.type === 'delta');
      assert.equal(delta.id, undefined, 'streamed text is not resumable: no id');
      assert.deepEqual(delta.event.type === 'delta' && [delta.event.threadId, delta.event.text], [
        helper,
        'Half a <b>reply</b>',
      ]);

      // The helper's turn ends without storing the reply: what it streamed is abandoned.
      await pool.query(`UPDATE threads SET status = 'running' WHERE thread_id = $1`, [helper]);
      await pool.query(`UPDATE threads SET status = 'failed', last_error = 'gone' WHERE thread_id = $1`, [helper]);
      announceRunEvents(pool, root);
      const ended = await feed.next('turn_ended', (f) => f.event.type === 'turn_ended');
      const abandoned = feed.frames.find((f) => f.event.type === 'stream_abandoned');
      assert.ok(abandoned, 'stream_abandoned came with the turn_ended');
      assert.equal(abandoned.id, undefined);
      assert.deepEqual(
        abandoned.event.type === 'stream_abandoned' && [abandoned.event.stream, abandoned.event.reason],
        [`${operationId}#1`, 'turn_ended'],
      );
      assert.ok(feed.frames.indexOf(abandoned) < feed.frames.indexOf(ended), 'before the turn_ended');
      const ids = feed.frames.flatMap((f) => (f.id === undefined ? [] : [f.id]));
      assert.deepEqual(ids, await storedIds(since), 'every stored event since, once, in order');

      // A reconnection after the last of them gets the next event and nothing before it.
      const resumed = await openFeed(feedPath(`?since=${since}`), { 'last-event-id': ids.at(-1) ?? '' });
      try {
        await appendMessage(pool, rootScope, `${root}:m5`, { role: 'user', content: 'And now?' });
        announceRunEvents(pool, root);
        const fresh = await resumed.next('the new message', (f) => f.event.type === 'message');
        assert.deepEqual(
          resumed.frames.map((f) => f.id),
          [fresh.id],
        );
      } finally {
        resumed.close();
      }
    } finally {
      feed.close();
    }
  });

  test('explorer feed: once its stream opens it listens, so streamed text announced at that moment reaches it', async () => {
    // A page shows itself live when its stream opens (`#run-live.connected`); streamed text is announced and never
    // stored, so text announced before the feed's LISTEN took effect would be lost to it for good.
    const operationId = `${helper}:opened-op`;
    const stream = `${operationId}#1`;
    await recordModelCallStarted(pool, {
      rootThreadId: root,
      threadId: helper,
      agent: 'helper',
      operationId,
      step: 2,
      attempt: 1,
      stream,
      streaming: true,
      provider: 'default',
      model: 'scripted',
    });
    const since = Number((await storedIds()).at(-1)?.split('.')[0]);
    const feed = await openFeed(feedPath(`?since=${since - 1}`));
    try {
      await publishDeltas(pool, [
        {
          rootThreadId: root,
          threadId: helper,
          agent: 'helper',
          stream,
          step: 2,
          attempt: 1,
          part: 0,
          text: 'At once',
        },
      ]);
      const delta = await feed.next('the delta announced as the stream opened', (f) => f.event.type === 'delta');
      assert.deepEqual(delta.event.type === 'delta' && [delta.event.stream, delta.event.text], [stream, 'At once']);
    } finally {
      feed.close();
    }
  });

  test('explorer feed: the tree and transcript pages point their script at the feed from where their data was read', async () => {
    const [{ seq }] = (
      await pool.query<{ seq: string }>('SELECT max(seq) AS seq FROM run_events WHERE root_thread_id = $1', [root])
    ).rows as [{ seq: string }];
    const envSeq = Number(
      (await pool.query<{ seq: string }>('SELECT max(seq) AS seq FROM env_events WHERE root_thread_id = $1', [root]))
        .rows[0]?.seq ?? 0,
    );
    const since = Math.max(Number(seq), envSeq);
    const tree = await markup(`/threads/${p(root)}`);
    assert.ok(
      tree.includes(`data-events="/api/threads/${p(root)}/events?since=${since}"`),
      'the tree follows the feed',
    );
    assert.match(tree, /<p class="live" id="run-live" hidden>/);
    const transcript = await markup(`/threads/${p(helper)}/transcript`);
    assert.ok(
      transcript.includes(`data-events="/api/threads/${p(root)}/events?since=${since}" data-thread="${helper}"`),
      "a delegated thread's transcript follows its root's feed, for its own thread",
    );
  });

  test('explorer feed: refused for a delegated or unknown thread, a bad id, a foreign host; its place freed on close', async () => {
    assert.equal((await request(`/api/threads/${p(helper)}/events`)).status, 400);
    assert.equal((await request(`/api/threads/no-such-thread/events`)).status, 404);
    assert.equal((await request(`/threads/${p(root)}/events`)).status, 404, 'the feed is under /api/ only');
    for (const bad of ['12.x', '-1', 'abc', '1.2.3']) {
      assert.equal((await request(feedPath(), { headers: { 'last-event-id': bad } })).status, 400, bad);
    }
    assert.equal((await request(feedPath('?since=x'))).status, 400);
    const port = new URL(explorer.url).port;
    assert.equal((await request(feedPath(), { headers: { host: `evil.example:${port}` } })).status, 421);

    // Env streams and run feeds share the cap; a closed request ends its iteration and frees its place.
    const capped = await startExplorer({ client, port: 0, maxStreams: 1 });
    try {
      const first = await openFeed(feedPath(), {}, capped);
      assert.equal(first.status, 200);
      const envStream = await openFeed(`/api/threads/${p(root)}/env/stream`, {}, capped);
      assert.equal(envStream.status, 503);
      envStream.close();
      first.close();
      await waitFor('the capped feed to be free again', 10_000, async () => {
        const again = await openFeed(feedPath(), {}, capped);
        again.close();
        return again.status === 200 ? true : undefined;
      });
    } finally {
      await capped.close();
    }
  });

  test("explorer feed: another site's page cannot read the API or a stream (Origin, Sec-Fetch-Site), though it may link to a page", async () => {
    const foreign: [string, Record<string, string>][] = [
      ['a foreign Origin', { origin: 'http://evil.example' }],
      ['Origin: null', { origin: 'null' }],
      ['a cross-site fetch', { 'sec-fetch-site': 'cross-site' }],
      ['a page on another port of this host', { 'sec-fetch-site': 'same-site' }],
    ];
    for (const path of [
      '/api/threads',
      `/api/threads/${p(root)}/approvals`,
      feedPath(),
      `/api/threads/${p(root)}/env/stream`,
    ]) {
      for (const [what, headers] of foreign) {
        const opened = await openFeed(path, headers);
        opened.close();
        assert.equal(opened.status, 403, `${what}: ${path}`);
      }
    }
    const refused = await request('/api/threads', { headers: { 'sec-fetch-site': 'cross-site' } });
    assert.deepEqual(JSON.parse(refused.body), { error: "a cross-site request cannot read this explorer's data" });
    // The explorer's own page (same-origin) and an address the person typed (none) read it; a link from elsewhere
    // opens a page.
    for (const site of ['same-origin', 'none']) {
      assert.equal((await request('/api/threads', { headers: { 'sec-fetch-site': site } })).status, 200, site);
      const own = await openFeed(feedPath(), { 'sec-fetch-site': site, origin: explorer.url });
      own.close();
      assert.equal(own.status, 200, site);
    }
    assert.equal((await request(`/threads/${p(root)}`, { headers: { 'sec-fetch-site': 'cross-site' } })).status, 200);
  });

  test('explorer feed: requests at once cannot overfill the cap on live streams', async () => {
    const capped = await startExplorer({ client, port: 0, maxStreams: 1 });
    try {
      // All of them reach the check before any stream has opened (opening one waits for its LISTEN).
      const feeds = await Promise.all([1, 2, 3, 4].map(() => openFeed(feedPath(), {}, capped)));
      for (const feed of feeds) feed.close();
      assert.deepEqual(feeds.map((feed) => feed.status).sort(), [200, 503, 503, 503]);
    } finally {
      await capped.close();
    }
  });

  test('explorer feed: a reader that takes nothing is disconnected once it stalls, and its place freed, instead of buffered for', async () => {
    const big = uniqueThreadId('xfeed-big');
    const scope: ThreadScope = { rootThreadId: big, threadId: big, agent: 'lead', epoch: 0 };
    await ensureThread(pool, { threadId: big, rootThreadId: big, agent: 'lead' });
    // About 24 MB of events (an assistant message's event carries up to 20,000 characters): far more than the socket
    // buffers of both ends hold, so the server's writes report a full buffer.
    for (let i = 0; i < 1200; i += 1) {
      await appendMessage(pool, scope, `${big}:m${i}`, { role: 'assistant', content: `${i} ${'x'.repeat(19_990)}` });
    }
    const rows = await readRunFeed(pool, big, { limit: 10_000 });
    const whole = rows.flatMap(runEventsOf).reduce((sum, event) => sum + Buffer.byteLength(runEventFrame(event)), 0);
    const slow = await startExplorer({ client, port: 0, maxStreams: 1, streamStallMs: 300 });
    let stalled: http.ClientRequest | undefined;
    try {
      const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
        stalled = http.get(`${slow.url}/api/threads/${p(big)}/events`, { headers: bearer(slow.token) }, resolve);
        stalled.on('error', reject);
      });
      assert.equal(response.statusCode, 200);
      // It reads nothing more.
      response.pause();
      // The stream's place comes free once the server gave up on the reader (the only place: maxStreams is 1).
      await waitFor('the stalled stream to be dropped', 60_000, async () => {
        const probe = await openFeed(feedPath(), {}, slow);
        probe.close();
        return probe.status === 200 ? true : undefined;
      });
      // Reading again, it gets what was buffered and then the end: the server holds nothing more for it.
      let received = 0;
      const ended = new Promise<void>((resolve) => {
        response.on('data', (chunk: Buffer) => (received += chunk.length));
        response.on('close', () => resolve());
        response.on('error', () => resolve());
      });
      response.resume();
      await Promise.race([
        ended,
        new Promise((_, reject) => setTimeout(() => reject(new Error(`still open after ${received} bytes`)), 60_000)),
      ]);
      assert.ok(received < whole, `${received} of the feed's ${whole} bytes: it was dropped, not written whole`);
    } finally {
      stalled?.destroy();
      await slow.close();
    }
  });
});
