/**
 * Evaluations in a user's own test runner, as `baton/testing` offers them: an agent harness (its worker started with
 * `evalReplays`) runs a dataset through `runExperiment` with a scorer made by `defineScorer`, the gate is checked with
 * `passesGate`, and a case's thread is replayed through `runExperiment({ replay })` with nothing run again.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { defineScorer, parseDataset, passesGate, runExperiment } from '../../testing';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const agents: AgentRegistry = new Map(
  ['---\nname: clerk\ndescription: Files a note.\ncapabilities: [file_note]\n---\nYou file notes.\n'].map((text) => {
    const agent = parseAgentFile(text, 'clerk.md');
    return [agent.name, agent];
  }),
);

/** Each run of the tool, counted here: a replay must add none. */
let filed = 0;
const fileNote = defineTool({
  name: 'file_note',
  description: 'Files a note.',
  parameters: z.object({ text: z.string() }),
  sideEffects: true,
  timeout_s: 30,
  run: ({ text }) => {
    filed += 1;
    return `filed: ${text}`;
  },
});

const script = parseScript(
  `
agents:
  clerk:
    - call: file_note
      args: { text: "remember the milk" }
    - say: "Filed."
`,
  'evals-harness',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('evals-harness', { agents, script, tools: [fileNote], evalReplays: true });
});

after(async () => {
  await harness?.close();
});

test('evals in a test runner: runExperiment with a defineScorer scorer, the gate, and a replay that runs nothing', async () => {
  const saidFiled = defineScorer({
    name: 'said-filed',
    run: ({ result }) => ({ score: result.reply === 'Filed.' ? 1 : 0 }),
  });
  const model = { model: 'baton-scripted', providers: [] };
  const report = await runExperiment({
    client: harness.client,
    dataset: parseDataset(
      {
        name: 'notes',
        agent: 'clerk',
        scorers: [{ tool: 'file_note', at_most: 1 }],
        cases: [{ id: 'one', message: 'Note it.' }],
      },
      'notes',
    ),
    scorers: [saidFiled],
    agents,
    model,
  });
  assert.deepEqual(report.cases[0]?.scores, {
    'tool:file_note<=1': { score: 1, reason: 'file_note called 1 time' },
    'said-filed': { score: 1 },
  });
  assert.equal(passesGate(report, 1), true);
  assert.equal(filed, 1);

  const replayed = await runExperiment({
    client: harness.client,
    dataset: parseDataset(
      { name: 'again', scorers: ['recorded'], cases: [{ id: 'one', thread: report.cases[0]?.threadId }] },
      'again',
    ),
    agents,
    model,
    replay: { policy: 'stop' },
  });
  assert.equal(replayed.kind, 'replay');
  assert.equal(replayed.cases[0]?.status, 'completed');
  assert.equal(replayed.cases[0]?.divergence, null);
  assert.deepEqual(replayed.cases[0]?.scores.recorded, { score: 1 });
  assert.equal(filed, 1, 'the replay answered the call from the record');
});
