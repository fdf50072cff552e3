import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { AgentConfigError, loadAgents, parseAgentFile } from '../../worker/agents';

test('agent file: frontmatter and body are parsed', () => {
  const agent = parseAgentFile('---\nname: solver\ndescription: Solves puzzles.\n---\n\nYou solve puzzles.\n', 'a.md');
  assert.deepEqual(agent, {
    name: 'solver',
    description: 'Solves puzzles.',
    capabilities: [],
    approval: [],
    max_steps: 25,
    delegation_context: 'standard',
    body: 'You solve puzzles.',
    source: 'a.md',
  });
});

test('agent file: capabilities and model options are read', () => {
  const agent = parseAgentFile(
    '---\nname: solver\ndescription: d\ncapabilities: [load_arc_task, observer]\nmodel: gpt-x\ntemperature: 0.2\nmax_steps: 7\ndelegation_context: false\ntimeout_s: 60\n---\n',
    'a.md',
  );
  assert.deepEqual(
    [agent.capabilities, agent.model, agent.temperature, agent.max_steps, agent.delegation_context, agent.timeout_s],
    [['load_arc_task', 'observer'], 'gpt-x', 0.2, 7, false, 60],
  );
});

const badFiles: { name: string; text: string; message: RegExp }[] = [
  { name: 'no frontmatter', text: 'just text\n', message: /^x\.md:1: missing YAML frontmatter/ },
  {
    name: 'missing description',
    text: '---\nname: a\n---\nbody\n',
    message: /^x\.md: missing required field 'description'/,
  },
  {
    name: 'max_steps out of range',
    text: '---\nname: a\ndescription: d\nmax_steps: 0\n---\n',
    message: /^x\.md:4: field 'max_steps' /,
  },
  {
    name: 'bad name',
    text: '---\nname: Bad Name\ndescription: d\n---\n',
    message: /^x\.md:2: field 'name' must be lowercase letters/,
  },
  {
    name: 'unknown field',
    text: '---\nname: a\ndescription: d\ncapabilites: [x]\n---\n',
    message: /^x\.md:4: unknown field 'capabilites'/,
  },
  { name: 'YAML error', text: '---\nname: a\ndescription: [unclosed\n---\n', message: /^x\.md(:\d+)?: invalid YAML/ },
];

for (const { name, text, message } of badFiles) {
  test(`agent file: ${name} is refused with file, line and reason`, () => {
    assert.throws(
      () => parseAgentFile(text, 'x.md'),
      (error: unknown) => error instanceof AgentConfigError && message.test(error.message),
    );
  });
}

test('agent directory: duplicate names are refused, naming both files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-agents-'));
  try {
    fs.writeFileSync(path.join(dir, 'a.md'), '---\nname: same\ndescription: first\n---\n');
    fs.writeFileSync(path.join(dir, 'b.md'), '---\nname: same\ndescription: second\n---\n');
    assert.throws(
      () => loadAgents(dir, { toolNames: ['think'] }),
      (error: unknown) =>
        error instanceof AgentConfigError &&
        error.file === path.join(dir, 'b.md') &&
        error.message.includes(`duplicate agent name 'same' (also defined in ${path.join(dir, 'a.md')})`),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('agent directory: a capability that is neither a tool nor an agent is refused with its line', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-agents-'));
  try {
    fs.writeFileSync(path.join(dir, 'a.md'), '---\nname: a\ndescription: d\ncapabilities: [think, b, teleport]\n---\n');
    fs.writeFileSync(path.join(dir, 'b.md'), '---\nname: b\ndescription: d\n---\n');
    assert.throws(
      () => loadAgents(dir, { toolNames: ['think'] }),
      (error: unknown) =>
        error instanceof AgentConfigError &&
        error.message.startsWith(`${path.join(dir, 'a.md')}:4: capability 'teleport' is neither a tool nor an agent`),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('agent directory: a missing or empty directory is a clear error', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-agents-'));
  try {
    assert.throws(() => loadAgents(path.join(dir, 'nope'), { toolNames: [] }), /agents directory not found/);
    assert.throws(() => loadAgents(dir, { toolNames: ['think'] }), /no agent files \(\*\.md\) found/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('agent directory: the example agents load', () => {
  const agents = loadAgents(path.join(__dirname, '..', '..', 'examples', 'arc-team', 'agents'), {
    toolNames: ['load_arc_task', 'fork_join', 'list_files', 'check_arc_candidate', 'watch_env_data'],
  });
  assert.deepEqual([...agents.keys()].sort(), [
    'arc_lead',
    'arc_verified_lead',
    'coordinator',
    'daily_summary',
    'fractal_tester',
    'greeter',
    'observer',
    'scaling_tester',
    'solver',
    'tiling_tester',
    'verifier',
  ]);
});
