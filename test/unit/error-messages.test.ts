/**
 * Error messages that used to mislead (issue 13, defect 9): each bad input names what is actually wrong, with the
 * file and line where there is one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { StepMode } from '../../common/agent-definition';
import { contextLimitsFor, limitsFromVariables, stepModeFor } from '../../activities/worlds';
import { envTextProblem, parseEnvText } from '../../common/env-text';
import { DEFAULT_DELEGATION_LIMITS, type DelegationLimits } from '../../common/types';
import { parseScript, ScriptError } from '../../scripted-model';
import { AgentConfigError, parseAgentFile } from '../../worker/agents';

function agentError(text: string): string {
  try {
    parseAgentFile(text, 'agents/a.md');
  } catch (error) {
    assert.ok(error instanceof AgentConfigError, `expected an AgentConfigError, got ${String(error)}`);
    return error.message;
  }
  assert.fail('the agent file was accepted');
}

function scriptError(text: string): string {
  try {
    parseScript(text, 'script.yaml');
  } catch (error) {
    assert.ok(error instanceof ScriptError, `expected a ScriptError, got ${String(error)}`);
    return error.message;
  }
  assert.fail('the script was accepted');
}

test('agent file: a field of the wrong type is reported as such, not as missing', () => {
  assert.equal(
    agentError('---\nname: a\ndescription: d\ncapabilities: shell\n---\nBody.\n'),
    "agents/a.md:4: field 'capabilities' must be a list (got a string)",
  );
  assert.equal(
    agentError('---\nname: a\ndescription: d\ntemperature: "1"\n---\nBody.\n'),
    "agents/a.md:4: field 'temperature' must be a number (got a string)",
  );
  // A field that really is missing still says so.
  assert.equal(agentError('---\nname: a\n---\nBody.\n'), "agents/a.md: missing required field 'description'");
});

test('agent file: a bad context policy names the nested field, its line and what is wrong', () => {
  const file = (context: string) => `---\nname: a\ndescription: d\n${context}\n---\nBody.\n`;
  const cases: [string, string][] = [
    ['context: { max_messages: -1 }', "agents/a.md:4: field 'context.max_messages' must be at least 1"],
    ['context: { max_tokens: 0 }', "agents/a.md:4: field 'context.max_tokens' must be at least 1"],
    [
      'context:\n  max_messages: 10\n  max_tokens: "5"',
      "agents/a.md:6: field 'context.max_tokens' must be a number (got a string)",
    ],
    ['context: { max_tokens: 1.5 }', "agents/a.md:4: field 'context.max_tokens' must be a whole number (got 1.5)"],
    ['context:\n  max_messages: 10\n  max_message: 3', "agents/a.md:6: unknown field 'context.max_message'"],
    ['context: { keep: all, max_tokens: 5 }', "agents/a.md:4: unknown field 'context.keep'"],
    ['context: 20', "agents/a.md:4: field 'context' must be a mapping (got 20)"],
    ['context: [max_messages]', "agents/a.md:4: field 'context' must be a mapping (got a list)"],
  ];
  for (const [context, message] of cases) assert.equal(agentError(file(context)), message, context);
  const agent = parseAgentFile(file('context:\n  max_messages: 40\n  max_tokens: 8000'), 'agents/a.md');
  assert.deepEqual(agent.context, { max_messages: 40, max_tokens: 8000 });
});

test("context limits: the agent's own over the world's, and only plain positive whole numbers from the world", async () => {
  const limitsOf = (
    context: { max_messages?: number; max_tokens?: number } | undefined,
    variables: Record<string, string>,
  ) => new MockActivityEnvironment().run(async () => Promise.resolve(contextLimitsFor({ context }, variables)));
  const world = { BATON_CONTEXT_MAX_MESSAGES: '30', BATON_CONTEXT_MAX_TOKENS: '6000' };
  assert.deepEqual(await limitsOf(undefined, world), { maxMessages: 30, maxTokens: 6000 });
  assert.deepEqual(await limitsOf({ max_tokens: 900 }, world), { maxMessages: 30, maxTokens: 900 });
  assert.deepEqual(await limitsOf({}, {}), { maxMessages: undefined, maxTokens: undefined });
  for (const raw of ['0', '-5', '1e3', ' 7', 'all']) {
    assert.deepEqual(
      await limitsOf(undefined, { BATON_CONTEXT_MAX_MESSAGES: raw }),
      {
        maxMessages: undefined,
        maxTokens: undefined,
      },
      raw,
    );
  }
});

test('agent file: frontmatter that is a YAML list or a scalar is reported as not a mapping', () => {
  assert.equal(
    agentError('---\n- name: a\n- description: d\n---\nBody.\n'),
    'agents/a.md:2: the frontmatter must be a YAML mapping of fields (name: …, description: …), not a list',
  );
  assert.equal(
    agentError('---\njust text\n---\nBody.\n'),
    'agents/a.md:2: the frontmatter must be a YAML mapping of fields (name: …, description: …), not a string',
  );
});

test('agent file: a leading byte-order mark is ignored', () => {
  const agent = parseAgentFile('\uFEFF---\nname: a\ndescription: d\n---\nBody.\n', 'a.md');
  assert.equal(agent.name, 'a');
  assert.equal(agent.body, 'Body.');
});

test('scripted model: a YAML alias bomb is refused naming the file and line', () => {
  const bomb = [
    'a: &a ["x","x","x","x","x","x","x","x","x"]',
    'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
    'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
    'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
    'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]',
    'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]',
    'agents: { x: [ { say: "hi" } ] }',
  ].join('\n');
  assert.match(scriptError(bomb), /script\.yaml:\d+:\d+: .*alias/i);
});

test("scripted model: an agent named '__proto__' is refused, not silently dropped", () => {
  assert.match(
    scriptError('agents:\n  __proto__:\n    - say: hi\n  a:\n    - say: x\n'),
    /script\.yaml:2:\d+: agents\.__proto__: '__proto__' cannot be an agent name/,
  );
});

test('.env text: CR-only line ends separate lines instead of merging them', () => {
  assert.deepEqual({ ...parseEnvText('A=1\rB=2\rC=3') }, { A: '1', B: '2', C: '3' });
  assert.deepEqual({ ...parseEnvText('A=1\r\nB=2\nC=3\r') }, { A: '1', B: '2', C: '3' });
});

test('.env text: a NUL character is named with its line before anything is stored', () => {
  assert.equal(envTextProblem('A=1\nB=x\u0000y\n'), 'line 2 holds a NUL character (U+0000), which cannot be stored');
  assert.equal(envTextProblem('A=1\nB=2\n'), undefined);
});

test("step mode: the agent's steps, else the world's BATON_STEPS, else the worker's; a bad world value is ignored", async () => {
  const modeOf = (steps: StepMode | undefined, variables: Record<string, string>, worker: StepMode) =>
    new MockActivityEnvironment().run(async () => Promise.resolve(stepModeFor({ steps }, variables, worker)));
  assert.equal(await modeOf('activity', { BATON_STEPS: 'local' }, 'local'), 'activity');
  assert.equal(await modeOf(undefined, { BATON_STEPS: 'local' }, 'activity'), 'local');
  assert.equal(await modeOf(undefined, { BATON_STEPS: ' Activity ' }, 'local'), 'activity');
  assert.equal(await modeOf(undefined, { BATON_STEPS: 'batched' }, 'activity'), 'batched');
  assert.equal(await modeOf('batched', { BATON_STEPS: 'local' }, 'activity'), 'batched');
  assert.equal(await modeOf(undefined, {}, 'local'), 'local');
  assert.equal(await modeOf(undefined, { BATON_STEPS: 'fast' }, 'activity'), 'activity');
  assert.equal(await modeOf(undefined, { BATON_STEPS: '' }, 'local'), 'local');
  assert.equal(
    agentError('---\nname: a\ndescription: d\nsteps: fast\n---\n'),
    "agents/a.md:4: field 'steps' must be local, batched or activity",
  );
});

test('world limits: only plain positive whole numbers count; 0x10 and 1e20 are ignored', async () => {
  // limitsFromVariables logs what it ignores through the activity logger.
  const limitsOf = (variables: Record<string, string>): Promise<DelegationLimits> =>
    new MockActivityEnvironment().run(async () => Promise.resolve(limitsFromVariables(variables)));
  const limits = await limitsOf({
    BATON_MAX_DELEGATION_DEPTH: '0x10',
    BATON_MAX_AGENT_REPEATS: '1e20',
    BATON_TASK_CONTEXT_CHARS: '2500',
    BATON_MAX_WAIT_SECONDS: '3600',
  });
  assert.equal(limits.maxWaitSeconds, 3600);
  assert.equal((await limitsOf({ BATON_MAX_WAIT_SECONDS: '-5' })).maxWaitSeconds, 7 * 24 * 3600, 'the default: 7 days');
  assert.equal(limits.maxDepth, DEFAULT_DELEGATION_LIMITS.maxDepth);
  assert.equal(limits.maxRepeats, DEFAULT_DELEGATION_LIMITS.maxRepeats);
  assert.equal(limits.taskContextLimit, 2500);
  for (const raw of [' 7', '7.0', '+7', '007', '99999999999999999999', '']) {
    const { maxDepth } = await limitsOf({ BATON_MAX_DELEGATION_DEPTH: raw });
    assert.equal(maxDepth, DEFAULT_DELEGATION_LIMITS.maxDepth, raw);
  }
});
