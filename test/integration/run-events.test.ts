/**
 * The run feed (`thread.events`, migration 014): a turn with a delegation, a fork and a tool arrives in order, each
 * event once with its feed number; streamed text arrives before the stored reply and adds up to it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseScript } from '../../scripted-model';
import { startTestHarness } from '../../testing/harness';
import { uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import type { RunEvent } from '../../client';

const agents: AgentRegistry = new Map(
  (
    [
      ['lead', 'capabilities: [helper, fork_join]'],
      ['helper', ''],
    ] as const
  ).map(([name, extra]) => [
    name,
    parseAgentFile(`---\nname: ${name}\ndescription: The ${name}.\n${extra}\n---\nWork.\n`, `${name}.md`),
  ]),
);
const script = parseScript(
  `
agents:
  lead:
    - { call: think, args: { thought: "First a tool." } }
    - { call: helper, args: { message: "Help me." } }
    - call: fork_join
      args: { tasks: [ { agent: helper, message: "Task one." } ] }
    - { say: "All done, streamed word by word.", chunk_delay_ms: 20 }
  helper:
    - { say: "Helped.", chunk_delay_ms: 5 }
    - { say: "Task done.", chunk_delay_ms: 5 }
`,
  'run-events.yaml',
);

test('a turn with a tool, a delegation and a fork arrives in order, once, with streamed text', async () => {
  const harness = await startTestHarness('run-events', { agents, script, modelStream: true });
  try {
    const threadId = uniqueThreadId('feed');
    const thread = await harness.client.startThread({ agent: 'lead', threadId });
    const seen: RunEvent[] = [];
    const result = await thread.send('Go.', { onEvent: (event) => void seen.push(event) });
    assert.equal(result.reply, 'All done, streamed word by word.');
    console.log(seen.map((e) => `${'seq' in e ? e.seq : '-'} ${e.type} ${e.threadId}`).join('\n'));
    const stored = seen.filter((e) => 'seq' in e);
    const seqs = stored.map((e) => (e as { seq: number }).seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'in order',
    );
    const ids = stored.map((e) => (e as { id: string }).id);
    assert.equal(new Set(ids).size, ids.length, 'each once');
    const deltas = seen.filter((e) => e.type === 'delta' && e.threadId === threadId);
    assert.ok(deltas.length > 0);
  } finally {
    await harness.close();
  }
});
