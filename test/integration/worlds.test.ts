import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { parseScript } from '../../scripted-model';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const modelLog = path.join(fs.mkdtempSync(path.join(env.stateDir, 'worlds-')), 'model.jsonl');

function agent(name: string, body: string, capabilities: string[] = []) {
  const text = `---\nname: ${name}\ndescription: Agent ${name}.\ncapabilities: [${capabilities.join(', ')}]\n---\n${body}\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('guide', 'You guide visitors of {{ project_name }} in {{city}}. Unknown: [{{ missing }}]. Keep {{ a + b }}.'),
    agent('boss', 'You lead.', ['mid']),
    agent('mid', 'You relay.', ['leaf']),
    agent('leaf', 'You answer.'),
  ].map((a) => [a.name, a]),
);

const script = parseScript(
  `
agents:
  guide:
    - say: "first"
    - say: "second"
  boss:
    - call: mid
      args: { message: "go" }
    - say: "boss done"
  mid:
    - call: leaf
      args: { message: "go deeper" }
    - say: "mid done"
  leaf:
    - say: "leaf done"
`,
  'worlds',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('worlds', {
    agents,
    script,
    modelLogFile: modelLog,
  });
});

after(async () => {
  await harness?.close();
});

function systemPrompts(root: string, agentName: string): string[] {
  return harness
    .modelRequests()
    .filter((r: ModelLogEntry) => r.headers['x-baton-root-thread'] === root && r.agent === agentName)
    .map((r) => r.messages[0]?.content ?? '');
}

test('worlds: prompts are filled from the world variables at every call, and an edit shows at the next call', async () => {
  const worldName = `tour-${uniqueThreadId('w').split('-')[1]}`;
  const world = harness.client.world(worldName);
  await world.setVariablesText('# the tour\nproject_name = Baton\ncity=Lisbon\nINVALID LINE\n');
  const root = uniqueThreadId('guide');
  const thread = await harness.client.startThread({ agent: 'guide', threadId: root, world: worldName });

  await thread.send('Hello');
  await world.set({ city: 'Porto' });
  await thread.send('Hello again');

  const [first, second] = systemPrompts(root, 'guide');
  assert.ok(
    first?.startsWith('You guide visitors of Baton in Lisbon. Unknown: []. Keep {{ a + b }}.\n\n## System Context'),
  );
  assert.ok(second?.startsWith('You guide visitors of Baton in Porto. Unknown: []. Keep {{ a + b }}.'));
  // The stored text keeps its comment and order; the edit replaced the one line.
  assert.equal(await world.getVariablesText(), '# the tour\nproject_name = Baton\ncity=Porto\nINVALID LINE\n');
  assert.deepEqual(await world.getEnvMap(), { project_name: 'Baton', city: 'Porto' });
  await thread.end();
});

test('worlds: a world without variables leaves placeholders empty and other prompts byte for byte', async () => {
  const root = uniqueThreadId('guide');
  const thread = await harness.client.startThread({ agent: 'guide', threadId: root, world: 'empty-world' });
  await thread.send('Hello');
  const [prompt] = systemPrompts(root, 'guide');
  assert.ok(prompt?.startsWith('You guide visitors of  in . Unknown: []. Keep {{ a + b }}.'));
  await thread.end();
});

test("worlds: delegation limits come from the world's variables, and a conversation's own limits win", async () => {
  const strict = harness.client.world('strict-world');
  await strict.set({ BATON_MAX_DELEGATION_DEPTH: '1' });

  const limited = uniqueThreadId('boss');
  const thread = await harness.client.startThread({ agent: 'boss', threadId: limited, world: 'strict-world' });
  assert.equal((await thread.send('Go.')).reply, 'boss done');
  const tree = await thread.tree();
  assert.equal(tree.children[0]?.agent, 'mid');
  assert.equal(tree.children[0]?.children.length, 0, 'depth 1: mid may not delegate');

  const overridden = uniqueThreadId('boss');
  const other = await harness.client.startThread({
    agent: 'boss',
    threadId: overridden,
    world: 'strict-world',
    limits: { maxDepth: 3 },
  });
  await other.send('Go.');
  assert.equal((await other.tree()).children[0]?.children[0]?.agent, 'leaf');
  await thread.end();
  await other.end();
});

test('worlds: set refuses invalid names and line breaks, and the working directory must exist; nothing changes', async () => {
  const world = harness.client.world('careful-world');
  await world.set({ keep: 'me' });
  await assert.rejects(world.set({ 'bad name': 'x' }), /variable name 'bad name'/);
  await assert.rejects(world.set({ ok: 'two\nlines' }), /must not contain a line break/);
  await assert.rejects(world.setWorkingDirectory('/definitely/not/here'), /is not an existing directory/);
  assert.deepEqual(await world.getEnvMap(), { keep: 'me' });
  assert.equal(await world.setWorkingDirectory(`${env.stateDir}/../${path.basename(env.stateDir)}`), env.stateDir);
  assert.equal(await world.getEnvValue('working_directory'), env.stateDir);
  assert.throws(() => harness.client.world('Bad World'), /world name 'Bad World'/);
});
