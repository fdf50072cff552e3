/**
 * Approvals in the thread explorer, over HTTP against a real worker: a `deploy` user tool that needs approval waits
 * in its turn, the explorer lists it at the root of its tree (arguments escaped) and next to its call in the
 * transcript, and its forms and JSON API decide it through the SDK: approved from a delegated thread's transcript,
 * rejected with a reason over the API, rejected from the tree; an expired approval shows in the history and cannot
 * be decided; bad input is refused and leaves the approval waiting, and so does every request without the explorer's
 * token.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import type { ThreadHandle } from '../../client';
import { defineTool } from '../../activities/tools/types';
import { MAX_APPROVAL_REASON_CHARS } from '../../common/types';
import type { ApprovalRow } from '../../db/approvals';
import { listMessages } from '../../db/transcripts';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { settle, waitFor } from '../chaos/waiting';
import { explorerHttp, flat, textOf, type Fetched } from './explorer-http';

const SCRIPT = '<script>alert(1)</script>';
const SCRIPT_ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt;';

/** The services `deploy` really deployed. */
const deployed: string[] = [];
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service to production.',
  parameters: z.object({ service: z.string() }),
  sideEffects: true,
  needsApproval: true,
  run: ({ service }) => {
    deployed.push(service);
    return `deployed ${service}`;
  },
});

function agent(name: string, fields: string): [string, ReturnType<typeof parseAgentFile>] {
  return [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name} agent.\n${fields}\n---\nYou act.\n`, name),
  ];
}

const agents: AgentRegistry = new Map([
  agent('shipper', 'capabilities: [deploy]'),
  agent('lead', 'capabilities: [shipper]'),
  agent('reader', 'capabilities: [load_arc_task]\napproval: [{ tool: load_arc_task, timeout_s: 2 }]'),
]);

const script = parseScript(
  `
agents:
  shipper:
    - { call: deploy, args: { service: ${JSON.stringify(SCRIPT)} } }
    - say: "Shipped."
  lead:
    - { call: shipper, args: { message: "Ship it." } }
    - say: "The shipper is done."
  reader:
    - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - say: "Nobody let me read it."
`,
  'explorer-approvals',
);

let harness: AgentHarness;
let explorer: ExplorerServer;
const { request, json, markup, page } = explorerHttp(() => explorer);
const p = (id: string) => encodeURIComponent(id);
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_BODY = { 'content-type': 'application/json' };

before(async () => {
  harness = await startTestHarness('explorer-approvals', { agents, script, tools: [deploy] });
  explorer = await startExplorer({ client: harness.client, port: 0 });
});

after(async () => {
  await explorer?.close();
  await harness?.close();
});

/** Waits until the tree of `thread` has a pending approval, and returns it. */
async function pendingApproval(thread: ThreadHandle): Promise<ApprovalRow> {
  return waitFor(`a pending approval in ${thread.threadId}`, 60_000, async () => (await thread.approvals())[0]);
}

/** Posts the decision form as the explorer's own page does (same origin). */
function postForm(path: string, fields: Record<string, string>) {
  return request(path, {
    method: 'POST',
    headers: { ...FORM, origin: explorer.url },
    body: new URLSearchParams(fields).toString(),
  });
}

/** The result recorded for the call `toolCallId` of `threadId`. */
async function resultOf(threadId: string, toolCallId: string): Promise<string | null | undefined> {
  const messages = await listMessages(harness.pool, threadId);
  return messages.find((message) => message.toolCallId === toolCallId)?.content;
}

test('explorer approvals: a delegated call waits at the root, its arguments escaped, and is approved next to the call', async () => {
  const root = uniqueThreadId('xa-approve');
  const shipper = `${root}/shipper-1`;
  const thread = await harness.client.startThread({ agent: 'lead', threadId: root });
  const sending = settle(thread.send('Get it shipped.'));
  const pending = await pendingApproval(thread);
  assert.equal(pending.threadId, shipper);

  const overview = await markup(`/threads/${p(root)}`);
  const section = /<section id="approvals">(.*?)<\/section>/s.exec(overview)?.[1] ?? '';
  const card = /<div class="approval" data-approval="a1"(.*?)<form/s.exec(section)?.[0] ?? '';
  assert.match(textOf(section), /^Approvals waiting a1: /);
  assert.match(
    textOf(card),
    new RegExp(`^a1: shipper \\(${shipper}\\) wants to call deploy, requested [-0-9: ]+ \\(\\d+ s ago\\):`),
    'the agent, its thread, the tool and the age of the request',
  );
  assert.ok(card.includes(`data-thread="${shipper}"`));
  assert.ok(card.includes(`href="/threads/${p(shipper)}/transcript#m${pending.messageSeq}"`), 'a link to the call');
  assert.ok(
    card.includes(`<pre class="arguments">{\n  &quot;service&quot;: &quot;${SCRIPT_ESCAPED}&quot;\n}</pre>`),
    'the arguments pretty-printed and escaped',
  );
  assert.ok(!overview.includes(SCRIPT), 'no stored value reaches the page unescaped');
  const form = flat(section);
  assert.ok(form.includes(`<form class="decide" method="post" action="/threads/${p(root)}/approvals/a1/approve"`));
  assert.ok(form.includes(`formaction="/threads/${p(root)}/approvals/a1/reject">Reject</button>`));
  assert.ok(form.includes('<button type="submit" class="approve">Approve</button>'));
  assert.ok(form.includes('<input type="hidden" name="from" value="tree" />'));
  const listed = (await json('/api/threads')) as { threadId: string; pendingApprovals: number }[];
  assert.equal(listed.find((row) => row.threadId === root)?.pendingApprovals, 1);
  const front = /<tr data-thread="([^"]+)">.*?<\/tr>/gs;
  const row = [...(await markup('/')).matchAll(front)].find((match) => match[1] === root)?.[0] ?? '';
  assert.match(textOf(row), new RegExp(`^${root} 1 to approve lead`), 'a badge on the front page');

  const api = (await json(`/api/threads/${p(root)}/approvals`)) as ApprovalRow[];
  assert.deepEqual(
    api.map((row) => [row.approvalId, row.status, row.threadId, row.tool, JSON.parse(row.arguments) as unknown]),
    [['a1', 'pending', shipper, 'deploy', { service: SCRIPT }]],
  );

  const transcript = await markup(`/threads/${p(shipper)}/transcript`);
  const call = /<div class="tool-call" data-call="([^"]+)">(.*?)<\/li>/s.exec(transcript);
  assert.equal(call?.[1], pending.toolCallId);
  assert.match(textOf(call?.[2] ?? ''), /pending a1: this call waits for a person's approval, requested /);
  const next = flat(call?.[2] ?? '');
  assert.ok(next.includes(`<form class="decide" method="post" action="/threads/${p(root)}/approvals/a1/approve"`));
  assert.ok(next.includes('<input type="hidden" name="from" value="transcript" />'), 'Approve and Reject next to it');

  const approved = await postForm(`/threads/${p(root)}/approvals/a1/approve`, {
    from: 'transcript',
    by: 'alice',
    reason: '',
  });
  assert.equal(approved.status, 303, approved.body);
  assert.equal(approved.headers.location, `/threads/${p(shipper)}/transcript#m${pending.messageSeq}`);
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(outcome.value.reply, 'The shipper is done.');
  assert.equal(await resultOf(shipper, pending.toolCallId), `deployed ${SCRIPT}`);
  assert.equal(deployed.filter((service) => service === SCRIPT).length, 1, 'deployed once');

  const after = await markup(`/threads/${p(shipper)}/transcript`);
  const note = /<div class="approval-note" data-approval="a1">(.*?)<\/div>/s.exec(after)?.[1] ?? '';
  assert.match(note, /status-approved/);
  assert.match(textOf(note), /^approved a1: approved by alice \(in the explorer\) · [-0-9: ]+$/);
  assert.doesNotMatch(after, /<form class="decide"/);
  const history = await page(`/threads/${p(root)}`);
  assert.match(history, /<p class="muted" id="no-approvals">No tool call is waiting for approval\.<\/p>/);
  assert.match(
    history,
    /<tr data-approval="a1">.*?<td><span class="status status-approved">approved<\/span><\/td><td>alice \(in the explorer\)<\/td><td><\/td>/,
  );
  const all = (await json(`/api/threads/${p(root)}/approvals?all=1`)) as ApprovalRow[];
  assert.deepEqual(
    all.map((row) => [row.approvalId, row.status, row.decidedBy]),
    [['a1', 'approved', 'alice (in the explorer)']],
  );
  assert.deepEqual(await json(`/api/threads/${p(root)}/approvals`), []);

  const again = await postForm(`/threads/${p(root)}/approvals/a1/reject`, { reason: 'too late' });
  assert.equal(again.status, 409);
  assert.match(again.headers['content-type'] ?? '', /^text\/html/);
  assert.match(flat(again.body), /approval &#39;a1&#39; is already approved by alice \(in the explorer\)/);
  const againApi = await request(`/api/threads/${p(root)}/approvals/a1/approve`, { method: 'POST' });
  assert.equal(againApi.status, 409);
  assert.deepEqual(JSON.parse(againApi.body), {
    error: "approval 'a1' is already approved by alice (in the explorer)",
  });
  assert.equal(deployed.filter((service) => service === SCRIPT).length, 1, 'still deployed once');
});

test('explorer approvals: a rejection over the JSON API reaches the agent with its reason, shown escaped', async () => {
  const root = uniqueThreadId('xa-reject');
  const thread = await harness.client.startThread({ agent: 'shipper', threadId: root });
  const sending = settle(thread.send('Ship it.'));
  const pending = await pendingApproval(thread);
  const ranBefore = deployed.length;
  const reason = 'not on a <b>Friday</b>';
  const rejected = await request(`/api/threads/${p(root)}/approvals/a1/reject`, {
    method: 'POST',
    headers: JSON_BODY,
    body: JSON.stringify({ by: 'bob', reason }),
  });
  assert.equal(rejected.status, 200, rejected.body);
  assert.deepEqual(JSON.parse(rejected.body), { approvalId: 'a1', status: 'rejected' });
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(
    await resultOf(root, pending.toolCallId),
    `Error: bob (in the explorer) rejected this call of 'deploy', so it did not run. Reason: ${reason}`,
  );
  assert.equal(deployed.length, ranBefore, 'the rejected call never ran');
  const transcript = await markup(`/threads/${p(root)}/transcript`);
  assert.match(
    textOf(transcript),
    /rejected a1: rejected by bob \(in the explorer\): not on a <b>Friday<\/b> · /,
    'the outcome by the call',
  );
  assert.ok(
    transcript.includes('rejected by bob (in the explorer): not on a &lt;b&gt;Friday&lt;/b&gt;'),
    'the reason, escaped',
  );
  assert.ok(!transcript.includes('<b>Friday'));
  const row = (await json(`/api/threads/${p(root)}/approvals/a1`)) as ApprovalRow;
  assert.deepEqual([row.status, row.decidedBy, row.reason], ['rejected', 'bob (in the explorer)', reason]);
});

test('explorer approvals: an expired approval shows in the history and can no longer be decided', async () => {
  const root = uniqueThreadId('xa-expired');
  const thread = await harness.client.startThread({ agent: 'reader', threadId: root });
  assert.equal((await thread.send('Read the task.')).reply, 'Nobody let me read it.');
  const overview = await page(`/threads/${p(root)}`);
  assert.match(overview, /<summary>1 decided, expired or cancelled<\/summary>/);
  assert.match(
    overview,
    /<tr data-approval="a1">.*?<td><code>load_arc_task<\/code><\/td>.*?<span class="status status-expired">expired<\/span>/,
  );
  const transcript = await markup(`/threads/${p(root)}/transcript`);
  assert.match(textOf(transcript), /expired a1: expired: nobody decided in time, so it did not run/);
  const late = await postForm(`/threads/${p(root)}/approvals/a1/approve`, { by: 'carol' });
  assert.equal(late.status, 409);
  assert.match(flat(late.body), /approval &#39;a1&#39; is already expired/);
});

test('explorer approvals: bad ids, bad fields and cross-site posts are refused, and the approval still waits', async () => {
  const root = uniqueThreadId('xa-refused');
  const thread = await harness.client.startThread({ agent: 'shipper', threadId: root });
  const sending = settle(thread.send('Ship it.'));
  const pending = await pendingApproval(thread);
  const base = `/api/threads/${p(root)}/approvals`;
  const post = (path: string, headers: Record<string, string>, body?: string) =>
    request(path, { method: 'POST', headers, ...(body === undefined ? {} : { body }) });
  const refusals: [string, Promise<{ status: number; body: string }>, number, RegExp][] = [
    ['bad approval id', post(`${base}/a1x/approve`, JSON_BODY, '{}'), 400, /'a1x' is not an approval id/],
    ['unknown approval', post(`${base}/a99/approve`, JSON_BODY, '{}'), 404, /has no approval 'a99'/],
    [
      'unknown thread',
      post('/api/threads/no-such-thread/approvals/a1/approve', JSON_BODY, '{}'),
      404,
      /does not exist/,
    ],
    ['a GET', request(`${base}/a1/approve`), 405, /send the decision with POST/],
    ['unknown decision', post(`${base}/a1/maybe`, JSON_BODY, '{}'), 404, /nothing at/],
    [
      'a form from another site',
      post(`/threads/${p(root)}/approvals/a1/approve`, { ...FORM, origin: 'http://evil.example' }, 'by=mallory'),
      403,
      /another site/,
    ],
    [
      'a cross-site fetch',
      post(`${base}/a1/approve`, { ...JSON_BODY, 'sec-fetch-site': 'cross-site' }, '{}'),
      403,
      /cross-site/,
    ],
    ['a foreign Host', post(`${base}/a1/approve`, { ...JSON_BODY, host: 'evil.example:80' }, '{}'), 421, /answers to/],
    [
      'a too long reason',
      post(`${base}/a1/reject`, JSON_BODY, JSON.stringify({ reason: 'x'.repeat(MAX_APPROVAL_REASON_CHARS + 1) })),
      400,
      /'reason' is longer than 2000 characters/,
    ],
    ['a name that is not text', post(`${base}/a1/approve`, JSON_BODY, '{"by": 7}'), 400, /'by' must be text/],
    ['a bad origin page', post(`${base}/a1/approve`, FORM, 'from=elsewhere'), 400, /'from' must be/],
    ['a JSON array', post(`${base}/a1/approve`, JSON_BODY, '[]'), 400, /must be a JSON object/],
    ['not JSON', post(`${base}/a1/approve`, JSON_BODY, '{by'), 400, /not JSON/],
    ['plain text', post(`${base}/a1/approve`, { 'content-type': 'text/plain' }, 'yes'), 415, /as a form or as JSON/],
    ['a huge body', post(`${base}/a1/reject`, FORM, `reason=${'x'.repeat(70_000)}`), 413, /larger than 65536 bytes/],
    ['a bad all', request(`${base}?all=maybe`), 400, /all must be 1 or 0/],
  ];
  for (const [what, response, status, message] of refusals) {
    const { status: got, body } = await response;
    assert.equal(got, status, `${what}: ${body}`);
    assert.match(body, message, what);
  }
  const scriptId = await post(`/threads/${p(root)}/approvals/${p('<script>')}/approve`, FORM, 'by=x');
  assert.equal(scriptId.status, 400);
  assert.ok(!scriptId.body.includes('<script>'), 'the refused id is escaped');
  assert.equal((await request(`/threads/${p(root)}/approvals`)).headers.location, `/threads/${p(root)}#approvals`);

  const still = (await json(base)) as ApprovalRow[];
  assert.deepEqual(
    still.map((row) => [row.approvalId, row.status]),
    [['a1', 'pending']],
    'nothing refused decided it',
  );

  // Rejected from the tree with no name and no reason: the explorer decides as "a person in the explorer".
  const rejected = await postForm(`/threads/${p(root)}/approvals/a1/reject`, { from: 'tree', by: ' ', reason: '' });
  assert.equal(rejected.status, 303, rejected.body);
  assert.equal(rejected.headers.location, `/threads/${p(root)}#approvals`);
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(
    await resultOf(root, pending.toolCallId),
    "Error: a person in the explorer rejected this call of 'deploy', so it did not run.",
  );
});

test('explorer approvals: a request without the token (any process of this machine, a shell command among them) lists nothing and decides nothing', async () => {
  const root = uniqueThreadId('xa-token');
  const thread = await harness.client.startThread({ agent: 'shipper', threadId: root });
  const sending = settle(thread.send('Ship it.'));
  const pending = await pendingApproval(thread);
  const row = async () =>
    (await harness.pool.query('SELECT * FROM approvals WHERE root_thread_id = $1', [root])).rows as unknown[];
  const before = await row();
  const ranBefore = deployed.length;
  const approve = `/threads/${p(root)}/approvals/a1/approve`;
  const wrong = 'x'.repeat(43);
  const refused: [string, Promise<Fetched>][] = [
    ['a JSON approval', request(`/api${approve}`, { method: 'POST', token: null, headers: JSON_BODY, body: '{}' })],
    [
      'a form as the page posts it',
      request(approve, { method: 'POST', token: null, headers: { ...FORM, origin: explorer.url }, body: 'by=me' }),
    ],
    ['a wrong token', request(`/api${approve}`, { method: 'POST', token: wrong, headers: JSON_BODY, body: '{}' })],
    [
      'the token in the address of a post',
      request(`${approve}?token=${explorer.token}`, { method: 'POST', token: null, headers: FORM, body: 'by=me' }),
    ],
    [
      'a cookie of another explorer',
      request(`/api${approve}`, {
        method: 'POST',
        token: null,
        headers: { ...JSON_BODY, cookie: `baton-explorer-1=${explorer.token}` },
        body: '{}',
      }),
    ],
    ['the thread list, which names approvals', request('/api/threads', { token: null })],
    ['the approvals', request(`/api/threads/${p(root)}/approvals`, { token: null })],
    ['the front page', request('/', { token: null })],
    ['the tree', request(`/threads/${p(root)}`, { token: null })],
  ];
  for (const [what, response] of refused) {
    const { status, headers, body } = await response;
    assert.equal(status, 401, `${what}: ${body}`);
    assert.match(body, /needs its token/, what);
    assert.doesNotMatch(body, new RegExp(root), `${what}: nothing of the thread in the refusal`);
    assert.equal(headers['www-authenticate'], 'Bearer realm="Baton explorer"', what);
  }
  const live = await request(`/api/threads/${p(root)}/events`, { token: null });
  assert.equal(live.status, 401, 'the run feed too');

  assert.deepEqual(await row(), before, 'the approval row is as it was');
  assert.equal(deployed.length, ranBefore, 'nothing ran');
  assert.equal((await thread.approvals())[0]?.status, 'pending');

  // With the token, the same request decides it.
  const approved = await request(`/api${approve}`, { method: 'POST', headers: JSON_BODY, body: '{"by":"dana"}' });
  assert.equal(approved.status, 200, approved.body);
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(await resultOf(root, pending.toolCallId), `deployed ${SCRIPT}`);
  assert.equal(
    ((await json(`/api/threads/${p(root)}/approvals/a1`)) as ApprovalRow).decidedBy,
    'dana (in the explorer)',
    'the name given, and that it came through the explorer',
  );
});

test('explorer approvals: the approvals of a delegation thread are those of its root', async () => {
  const root = uniqueThreadId('xa-child');
  const thread = await harness.client.startThread({ agent: 'lead', threadId: root });
  const sending = settle(thread.send('Get it shipped.'));
  const pending = await pendingApproval(thread);
  const listed = await request(`/api/threads/${p(pending.threadId)}/approvals`);
  assert.equal(listed.status, 400);
  assert.match(
    listed.body,
    /is a delegation thread; its questions, approvals and environment data are those of root thread/,
  );
  const decided = await request(`/api/threads/${p(pending.threadId)}/approvals/a1/approve`, { method: 'POST' });
  assert.equal(decided.status, 400);
  assert.equal((await request(`/api/threads/${p(root)}/approvals/a1/approve`, { method: 'POST' })).status, 200);
  const outcome = await sending;
  if (!outcome.ok) throw outcome.error;
  assert.equal(
    ((await json(`/api/threads/${p(root)}/approvals/a1`)) as ApprovalRow).decidedBy,
    'a person in the explorer',
  );
});
