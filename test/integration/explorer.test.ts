/**
 * The thread explorer over HTTP against the test stack's Postgres: pages and `/api/` for a tree written as fixtures
 * (a delegation with its preamble, tool calls and an `Error:` result, env data with updates and a delete, and a fork
 * with a reclaimed task — the fork/join tables are filled directly here, as a fixture), escaping, the env state as of
 * an event, live changes over Server-Sent Events, the token's cookie, and refused input.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { connect, type BatonClient } from '../../client';
import type { ThreadScope } from '../../common/types';
import { EnvStore } from '../../db/env-data';
import { createPool } from '../../db/pool';
import { openQuestion } from '../../db/questions';
import { ensureThread } from '../../db/threads';
import { appendMessage } from '../../db/transcripts';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { waitFor } from '../chaos/waiting';
import { compactJson } from '../../explorer/pages';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { bearer, explorerHttp, flat } from './explorer-http';

const env = readTestEnv();
const pool = createPool({ connectionString: env.databaseUrl, max: 4 });
const store = new EnvStore(pool);
const UI_URL = 'http://127.0.0.1:65530';
/** Jaeger's search for one root's traces, as `BATON_TRACE_URL` holds it. */
const TRACE_URL =
  'http://127.0.0.1:16686/search?service=baton-worker&tags=%7B%22baton.root_thread_id%22%3A%22{rootThreadId}%22%7D';
const SCRIPT = '<script>alert("owned")</script>';

let client: BatonClient;
let explorer: ExplorerServer;
const root = uniqueThreadId('xplr');
const solver = `${root}/solver-1`;
const rootScope: ThreadScope = { rootThreadId: root, threadId: root, agent: 'coordinator', epoch: 0 };
const solverScope: ThreadScope = { rootThreadId: root, threadId: solver, agent: 'solver', epoch: 0 };
const PREAMBLE = [
  '---',
  '[Delegation Context]',
  'Called by: coordinator',
  'Delegation chain: human → coordinator → you (solver)',
  '---',
].join('\n');
/** Sequence numbers of the env events, by step. */
const seqs: Record<string, number> = {};

const { request, json, page } = explorerHttp(() => explorer);

const p = (id: string) => encodeURIComponent(id);

before(async () => {
  await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'coordinator' });
  await pool.query(
    `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller) VALUES ($1, $2, $2, 'solver', 'coordinator')`,
    [solver, root],
  );
  await pool.query(
    `INSERT INTO delegations (root_thread_id, operation_id, parent_thread_id, caller, agent, number, thread_id, workflow_id, mode, message)
     VALUES ($1, $1 || ':d1', $1, 'coordinator', 'solver', 1, $2, $3, 'new', $4)`,
    [root, solver, `baton/${root}/solver-1`, `${PREAMBLE}\n\nSolve it.`],
  );
  await appendMessage(pool, rootScope, `${root}:m1`, { role: 'user', content: `Solve ${SCRIPT} please` });
  await appendMessage(pool, rootScope, `${root}:m2`, {
    role: 'assistant',
    content: null,
    toolCalls: [
      { id: 'call-1', name: 'solver', arguments: '{"message":"Solve it.","context_keys":["notes"]}' },
      { id: 'call-2', name: 'read_file', arguments: '{"path":"missing.txt"}' },
    ],
    usage: { promptTokens: 100, completionTokens: 20, totalTokens: 120 },
  });
  await appendMessage(pool, rootScope, `${root}:m3`, {
    role: 'tool',
    toolCallId: 'call-1',
    content: '{"rule":"scale","grid":[[1,2],[3,4]]}',
  });
  await appendMessage(pool, rootScope, `${root}:m4`, {
    role: 'tool',
    toolCallId: 'call-2',
    content: "Error: no file 'missing.txt'",
  });
  await appendMessage(pool, solverScope, `${solver}:m1`, { role: 'user', content: `${PREAMBLE}\n\nSolve it.` });
  await appendMessage(pool, solverScope, `${solver}:m2`, {
    role: 'assistant',
    content: 'Done.',
    usage: { promptTokens: 50, completionTokens: 5, totalTokens: 55 },
  });
  await pool.query(`UPDATE threads SET status = 'completed', finished_at = now() WHERE thread_id = $1`, [solver]);

  const logged = async (step: string, write: Promise<unknown>) => {
    await write;
    const { rows } = await pool.query<{ seq: string }>(
      'SELECT MAX(seq) AS seq FROM env_events WHERE root_thread_id = $1',
      [root],
    );
    seqs[step] = Number(rows[0]?.seq);
  };
  await logged(
    'notes-v1',
    store.store(solverScope, `${solver}:e1`, {
      key: 'notes',
      shortDescription: `first notes ${SCRIPT}`,
      value: { html: SCRIPT, n: 1 },
    }),
  );
  await logged(
    'temp',
    store.store(solverScope, `${solver}:e2`, { key: 'temp', shortDescription: 'scratch', value: 'x' }),
  );
  await logged('notes-v2', store.update(rootScope, `${root}:e3`, { key: 'notes', value: { html: SCRIPT, n: 2 } }));
  await logged('temp-deleted', store.delete(rootScope, `${root}:e4`, 'temp'));

  // Fork/join rows as the lead's fork_join will write them: fork 1 of the solver, two tasks, the second reclaimed.
  const tasks = [`${root}/worker-1`, `${root}/worker-2`];
  for (const [index, thread] of tasks.entries()) {
    await pool.query(
      `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, fork_task, started_at, status, finished_at)
       VALUES ($1, $2, $3, 'worker', 'solver', $4, now() - interval '20 seconds', $5, $6)`,
      [
        thread,
        root,
        solver,
        `fork 1 task ${index + 1}`,
        index === 0 ? 'completed' : 'running',
        index === 0 ? new Date(Date.now() - 12_000) : null,
      ],
    );
  }
  await pool.query(
    `INSERT INTO forks (root_thread_id, number, operation_id, parent_thread_id, caller, store_mode, prefix, fail_fast, deadline_seconds, max_parallel, status, created_at, deadline_at, finished_at)
     VALUES ($1, 1, $1 || ':f1', $2, 'solver', 'isolated', 'fork-1', false, 15, 4, 'partial', now() - interval '21 seconds', now() - interval '6 seconds', now() - interval '5 seconds')`,
    [root, solver],
  );
  await pool.query(
    `INSERT INTO fork_tasks (root_thread_id, fork_number, task_index, agent, thread_id, workflow_id, status, error, reclaimed_at, finished_at)
     VALUES ($1, 1, 1, 'worker', $2, $3, 'success', NULL, NULL, now() - interval '12 seconds'),
            ($1, 1, 2, 'worker', $4, $5, 'timeout', 'past the 15 s deadline', now() - interval '6 seconds', now() - interval '6 seconds')`,
    [root, tasks[0], `baton/${root}/worker-1`, tasks[1], `baton/${root}/worker-2`],
  );
  await pool.query(
    `INSERT INTO env_proposals (root_thread_id, proposal_id, number, scope, key, value, short_description, base_version, proposed_by_agent, proposed_by_thread, fork_task, operation_id)
     VALUES ($1, 'p1', 1, '', 'notes', $2, 'a better rule', 2, 'worker', $3, 'fork 1 task 1', $1 || ':p1')`,
    [root, JSON.stringify({ rule: SCRIPT }), tasks[0]],
  );
  await openQuestion(pool, solverScope, `${solver}:q1`, {
    workflowId: `baton/${root}/solver-1`,
    toolCallId: 'call-9',
    question: `Which ${SCRIPT}?`,
  });

  client = await connect({ address: env.temporalAddress, databaseUrl: env.databaseUrl });
  explorer = await startExplorer({ client, port: 0, uiUrl: UI_URL, traceUrl: TRACE_URL });
});

after(async () => {
  await explorer?.close();
  await client?.close();
  await pool.end();
});

describe('explorer pages and API', () => {
  test('explorer: root threads newest first with agent, status, turns and tokens; search narrows them', async () => {
    const other = uniqueThreadId('xplr-other');
    await ensureThread(pool, { threadId: other, rootThreadId: other, agent: 'greeter' });
    const rows = (await json('/api/threads')) as {
      threadId: string;
      agent: string;
      turns: number;
      totalTokens: number;
      threads: number;
      openQuestions: number;
    }[];
    const ids = rows.map((row) => row.threadId);
    assert.ok(ids.indexOf(other) < ids.indexOf(root), 'the newer thread comes first');
    assert.ok(!ids.includes(solver), 'delegation threads are not listed');
    const mine = rows.find((row) => row.threadId === root);
    assert.deepEqual(
      {
        agent: mine?.agent,
        turns: mine?.turns,
        totalTokens: mine?.totalTokens,
        threads: mine?.threads,
        open: mine?.openQuestions,
      },
      { agent: 'coordinator', turns: 1, totalTokens: 175, threads: 4, open: 1 },
    );
    const found = (await json(`/api/threads?q=${encodeURIComponent('please')}`)) as { threadId: string }[];
    assert.ok(found.some((row) => row.threadId === root) && !found.some((row) => row.threadId === other));
    const html = await page(`/?q=${encodeURIComponent(SCRIPT)}`);
    assert.ok(
      html.includes('value="&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;"'),
      'the search box echoes the query escaped',
    );
    assert.ok(!html.includes(SCRIPT));
    const listed = await page('/');
    assert.match(listed, new RegExp(`href="/threads/${root}"`));
  });

  test('explorer: the tree shows each node with its preamble and a Web UI link, and the fork as a group with a timeline', async () => {
    const html = await page(`/threads/${p(root)}`);
    assert.match(html, /<strong class="agent">coordinator<\/strong>/);
    assert.match(html, /<strong class="agent">solver<\/strong>/);
    assert.ok(
      html.includes(`href="${UI_URL}/namespaces/default/workflows/${p(`baton/${root}/solver-1`)}"`),
      'a Web UI link per node',
    );
    assert.ok(html.includes(`href="${UI_URL}/namespaces/default/workflows/${p(`baton/${root}`)}"`));
    assert.ok(html.includes('[Delegation Context]'), 'the preamble the solver received');
    assert.ok(
      html.includes(`href="${TRACE_URL.replace('{rootThreadId}', encodeURIComponent(root)).replace(/&/g, '&amp;')}"`),
      "a link to the root's traces",
    );
    assert.match(html, /data-fork="1"/);
    assert.match(html, /fork 1<\/strong><span class="status status-partial">partial<\/span>/);
    assert.match(
      html,
      /<tr data-task="2"><td>2<\/td><td>worker<\/td><td><span class="status status-timeout">timeout<\/span><div class="error-text">past the 15 s deadline<\/div>/,
    );
    assert.match(html, /class="bar bar-success"/);
    assert.match(html, /class="bar bar-timeout"/);
    assert.match(html, /class="reclaimed"/);
    assert.ok(html.includes(`Which &lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;?`), 'the question, escaped');
    assert.ok(!html.includes(SCRIPT));

    const overview = (await json(`/api/threads/${p(root)}`)) as {
      tree: {
        agent: string;
        workflowId: string;
        children: {
          agent: string;
          delegations: { message: string }[];
          forks: {
            number: number;
            tasks: { taskIndex: number; status: string; reclaimedAt: string | null; node?: { threadId: string } }[];
          }[];
        }[];
      };
    };
    assert.equal(overview.tree.workflowId, `baton/${root}`);
    const [child] = overview.tree.children;
    assert.equal(child?.agent, 'solver');
    assert.equal(overview.tree.children.length, 1, 'fork task threads sit in their fork, not as plain children');
    assert.ok(child?.delegations[0]?.message.startsWith(PREAMBLE));
    assert.deepEqual(
      child?.forks[0]?.tasks.map((t) => [t.taskIndex, t.status, t.reclaimedAt !== null, t.node?.threadId]),
      [
        [1, 'success', false, `${root}/worker-1`],
        [2, 'timeout', true, `${root}/worker-2`],
      ],
    );
  });

  test('explorer: a transcript shows tool calls and JSON results pretty-printed and collapsible, errors highlighted, text escaped', async () => {
    const html = await page(`/threads/${p(root)}/transcript`);
    assert.ok(html.includes('Solve &lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; please'));
    assert.ok(!html.includes(SCRIPT));
    assert.match(html, /<details class="json"\s*><summary><code>\{&quot;message&quot;:&quot;Solve it\.&quot;/);
    assert.ok(
      html.includes(compactJson({ message: 'Solve it.', context_keys: ['notes'] }).replaceAll('"', '&quot;')),
      'arguments pretty-printed',
    );
    assert.ok(
      html.includes(
        [
          '{',
          '  &quot;rule&quot;: &quot;scale&quot;,',
          '  &quot;grid&quot;: [',
          '    [1, 2],',
          '    [3, 4]',
          '  ]',
          '}',
        ].join('\n'),
      ),
      'a JSON result pretty-printed',
    );
    assert.match(
      html,
      /<div class="tool-result error"><span class="arrow">←<\/span><strong>read_file<\/strong><pre class="content">Error: no file &#39;missing.txt&#39;<\/pre>/,
    );

    const child = await page(`/threads/${p(solver)}/transcript`);
    assert.match(
      child,
      /<details class="preamble" open><summary>delegation preamble<\/summary><pre>---\n\[Delegation Context\]/,
    );
    assert.match(child, /<pre class="content">Solve it\.<\/pre>/);
    const messages = (await json(`/api/threads/${p(solver)}/transcript`)) as { seq: number }[];
    assert.deepEqual(
      messages.map((m) => m.seq),
      [1, 2],
    );
  });

  test('explorer: the env panel lists the root scope, values on demand, the log with attribution and pending proposals', async () => {
    const html = await page(`/threads/${p(root)}/env`);
    assert.match(html, /<tr data-key="notes">/);
    assert.doesNotMatch(html, /<tr data-key="temp">/);
    assert.ok(html.includes('first notes &lt;script&gt;'));
    assert.ok(!html.includes(SCRIPT));
    assert.match(html, new RegExp(`data-stream="/api/threads/${root}/env/stream\\?since=${seqs['temp-deleted']}"`));
    assert.match(html, /<tr data-proposal="p1">/);
    assert.ok(html.includes('fork 1 task 1'), 'the proposal names the fork task');
    for (const seq of Object.values(seqs)) assert.match(html, new RegExp(`<tr data-seq="${seq}"`));
    const value = (await json(`/api/threads/${p(root)}/env/value?key=notes`)) as {
      value: unknown;
      version: number;
      storedBy: { agent: string };
    };
    assert.deepEqual(value.value, { html: SCRIPT, n: 2 });
    assert.equal(value.version, 2);
    assert.equal(value.storedBy.agent, 'coordinator');
    const events = (await json(`/api/threads/${p(root)}/env/events`)) as { action: string; actor: { agent: string } }[];
    assert.deepEqual(
      events.map((e) => [e.action, e.actor.agent]),
      [
        ['stored', 'solver'],
        ['stored', 'solver'],
        ['updated', 'coordinator'],
        ['deleted', 'coordinator'],
      ],
    );
  });

  test('explorer: the state as of an event is rebuilt from the log', async () => {
    const asOf = async (step: string) =>
      (await json(`/api/threads/${p(root)}/env?asOf=${seqs[step]}`)) as {
        asOf: number;
        entries: { key: string; version: number; value: unknown }[];
      };
    assert.deepEqual(
      (await asOf('notes-v1')).entries.map((e) => [e.key, e.version, e.value]),
      [['notes', 1, { html: SCRIPT, n: 1 }]],
    );
    assert.deepEqual(
      (await asOf('temp')).entries.map((e) => [e.key, e.version]),
      [
        ['notes', 1],
        ['temp', 1],
      ],
    );
    assert.deepEqual(
      (await asOf('notes-v2')).entries.map((e) => [e.key, e.version]),
      [
        ['notes', 2],
        ['temp', 1],
      ],
    );
    assert.deepEqual(
      (await asOf('temp-deleted')).entries.map((e) => e.key),
      ['notes'],
    );
    const html = await page(`/threads/${p(root)}/env?asOf=${seqs.temp}`);
    assert.match(html, /id="asof-banner">State as of event #/);
    assert.match(html, /<tr data-key="temp">/);
    assert.ok(html.includes('&lt;script&gt;alert(&quot;owned&quot;)'), 'the value shown escaped');
    assert.ok(!html.includes(SCRIPT));
  });

  test('explorer: a change committed while the stream is open arrives over Server-Sent Events', async () => {
    const since = seqs['temp-deleted'] ?? 0;
    const received = new Promise<string>((resolve, reject) => {
      const streamUrl = `${explorer.url}/api/threads/${p(root)}/env/stream?since=${since}`;
      const req = http.get(streamUrl, { headers: bearer(explorer.token) }, (res) => {
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] ?? '', /^text\/event-stream/);
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
          if (text.includes('\n\n') && text.includes('event: env')) {
            req.destroy();
            resolve(text);
          }
        });
        // Connected: now write.
        void store.store(rootScope, `${root}:e5`, { key: 'live', shortDescription: 'pushed', value: [1, 2, 3] });
      });
      req.on('error', reject);
    });
    const text = await received;
    const data = /event: env\ndata: (.*)\n/.exec(text)?.[1];
    assert.ok(data, text);
    const change = JSON.parse(data) as {
      event: { key: string; action: string; scope: string };
      entry: { key: string; version: number; value?: unknown };
    };
    assert.deepEqual([change.event.key, change.event.action, change.event.scope], ['live', 'stored', '']);
    assert.deepEqual([change.entry.key, change.entry.version, 'value' in change.entry], ['live', 1, false]);
  });

  test('explorer: posts from other sites and requests for other hosts are refused; a refused answer changes nothing', async () => {
    const answerPath = `/threads/${p(root)}/questions/q1/answer`;
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const refusals: [string, Record<string, string>, string, string][] = [
      ['cross-site without Origin', { ...form, 'sec-fetch-site': 'cross-site' }, answerPath, 'answer=yes'],
      ['Origin: null', { ...form, origin: 'null' }, answerPath, 'answer=yes'],
      [
        'JSON from a foreign Origin',
        { 'content-type': 'application/json', origin: 'http://evil.example' },
        `/api${answerPath}`,
        '{"answer":"yes"}',
      ],
    ];
    for (const [what, headers, path, body] of refusals) {
      const response = await request(path, { method: 'POST', headers, body });
      assert.equal(response.status, 403, `${what}: ${response.body}`);
    }
    // A foreign name on the explorer's own port (DNS rebinding) and no Host at all (HTTP/1.0) are both refused.
    const port = new URL(explorer.url).port;
    assert.equal((await request('/', { headers: { host: `evil.example:${port}` } })).status, 421);
    const hostless = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.end('GET / HTTP/1.0\r\n\r\n'));
      let reply = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => (reply += chunk));
      socket.on('end', () => resolve(reply));
      socket.on('error', reject);
    });
    assert.match(hostless, /^HTTP\/1\.[01] 421 /);
    // None of the refused answers reached the question: it is still open.
    const [question] = await client.thread(root).questions({ all: true });
    assert.deepEqual([question?.questionId, question?.status, question?.answer], ['q1', 'open', null]);
  });

  test('explorer: the address with the token gives a browser its cookie and the same address without the token', async () => {
    const port = new URL(explorer.url).port;
    const cookieName = `baton-explorer-${port}`;
    const opened = await request(`/threads/${p(root)}?token=${encodeURIComponent(explorer.token)}&x=1`, {
      token: null,
    });
    assert.equal(opened.status, 302, opened.body);
    assert.equal(opened.headers.location, `/threads/${p(root)}?x=1`, 'the same address, without the token');
    assert.deepEqual(opened.headers['set-cookie'], [
      `${cookieName}=${explorer.token}; HttpOnly; SameSite=Strict; Path=/`,
    ]);
    assert.equal(opened.headers['cache-control'], 'no-store');
    const cookie = { cookie: `other=1; ${cookieName}=${explorer.token}` };
    // The cookie serves pages, the API and the streams, as a browser's fetches and EventSource send it.
    assert.equal((await request(`/threads/${p(root)}?x=1`, { token: null, headers: cookie })).status, 200);
    assert.equal((await request('/api/threads', { token: null, headers: cookie })).status, 200);
    const stream = await new Promise<number>((resolve, reject) => {
      const req = http.get(`${explorer.url}/api/threads/${p(root)}/env/stream`, { headers: cookie }, (res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on('error', reject);
    });
    assert.equal(stream, 200);
    // A wrong token gets no cookie; the API takes the token as a header only.
    const wrong = await request(`/?token=${'y'.repeat(43)}`, { token: null });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers['set-cookie'], undefined);
    assert.match(wrong.body, /not this explorer&#39;s token/);
    const inQuery = await request(`/api/threads?token=${encodeURIComponent(explorer.token)}`, { token: null });
    assert.equal(inQuery.status, 401);
    assert.deepEqual(JSON.parse(inQuery.body), {
      error:
        "this explorer needs its token: open the address with '?token=…' that started it printed (a local stack's token is in its state directory's 'token' file), or send 'Authorization: Bearer <token>'",
    });
    assert.equal(
      (await request('/', { token: null, headers: { cookie: `${cookieName}=${'z'.repeat(43)}` } })).status,
      401,
    );
    // `link` is that address.
    assert.equal(explorer.link(`/threads/${p(root)}`), `${explorer.url}/threads/${p(root)}?token=${explorer.token}`);
  });

  test('explorer: a token shorter than 32 characters or with characters a header cannot carry is refused at start', async () => {
    await assert.rejects(startExplorer({ client, port: 0, traceUrl: 'http://jaeger/search' }), {
      message: /the trace URL must hold \{rootThreadId\}/,
    });
    await assert.rejects(startExplorer({ client, port: 0, token: 'short' }), {
      name: 'AccessTokenError',
      message: /the explorer's token is 5 characters long; a token needs at least 32/,
    });
    await assert.rejects(startExplorer({ client, port: 0, token: `${'a'.repeat(40)};x` }), {
      name: 'AccessTokenError',
      message: /holds characters other than/,
    });
  });

  test('explorer: live streams beyond its cap are refused with 503 until one ends', async () => {
    const capped = await startExplorer({ client, port: 0, maxStreams: 1 });
    try {
      const streamPath = `${capped.url}/api/threads/${p(root)}/env/stream`;
      const open = () =>
        new Promise<{ status: number; close: () => void }>((resolve, reject) => {
          const req = http.get(streamPath, { headers: bearer(capped.token) }, (res) => {
            res.resume();
            resolve({ status: res.statusCode ?? 0, close: () => req.destroy() });
          });
          req.on('error', reject);
        });
      const first = await open();
      assert.equal(first.status, 200);
      const second = await open();
      assert.equal(second.status, 503);
      second.close();
      first.close();
      // The first stream's end frees its place (the server notices the closed connection).
      await waitFor('the capped stream to be free again', 10_000, async () => {
        const third = await open();
        third.close();
        return third.status === 200 ? true : undefined;
      });
    } finally {
      await capped.close();
    }
  });

  test('explorer: a missing thread is a 404 page; bad ids, parameters and hosts are refused', async () => {
    const missing = await request('/threads/no-such-thread');
    assert.equal(missing.status, 404);
    assert.match(missing.headers['content-type'] ?? '', /^text\/html/);
    assert.match(flat(missing.body), /thread &#39;no-such-thread&#39; does not exist/);
    assert.equal((await request('/api/threads/no-such-thread')).status, 404);
    const badId = await request(`/threads/${p('<script>')}`);
    assert.equal(badId.status, 400);
    assert.ok(!badId.body.includes('<script>'), 'the refused id is escaped');
    assert.equal((await request(`/threads/${p('a/../../b')}`)).status, 400);
    assert.equal((await request('/threads/%E0%A4%A')).status, 400);
    assert.equal((await request(`/threads/${p(root)}/env?asOf=abc`)).status, 400);
    assert.equal((await request(`/api/threads/${p(root)}/env/value?key=${p('<x>')}`)).status, 400);
    assert.equal((await request(`/api/threads/${p(root)}/env/value?key=nope`)).status, 404);
    assert.equal((await request(`/api/threads/${p(solver)}/env`)).status, 400);
    assert.equal((await request('/nothing')).status, 404);
    assert.equal((await request('/', { headers: { host: 'evil.example:80' } })).status, 421);
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const foreign = await request(`/threads/${p(root)}/questions/q1/answer`, {
      method: 'POST',
      headers: { ...form, origin: 'http://evil.example' },
      body: 'answer=yes',
    });
    assert.equal(foreign.status, 403);
    assert.equal(
      (
        await request(`/threads/${p(root)}/questions/${p('q1<')}/answer`, {
          method: 'POST',
          headers: form,
          body: 'answer=yes',
        })
      ).status,
      400,
    );
    const unknown = await request(`/api/threads/${p(root)}/questions/q99/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"answer":"yes"}',
    });
    assert.equal(unknown.status, 409);
    assert.match(unknown.body, /has no question 'q99'/);
    assert.equal(
      (
        await request(`/api/threads/${p(root)}/questions/q1/answer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"answer":"  "}',
        })
      ).status,
      400,
    );
    const headers = (await request('/')).headers;
    assert.match(String(headers['content-security-policy']), /script-src 'self'/);
  });
});
