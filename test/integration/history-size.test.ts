/**
 * "History stays small" (invariant 6), checked on the histories this run produces rather than on committed files: a
 * conversation loads an ARC task, stores a 48 KiB value and delegates; no payload of any of its workflows may carry
 * the task's grids or the value, and the largest stays far below Temporal's limits. A change that put an ARC task or
 * a stored value into history fails here.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile } from '../../worker/agents';

/** A row of the ARC task's grids as it appears in the task's JSON (and would, in a payload that carried it). */
const ARC_ROW = '[0,0,0,0,7,7,0,7,7]';
const BIG_MARKER = 'history-must-not-carry-this-';
const BIG_VALUE = BIG_MARKER.repeat(Math.ceil((48 * 1024) / BIG_MARKER.length));

const lead = parseAgentFile(
  '---\nname: lead\ndescription: Leads.\ncapabilities: [load_arc_task, helper]\n---\nLead.\n',
  'lead.md',
);
const helper = parseAgentFile('---\nname: helper\ndescription: Helps.\n---\nHelp.\n', 'helper.md');
let harness: AgentHarness;

before(async () => {
  const script = {
    agents: {
      lead: [
        { call: 'load_arc_task', args: { task_id: '007bbfb7' } },
        { call: 'store_env_data', args: { key: 'big', short_description: 'A large value.', value: BIG_VALUE } },
        { call: 'helper', args: { message: 'Read big and say done.', context_keys: ['big'] } },
        { say: 'All done.' },
      ],
      helper: [{ call: 'get_env_data', args: { key: 'big' } }, { say: 'done' }],
    },
  };
  harness = await startTestHarness('history-size', {
    agents: new Map([
      ['lead', lead],
      ['helper', helper],
    ]),
    script: parseScript(JSON.stringify(script), 'history-size'),
  });
});

after(() => harness?.close());

/** Sizes and texts of every payload in a history (inputs, results, updates, search attributes, summaries). */
function collectPayloads(
  value: unknown,
  found: { size: number; text: string }[] = [],
): { size: number; text: string }[] {
  if (value === null || typeof value !== 'object') return found;
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && 'metadata' in record) {
    found.push({ size: record.data.length, text: Buffer.from(record.data).toString('utf8').replace(/\s/g, '') });
    return found;
  }
  for (const child of Object.values(record)) collectPayloads(child, found);
  return found;
}

test('history size: no payload of a real conversation carries an ARC task or a stored value', async () => {
  const threadId = uniqueThreadId('history');
  const thread = await harness.client.startThread({ agent: 'lead', threadId });
  assert.equal((await thread.send('Load the task and hand it on.')).reply, 'All done.');
  // The grids did flow through the conversation (in Postgres), so their absence from history means something.
  const transcript = await thread.transcript();
  assert.ok(transcript.some((message) => (message.content ?? '').replace(/\s/g, '').includes(ARC_ROW)));
  const tree = await thread.tree();
  assert.equal(tree.children.length, 1, 'the helper ran as a delegation');

  // Every workflow of the conversation, found by Baton's search attribute (visibility may lag a moment).
  let workflowIds: string[] = [];
  for (const deadline = Date.now() + 30_000; workflowIds.length < 3; await new Promise((r) => setTimeout(r, 250))) {
    workflowIds = [];
    for await (const execution of harness.client.temporal.workflow.list({
      query: `BatonRootThreadId = "${threadId}"`,
    })) {
      workflowIds.push(execution.workflowId);
    }
    assert.ok(Date.now() < deadline, `found only ${workflowIds.join(', ')}`);
  }

  let largest = { size: 0, where: '' };
  let payloads = 0;
  for (const workflowId of workflowIds) {
    const history = await harness.client.temporal.workflow.getHandle(workflowId).fetchHistory();
    for (const event of history.events ?? []) {
      for (const payload of collectPayloads(event)) {
        payloads += 1;
        const where = `${workflowId} event ${String(event.eventId)}`;
        assert.ok(!payload.text.includes(ARC_ROW), `an ARC grid is in history at ${where}`);
        assert.ok(!payload.text.includes(BIG_MARKER), `the stored value is in history at ${where}`);
        if (payload.size > largest.size) largest = { size: payload.size, where };
      }
    }
  }
  assert.ok(payloads > 20, `${payloads} payloads were checked`);
  assert.ok(largest.size < 16 * 1024, `largest payload ${largest.size} bytes at ${largest.where}`);
});
