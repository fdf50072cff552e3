import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createToolRegistry } from '../../activities/tools';
import { checkToolCall } from '../../activities/tools/validate';
import { UNIVERSAL_CAPABILITIES } from '../../common/capabilities';
import type { AgentDefinition } from '../../common/agent-definition';

const registry = createToolRegistry({
  filesRoot: '/nonexistent-root',
  arcDataDir: '/nonexistent-arc',
  describeAgent: () => undefined,
});
const solver: AgentDefinition = {
  name: 'solver',
  description: 'Solves.',
  capabilities: ['load_arc_task'],
  approval: [],
  max_steps: 25,
  delegation_context: 'standard',
  body: '',
  source: 'solver.md',
};

const UNIVERSAL = [...UNIVERSAL_CAPABILITIES];
const CAN_CALL = ['load_arc_task', ...UNIVERSAL].join(', ');

function check(name: string, args: string) {
  return checkToolCall({ id: 'call_1', name, arguments: args }, solver, registry);
}

const refusals: { name: string; call: [string, string]; error: string }[] = [
  {
    name: 'an unknown tool',
    call: ['teleport', '{}'],
    error: `Unknown tool or agent 'teleport'. You can call: ${CAN_CALL}.`,
  },
  {
    name: 'a tool outside the capabilities',
    call: ['read_file', '{"path":"a.txt"}'],
    error: `'read_file' is not one of your capabilities. You can call: ${CAN_CALL}.`,
  },
  {
    name: 'invalid JSON',
    call: ['load_arc_task', '{"task_id": '],
    error:
      "The arguments of 'load_arc_task' are not valid JSON (Unexpected end of JSON input). Send them as one JSON object.",
  },
  {
    name: 'a missing argument',
    call: ['think', '{}'],
    error: "Invalid arguments for 'think': 'thought' Invalid input: expected string, received undefined.",
  },
  {
    name: 'an invented scope argument',
    call: ['think', '{"thought":"x","root_thread_id":"someone-else"}'],
    error: "Invalid arguments for 'think': unknown argument 'root_thread_id'.",
  },
  {
    name: 'a question that is too long',
    call: ['ask_human', JSON.stringify({ question: 'x'.repeat(2001) })],
    error: "Invalid arguments for 'ask_human': 'question' Too big: expected string to have <=2000 characters.",
  },
];

for (const { name, call, error } of refusals) {
  test(`tool calls: ${name} is refused with a message the model can act on`, () => {
    assert.deepEqual(check(...call), { ok: false, error });
  });
}

test('tool calls: valid arguments are parsed; universal tools need no declaration', () => {
  const result = check('think', '{"thought":"plan"}');
  assert.ok(result.ok && result.kind === 'tool');
  assert.equal(result.tool.name, 'think');
  assert.deepEqual(result.args, { thought: 'plan' });
  const empty = check('list_capabilities', '');
  assert.ok(empty.ok, 'empty arguments count as {}');
});

test('tool registry: every tool is offered with JSON Schema from its zod schema', () => {
  assert.deepEqual(registry.universal, UNIVERSAL);
  for (const name of registry.names) {
    const tool = registry.toModelTool(name);
    assert.equal(tool?.type, 'function');
    assert.equal(tool?.function.name, name);
    assert.equal(tool?.function.parameters.type, 'object');
    assert.equal(tool?.function.parameters.additionalProperties, false, `${name} refuses unknown arguments`);
    assert.ok(!('$schema' in (tool?.function.parameters ?? {})));
  }
  assert.deepEqual(registry.toModelTool('ask_human')?.function.parameters.required, ['question']);
});
