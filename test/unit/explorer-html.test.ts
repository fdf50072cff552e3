import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { escapeHtml, exposedHostWarning, validThreadId } from '../../explorer';
import { html } from '../../explorer/html';
import type { ApprovalRow } from '../../db/approvals';
import {
  compactJson,
  outcomeText,
  prettyJson,
  splitPreamble,
  versionChange,
  wakeupLabel,
  workflowUrl,
} from '../../explorer/pages';

test('explorer html: every interpolated value is escaped; markup built by html`` is kept', () => {
  const value = `<script>alert("x" + 'y') && 1</script>`;
  assert.equal(escapeHtml(value), '&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;) &amp;&amp; 1&lt;/script&gt;');
  const inner = html`<b>${value}</b>`;
  assert.equal(
    html`<p title="${value}">${inner}${[value, 1]}${null}${undefined}${false}</p>`.text,
    `<p title="${escapeHtml(value)}"><b>${escapeHtml(value)}</b>${escapeHtml(value)}1</p>`,
  );
});

test('explorer ids: thread ids in URLs are segments of the thread-id pattern joined by /', () => {
  for (const id of ['arc-1', 'arc-1/solver-1', 'a.b_c/observer-12']) assert.ok(validThreadId(id), id);
  for (const id of ['', '/', 'a/', '/a', 'a//b', '..', 'a/../b', '<script>', 'a b', 'a/b/c/d/e', 'x'.repeat(65)]) {
    assert.equal(validThreadId(id), false, id);
  }
});

test('explorer transcript: the delegation preamble is split from the caller’s words', () => {
  const preamble = '---\n[Delegation Context]\nCalled by: solver\n---';
  assert.deepEqual(splitPreamble(`${preamble}\n\nWhat do you see?`), { preamble, message: 'What do you see?' });
  assert.deepEqual(splitPreamble('Hello'), { message: 'Hello' });
  assert.deepEqual(splitPreamble('---\n[Delegation Context]\nno end'), {
    message: '---\n[Delegation Context]\nno end',
  });
});

test('explorer JSON: objects and arrays are pretty-printed with rows of plain values on one line; other text is not', () => {
  assert.equal(
    compactJson({
      grid: [
        [0, 7],
        [7, 0],
      ],
      name: 'x',
      empty: {},
      list: [],
    }),
    '{\n  "grid": [\n    [0, 7],\n    [7, 0]\n  ],\n  "name": "x",\n  "empty": {},\n  "list": []\n}',
  );
  assert.equal(prettyJson('{"a":[1,2]}'), '{\n  "a": [1, 2]\n}');
  assert.equal(prettyJson('Error: no such file'), undefined);
  assert.equal(prettyJson('{not json'), undefined);
  assert.equal(prettyJson('42'), undefined);
});

test('explorer approvals: how an approval ended, in the words shown by its call and in a refusal', () => {
  const row = (fields: Partial<ApprovalRow>) => ({ decidedBy: null, reason: null, ...fields }) as ApprovalRow;
  assert.equal(outcomeText(row({ status: 'approved', decidedBy: 'alice' })), 'approved by alice');
  assert.equal(outcomeText(row({ status: 'rejected', decidedBy: 'bob' })), 'rejected by bob');
  assert.equal(
    outcomeText(row({ status: 'rejected', decidedBy: 'bob', reason: 'not on a Friday' })),
    'rejected by bob: not on a Friday',
  );
  assert.equal(outcomeText(row({ status: 'expired' })), 'expired: nobody decided in time, so it did not run');
  assert.equal(
    outcomeText(row({ status: 'cancelled', reason: 'its turn was stopped' })),
    'cancelled (its turn was stopped)',
  );
  assert.equal(outcomeText(row({ status: 'pending' })), 'waiting for a decision');
});

test('explorer watchers: a wake-up is named by its watcher and number, a change by its versions', () => {
  assert.equal(wakeupLabel({ watcher: 'reviewer', number: 2, depth: 1 }), 'watcher reviewer, wake-up 2');
  assert.equal(wakeupLabel({ watcher: 'reviewer', number: 3, depth: 2 }), 'watcher reviewer, wake-up 3 (depth 2)');
  assert.equal(versionChange({ oldVersion: null, newVersion: 1 }), 'v0→1');
  assert.equal(versionChange({ oldVersion: 1, newVersion: 2 }), 'v1→2');
  assert.equal(versionChange({ oldVersion: 2, newVersion: null }), 'v2→deleted');
});

test('explorer links: a workflow opens at <uiUrl>/namespaces/<ns>/workflows/<id>, encoded; no UI, no link', () => {
  const context = { uiUrl: 'http://127.0.0.1:8233/', namespace: 'default', now: new Date() };
  assert.equal(
    workflowUrl(context, 'baton/arc-1/solver-1'),
    'http://127.0.0.1:8233/namespaces/default/workflows/baton%2Farc-1%2Fsolver-1',
  );
  assert.equal(workflowUrl({ ...context, uiUrl: undefined }, 'baton/arc-1'), undefined);
});

test('explorer host: listening beyond loopback warns that the token crosses the network in clear', () => {
  assert.equal(exposedHostWarning('127.0.0.1'), undefined);
  assert.equal(exposedHostWarning('localhost'), undefined);
  assert.match(exposedHostWarning('0.0.0.0') ?? '', /over plain HTTP; its token .* cross the network in clear/);
});

test('explorer imports: workflows/ and activities/ never import the explorer', () => {
  const root = path.resolve(__dirname, '..', '..');
  const files = ['workflows', 'activities'].flatMap((dir) =>
    fs
      .readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts'))
      .map((file) => path.join(dir, file)),
  );
  assert.ok(files.length > 5, 'the folders were read');
  const importing = files.filter((file) =>
    /from '(\.\.\/)+explorer[/']/.test(fs.readFileSync(path.join(root, file), 'utf8')),
  );
  assert.deepEqual(importing, []);
});
