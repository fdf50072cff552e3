/**
 * The thread explorer following a real run live, in Chromium (`playwright-core`, Debian's Chromium): a worker with
 * streamed model replies (`modelStream: true`) runs a lead that delegates to a helper, forks a scout and then answers,
 * while the tree and the transcript stay open without a reload. The scripted model holds each step (`hold`) until the
 * page is listening, and holds the end of each streamed reply (`hold_end`), so the streamed text is seen on the page
 * while its reply cannot have been stored yet (the model has not finished it), not by timing; released, the stored
 * reply takes its place. New tree nodes, the fork's group with its task's bar and status, and new transcript entries
 * appear as their steps commit. A browser's own EventSource whose explorer went away resumes with `Last-Event-ID` where
 * it left off, in the middle of one write's events too. A screenshot of the live tree goes to test-artifacts/, and to
 * docs/images/explorer-live.png with `BATON_README_IMAGES=1`.
 *
 * Without Chromium the test is skipped with a notice saying so; under CI (`isCi`) it fails instead.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { ThreadHandle } from '../../client';
import { runEventsOf } from '../../common/run-events';
import type { ThreadScope } from '../../common/types';
import { announceRunEvents, readRunFeed, recordModelCallWaiting } from '../../db/run-events';
import { ensureThread } from '../../db/threads';
import { appendMessage } from '../../db/transcripts';
import { startExplorer, type ExplorerServer } from '../../explorer';
import { parseScript } from '../../scripted-model';
import { isCi } from '../../testing/ci';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { waitFor } from '../chaos/waiting';
import { CHROMIUM_FLAGS, chromiumPath, missingChromium } from '../../testing/chromium';

const ROOT = path.resolve(__dirname, '..', '..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const README_IMAGE = path.join(ROOT, 'docs', 'images', 'explorer-live.png');
/** Long enough for a loaded machine; every wait ends on a state, never on a duration. */
const UI_TIMEOUT_MS = 30_000;

const HELPER_REPLY = 'The grid has <b>three</b> coloured rows, each a copy of the first.';
const LEAD_REPLY = 'Done: the helper read the rows and the scout checked them, so the rule is a threefold copy.';

if (missingChromium) process.stderr.write(`\n*** explorer live browser test: ${missingChromium} ***\n\n`);

const agents: AgentRegistry = new Map(
  (
    [
      ['lead', 'capabilities: [helper, fork_join, scout]'],
      ['helper', ''],
      ['scout', ''],
      ['noted', ''],
    ] as const
  ).map(([name, extra]) => [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name}.\n${extra}\n---\nWork.\n`, `${name}.md`),
  ]),
);
// Each step waits for the test (hold), and each reply's end too (hold_end): the test moves the run on step by step.
const script = parseScript(
  `
agents:
  lead:
    - { call: helper, args: { message: "Read the rows." }, hold: delegate }
    - call: fork_join
      args: { tasks: [ { agent: scout, message: "Check the rows." } ] }
    - { say: ${JSON.stringify(LEAD_REPLY)}, chunk_delay_ms: 20, hold: lead-start, hold_end: lead-end }
  helper:
    - { say: ${JSON.stringify(HELPER_REPLY)}, chunk_delay_ms: 20, hold: helper-start, hold_end: helper-end }
  scout:
    - { say: "Checked.", hold: scout-go }
  noted:
    - say: "Noted."
`,
  'explorer-live.yaml',
);

let harness: AgentHarness | undefined;
let explorer: ExplorerServer | undefined;
let browser: Browser | undefined;

before(async () => {
  if (missingChromium && !isCi()) return;
  assert.ok(chromiumPath, `under CI the browser test must run. ${missingChromium ?? ''}`);
  harness = await startTestHarness('explorer-live', { agents, script, modelStream: true });
  explorer = await startExplorer({ client: harness.client, port: 0 });
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
});

after(async () => {
  await browser?.close();
  await explorer?.close();
  await harness?.close();
});

/**
 * A page of the explorer at `path`, opened as a person opens it (the address with the token, which sets the cookie
 * and comes back without it), once its script follows the run feed; marked, so a reload would show.
 */
async function livePage(path: string): Promise<Page> {
  assert.ok(browser && explorer);
  const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
  await page.goto(explorer.link(path));
  assert.equal(page.url(), `${explorer.url}${path}`, 'the token is gone from the address');
  await page.locator('#run-live.connected').waitFor({ timeout: UI_TIMEOUT_MS });
  await page.evaluate('window.liveTestMarker = 1');
  return page;
}

async function notReloaded(page: Page, what: string): Promise<void> {
  assert.equal(await page.evaluate('window.liveTestMarker'), 1, `${what} was not reloaded`);
}

/** The root thread's status and whether `text` is stored as an assistant message of `threadId` yet. */
async function stored(threadId: string, text: string): Promise<{ status: string; stored: boolean }> {
  assert.ok(harness);
  const { rows } = await harness.pool.query<{ status: string; stored: boolean }>(
    `SELECT t.status, EXISTS (SELECT 1 FROM transcript_messages m
                               WHERE m.thread_id = t.thread_id AND m.role = 'assistant' AND m.content = $2) AS stored
       FROM threads t WHERE t.thread_id = $1`,
    [threadId, text],
  );
  assert.ok(rows[0], `thread ${threadId} exists`);
  return rows[0];
}

test(
  'explorer live: streamed text shows under its thread before the reply is stored, then the stored reply; the tree and the transcript grow without a reload',
  { skip: isCi() ? false : missingChromium, timeout: 240_000 },
  async () => {
    assert.ok(harness && explorer);
    const model = harness.model;
    const root = uniqueThreadId('live');
    const helper = `${root}/helper-1`;
    const thread: ThreadHandle = await harness.client.startThread({ agent: 'lead', threadId: root });
    const posted = await thread.post('Find the rule.');
    // The thread's row is written as its turn starts; the page needs it.
    await waitFor('the thread row', UI_TIMEOUT_MS, async () => {
      const { rows } = (await harness?.pool.query('SELECT 1 FROM threads WHERE thread_id = $1', [root])) ?? {
        rows: [],
      };
      return rows.length === 1 ? true : undefined;
    });

    // The tree, open before the lead delegates: only the lead's card.
    const tree = await livePage(`/threads/${encodeURIComponent(root)}`);
    assert.equal(await tree.locator('#tree .node').count(), 1);

    // The delegation commits: the helper's card appears.
    model.release('delegate');
    const helperCard = tree.locator(`.node[data-thread="${helper}"]`);
    await helperCard.waitFor({ timeout: UI_TIMEOUT_MS });

    // The helper's reply streams; its end is held, so it cannot be stored yet while its text is on the page.
    model.release('helper-start');
    const helperStream = helperCard.locator('.live-stream');
    await helperStream.locator('pre.live-text', { hasText: HELPER_REPLY }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await stored(helper, HELPER_REPLY), { status: 'running', stored: false });
    assert.equal(await helperCard.locator('.live-reply').count(), 0);
    assert.equal(await helperStream.locator('b').count(), 0, 'streamed text is text: its <b> is not markup');
    const boxes = tree.locator('.live-stream');
    const streamBoxes: string[] = [];
    for (let i = 0; i < (await boxes.count()); i++) {
      const box = boxes.nth(i);
      streamBoxes.push(`${await box.getAttribute('data-thread')} ${await box.getAttribute('data-stream')}`);
    }
    assert.deepEqual(
      streamBoxes.map((box) => box.split(' ')[0]),
      [helper],
      `under the thread it belongs to only: ${JSON.stringify(streamBoxes)}`,
    );

    // Released, the stored reply takes the place of the streamed text.
    model.release('helper-end');
    await helperCard.locator('.live-reply pre', { hasText: HELPER_REPLY }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await helperCard.locator('.live-stream').count(), 0);
    await tree.locator(`.node[data-thread="${helper}"][data-status="completed"]`).waitFor({ timeout: UI_TIMEOUT_MS });

    // The lead forks a scout: the fork's group appears with its task's bar, then the task's status when it ends.
    const fork = tree.locator('.fork[data-fork="1"]');
    await fork.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await fork.locator('.timeline .bar').count(), 1);
    model.release('scout-go');
    await fork.locator('table.fork-tasks tbody tr .status', { hasText: 'success' }).waitFor({ timeout: UI_TIMEOUT_MS });
    await fork.locator('.bar.bar-success').waitFor({ timeout: UI_TIMEOUT_MS });

    // The root's transcript, open before the lead's last reply.
    const transcript = await livePage(`/threads/${encodeURIComponent(root)}/transcript`);
    const entriesBefore = await transcript.locator('#transcript li.msg').count();
    model.release('lead-start');
    const leadStream = transcript.locator('#transcript li.live-stream');
    await leadStream.locator('pre.live-text', { hasText: LEAD_REPLY }).waitFor({ timeout: UI_TIMEOUT_MS });
    await tree
      .locator(`.node[data-thread="${root}"] .live-stream pre.live-text`, { hasText: LEAD_REPLY })
      .waitFor({ timeout: UI_TIMEOUT_MS });
    // Before the turn completes: the model has not finished the reply, so nothing of it is stored.
    assert.deepEqual(await stored(root, LEAD_REPLY), { status: 'running', stored: false });
    assert.match(await transcript.locator('#title').innerText(), /running/);
    assert.equal(
      await transcript.locator('#transcript li.msg:not(.live-stream)', { hasText: LEAD_REPLY }).count(),
      0,
      'the stored message is not there yet',
    );
    await tree.locator(`.node[data-thread="${root}"]`).scrollIntoViewIfNeeded();
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await tree.screenshot({ path: path.join(ARTIFACTS, 'explorer-live-tree.png') });
    await transcript.screenshot({ path: path.join(ARTIFACTS, 'explorer-live-transcript.png') });
    if (process.env.BATON_README_IMAGES === '1') {
      fs.mkdirSync(path.dirname(README_IMAGE), { recursive: true });
      await tree.locator('#tree').screenshot({ path: README_IMAGE });
    }

    // Released: the stored message replaces the streamed one in the transcript and on the tree; the turn completes.
    model.release('lead-end');
    const storedEntry = transcript.locator('#transcript li.msg.role-assistant:not(.live-stream)', {
      hasText: LEAD_REPLY,
    });
    await storedEntry.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await leadStream.count(), 0, 'the streamed text is gone');
    assert.ok((await transcript.locator('#transcript li.msg').count()) > entriesBefore, 'new entries appeared');
    assert.equal((await thread.reply(posted.messageId, { waitMs: UI_TIMEOUT_MS }))?.reply, LEAD_REPLY);
    await transcript.locator('#title .status', { hasText: 'completed' }).waitFor({ timeout: UI_TIMEOUT_MS });
    await tree
      .locator(`.node[data-thread="${root}"] .live-reply pre`, { hasText: LEAD_REPLY })
      .waitFor({ timeout: UI_TIMEOUT_MS });
    await tree.locator(`.node[data-thread="${root}"][data-status="completed"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await tree.locator('.live-stream').count(), 0);
    await notReloaded(tree, 'the tree');
    await notReloaded(transcript, 'the transcript');
  },
);

test(
  'explorer live: a browser EventSource whose connection ends resumes with Last-Event-ID: every stored event once, in order',
  { skip: isCi() ? false : missingChromium, timeout: 120_000 },
  async () => {
    assert.ok(harness && browser);
    const pool = harness.pool;
    const root = uniqueThreadId('resume');
    const scope: ThreadScope = { rootThreadId: root, threadId: root, agent: 'lead', epoch: 0 };
    await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
    const storedIds = async () =>
      (await readRunFeed(pool, root, { limit: 10_000 })).flatMap((row) => runEventsOf(row).map((event) => event.id));
    // The last write before the connection ends has four events: the browser's last id is then `<seq>.3`.
    await appendMessage(pool, scope, `${root}:m1`, { role: 'user', content: 'One.' });
    await appendMessage(pool, scope, `${root}:m2`, {
      role: 'assistant',
      content: 'Two calls.',
      toolCalls: [
        { id: 'c1', name: 'think', arguments: '{}' },
        { id: 'c2', name: 'think', arguments: '{}' },
      ],
    });
    const before = await storedIds();
    assert.match(before.at(-1) ?? '', /^\d+\.3$/);

    let server = await startExplorer({ client: harness.client, port: 0 });
    const port = new URL(server.url).port;
    const page = await browser.newPage();
    try {
      await page.goto(server.link('/'));
      // An EventSource of the page's own, recording the id of every event it gets.
      await page.evaluate(`(() => {
        window.feedIds = [];
        window.feedOpens = 0;
        const source = new EventSource('/api/threads/${encodeURIComponent(root)}/events');
        source.onopen = () => { window.feedOpens += 1; };
        source.onmessage = (message) => { const event = JSON.parse(message.data); if (event.id) window.feedIds.push(event.id); };
      })()`);
      const ids = () => page.evaluate<string[]>('window.feedIds');
      await waitFor(`event ${before.at(-1)} in the page`, UI_TIMEOUT_MS, async () =>
        (await ids()).includes(before.at(-1) ?? '') ? true : undefined,
      );
      assert.deepEqual(await ids(), before);

      // The explorer goes away (its streams end) and comes back on the same port after more events committed.
      await server.close();
      await appendMessage(pool, scope, `${root}:m3`, { role: 'tool', toolCallId: 'c1', content: 'ok' });
      await appendMessage(pool, scope, `${root}:m4`, { role: 'tool', toolCallId: 'c2', content: 'ok' });
      // The same token: the page's cookie (and so its EventSource) is still good.
      server = await startExplorer({ client: harness.client, port: Number(port), token: server.token });
      announceRunEvents(pool, root);
      const all = await storedIds();
      await waitFor(`event ${all.at(-1)} in the page`, UI_TIMEOUT_MS, async () =>
        (await ids()).includes(all.at(-1) ?? '') ? true : undefined,
      );
      assert.ok((await page.evaluate<number>('window.feedOpens')) >= 2, 'the EventSource reconnected');
      assert.deepEqual(await ids(), all, 'each stored event once, in order, across the reconnection');
    } finally {
      await page.close();
      await server.close();
    }
  },
);

test(
  'explorer live: a watcher added to an open root page shows in its Watchers section without a reload, and so does its removal',
  { skip: isCi() ? false : missingChromium, timeout: 120_000 },
  async () => {
    assert.ok(harness && explorer);
    const root = uniqueThreadId('watched');
    const thread = await harness.client.startThread({ agent: 'noted', threadId: root });
    await thread.send('Hello.');
    const page = await livePage(`/threads/${encodeURIComponent(root)}`);
    assert.equal(await page.locator('#watchers').count(), 0, 'no Watchers section before there is a watcher');
    await thread.addWatcher({ agent: 'noted', keys: ['notes/*'], debounceS: 0 });
    const card = page.locator('#watchers .watcher[data-watcher="noted"]');
    await card.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await card.innerText(), /active/);
    await thread.removeWatcher('noted', { by: 'the browser test' });
    await card.locator('text=removed by the browser test').waitFor({ timeout: UI_TIMEOUT_MS });
    await notReloaded(page, 'the root page');
    await page.close();
  },
);

test(
  'explorer live: a call waiting for capacity shows on the tree and the transcript until its reply is stored',
  { skip: isCi() ? false : missingChromium, timeout: 120_000 },
  async () => {
    assert.ok(harness);
    const pool = harness.pool;
    const root = uniqueThreadId('waiting');
    const scope: ThreadScope = { rootThreadId: root, threadId: root, agent: 'lead', epoch: 0 };
    await ensureThread(pool, { threadId: root, rootThreadId: root, agent: 'lead' });
    await appendMessage(pool, scope, `${root}:in`, { role: 'user', content: 'Go.' });
    const pages = await Promise.all([
      livePage(`/threads/${encodeURIComponent(root)}`),
      livePage(`/threads/${encodeURIComponent(root)}/transcript`),
    ]);
    // What a worker's model call writes while it waits for room (activities/model.ts), then its stored reply.
    const operationId = `${root}:model:0`;
    await recordModelCallWaiting(pool, {
      rootThreadId: root,
      threadId: root,
      agent: 'lead',
      operationId,
      step: 0,
      scope: 'default',
      reason: '2 call(s) at once',
    });
    for (const page of pages) {
      const line = page.locator('.live-waiting');
      await line.waitFor({ timeout: UI_TIMEOUT_MS });
      assert.match(await line.innerText(), /waiting for capacity \(lead\) · default: 2 call\(s\) at once/);
    }
    await appendMessage(pool, scope, operationId, { role: 'assistant', content: 'Room at last.' });
    for (const [index, page] of pages.entries()) {
      await page.locator('.live-waiting').waitFor({ state: 'detached', timeout: UI_TIMEOUT_MS });
      await notReloaded(page, index === 0 ? 'the tree' : 'the transcript');
      await page.close();
    }
  },
);
