/**
 * A fork task's commit holding text Postgres cannot store (U+0000, a lone UTF-16 surrogate: valid JSON as `\u0000`
 * and `\ud800`) in its `commit_id`, a create's `description`, `type` or `tags`, or a proposal's `description_update`:
 * each bad part is reported in the join's `errors` and the rest merges, so one answer cannot fail the caller's turn
 * and leave the fork `running` (issue 22, defect 3).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { listMessages } from '../../db/transcripts';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

function agent(name: string, capabilities: string[] = []) {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [agent('text_lead', ['fork_join', 'dirty_scout', 'clean_scout']), agent('dirty_scout'), agent('clean_scout')].map(
    (a) => [a.name, a],
  ),
);

// JSON.stringify writes U+0000 as \u0000 and a lone surrogate as \ud800: the model's answer is plain, storable text.
const dirtyCommit = JSON.stringify({
  commit_id: 'dirty\u0000commit',
  creates: [
    { id: 'good', description: 'A clean finding.', content: { ok: true }, type: 'note', tags: ['clean'] },
    { id: 'nul_description', description: 'nul \u0000 here', content: 1 },
    { id: 'surrogate_type', description: 'Typed badly.', content: 2, type: 'half \ud800' },
    { id: 'nul_tag', description: 'Tagged badly.', content: 3, tags: ['fine', 'bad\u0000tag'] },
    { id: 'surrogate_content', description: 'Holds a bad value.', content: { text: 'low \udc00' } },
  ],
  links: [{ type: 'supports', src: 'good', dst: 'plan' }],
  proposes_updates: [
    { target_id: 'plan', patch: { step: 2 }, description_update: 'lone \udc00 surrogate' },
    { target_id: 'plan', patch: { step: 3 } },
  ],
});

const script = parseScript(
  `
agents:
  text_lead:
    - call: store_env_data
      args: { key: plan, short_description: "The plan.", value: { step: 1 } }
    - call: fork_join
      args: { tasks: [ { agent: dirty_scout, message: "Find things." }, { agent: clean_scout, message: "Find more." } ] }
    - say: "joined"
  dirty_scout:
    - say: |
        Found some things.
        \`\`\`json
        ${dirtyCommit}
        \`\`\`
  clean_scout:
    - call: store_env_data
      args: { key: more, short_description: "More.", value: 2 }
    - say: "Found more."
`,
  'fork-commit-text',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('fork-commit-text', { agents, script });
});

after(async () => {
  await harness?.close();
});

interface MergeView {
  commit_id: string;
  created: string[];
  links: number;
  proposals: string[];
  errors: string[];
}

test('fork/join: text Postgres cannot store in a commit is reported in errors, and the rest merges', async () => {
  const root = uniqueThreadId('commit-text');
  const thread = await harness.client.startThread({ agent: 'text_lead', threadId: root });
  const turn = await thread.send('Fan out.');
  assert.equal(turn.reply, 'joined');

  const messages = await listMessages(harness.pool, root);
  const call = messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.name === 'fork_join');
  const stored = messages.find((m) => m.role === 'tool' && m.toolCallId === call?.id)?.content ?? '';
  const result = JSON.parse(stored) as { status: string; tasks: { status: string; merge?: MergeView }[] };
  assert.equal(result.status, 'success');
  assert.deepEqual(
    result.tasks.map((t) => t.status),
    ['success', 'success'],
  );
  const dirty = result.tasks[0]?.merge;
  const bad = 'holds a NUL character or a lone surrogate, which Postgres cannot store';
  assert.deepEqual(dirty, {
    commit_id: 'fork-1-task-1',
    created: ['fork/1/1/good'],
    links: 1,
    proposals: ['p1'],
    errors: [
      `commit_id ${bad}: the commit is named fork-1-task-1`,
      `create 'nul_description': description ${bad}`,
      `create 'surrogate_type': type ${bad}`,
      `create 'nul_tag': a tag ${bad}`,
      `create 'surrogate_content': the value is not JSON-serialisable: 'text' ${bad}`,
      `proposal for 'plan': description_update ${bad}`,
    ],
  });
  assert.deepEqual(result.tasks[1]?.merge?.created, ['fork/1/2/more']);

  // What merged is stored as usual; what did not left nothing behind, and the fork is recorded as ended.
  assert.deepEqual(
    (await thread.envData()).map((e) => e.key),
    ['fork/1/1/good', 'fork/1/2/more', 'plan'],
  );
  assert.deepEqual((await thread.envGet('fork/1/1/good'))?.value, { ok: true });
  assert.deepEqual(
    (await thread.envProposals()).map((p) => [p.proposalId, p.patch]),
    [['p1', { step: 3 }]],
  );
  const [fork] = await thread.forks();
  assert.equal(fork?.status, 'success');
  const events = await thread.envEvents();
  assert.ok(
    events.filter((e) => e.reason?.includes('fork-1-task-1')).length >= 2,
    'events name the commit by its fallback id',
  );
});
