/**
 * Typed results without a stack: how an answer's text is checked against an agent's `output` schema, what a request
 * adds for it in each mode, how a `final_output` call becomes the answer, the frontmatter and code checks that refuse
 * a schema that cannot be used, a zod schema made into an agent's `output`, and `BATON_STRUCTURED_OUTPUT`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import {
  asOutputReply,
  checkOutput,
  FINAL_OUTPUT_TOOL,
  outputRequest,
  outputSchema,
  outputSchemaProblem,
  repairMessage,
} from '../../activities/output';
import { AgentConfigError, checkOutputs, parseAgentFile } from '../../worker/agents';
import { ConfigError, readStructuredOutput } from '../../worker/config';

const schema = {
  type: 'object',
  properties: { total: { type: 'integer' }, label: { type: 'string' } },
  required: ['total'],
  additionalProperties: false,
};

test('typed output: an answer is its JSON object when it matches, else what is wrong with it', () => {
  assert.deepEqual(checkOutput(schema, '{"total": 3}'), { ok: true, value: { total: 3 } });
  assert.deepEqual(checkOutput(schema, '```json\n{"total": 4, "label": "x"}\n```'), {
    ok: true,
    value: { total: 4, label: 'x' },
  });
  assert.deepEqual(checkOutput(schema, null), { ok: false, problem: 'the answer is empty' });
  const notJson = checkOutput(schema, 'About three.');
  assert.equal(notJson.ok, false);
  assert.match(notJson.ok ? '' : notJson.problem, /^the answer is not JSON \(/);
  const wrongType = checkOutput(schema, '{"total": "three"}');
  assert.deepEqual(wrongType, {
    ok: false,
    problem: 'the answer does not match the schema: data/total must be integer',
  });
  const extra = checkOutput(schema, '{"total": 1, "other": true}');
  assert.match(extra.ok ? '' : extra.problem, /must NOT have additional properties/);
  const missing = checkOutput(schema, '{}');
  assert.match(missing.ok ? '' : missing.problem, /must have required property 'total'/);
});

test('typed output: a request asks through response_format or through the final_output tool', () => {
  assert.deepEqual(outputRequest(schema, 'json_schema'), {
    response_format: { type: 'json_schema', json_schema: { name: 'output', schema } },
  });
  const asked = outputRequest(schema, 'tool');
  assert.ok('tool' in asked);
  assert.equal(asked.tool.function.name, FINAL_OUTPUT_TOOL);
  assert.deepEqual(asked.tool.function.parameters, schema);
});

test('typed output: a final_output call is the answer, its arguments the text; the other calls of its reply go', () => {
  const calls = [
    { id: 'a', name: 'read_file', arguments: '{"path":"x"}' },
    { id: 'b', name: FINAL_OUTPUT_TOOL, arguments: '{"total":2}' },
  ];
  assert.deepEqual(asOutputReply('thinking', calls), { content: '{"total":2}', toolCalls: [] });
  assert.deepEqual(asOutputReply('text', calls.slice(0, 1)), { content: 'text', toolCalls: calls.slice(0, 1) });
});

test('typed output: the repair message says what was wrong, how to answer, and how many tries are left', () => {
  assert.equal(
    repairMessage('the answer is empty', 'tool', 2),
    `[Output check] Your answer was not accepted: the answer is empty. Call ${FINAL_OUTPUT_TOOL} once, alone, with ` +
      'the whole result as its arguments. (2 tries left before the turn fails.)',
  );
  assert.match(
    repairMessage('x', 'json_schema', 1),
    /Answer with only the JSON object, nothing around it\. \(This is the last try/,
  );
});

test('typed output: an agent file whose output is no object schema, or does not compile, is refused', () => {
  const file = (output: string) =>
    `---\nname: typed\ndescription: Typed.\noutput: ${output}\noutput_repairs: 3\n---\nBody.\n`;
  const typed = parseAgentFile(file('{ type: object, properties: { n: { type: integer } } }'), 'typed.md');
  assert.equal(typed.output_repairs, 3);
  checkOutputs(new Map([['typed', typed]]));
  assert.throws(
    () => parseAgentFile(file('{ type: string }'), 'typed.md'),
    (error: Error) =>
      error instanceof AgentConfigError &&
      /field 'output' must be a JSON Schema whose root is 'type: object'/.test(error.message),
  );
  assert.throws(
    () => parseAgentFile(`---\nname: typed\ndescription: Typed.\noutput_repairs: 11\n---\nBody.\n`, 'typed.md'),
    /field 'output_repairs'/,
  );
  const broken = parseAgentFile(file('{ type: object, properties: { n: { type: 12 } } }'), 'typed.md');
  assert.throws(
    () => checkOutputs(new Map([['typed', broken]])),
    (error: Error) =>
      error instanceof AgentConfigError && /field 'output' is not a JSON Schema that can be used/.test(error.message),
  );
  assert.match(
    outputSchemaProblem({ type: 'object', properties: { n: { type: 12 } } }) ?? '',
    /can be used: type must be JSONType/,
  );
});

test('typed output: a zod schema becomes an agent output without $schema; a schema that is no object is refused', () => {
  const made = outputSchema(z.object({ total: z.number().int(), label: z.string().optional() }));
  assert.equal(made.$schema, undefined);
  assert.equal(made.type, 'object');
  assert.deepEqual(checkOutput(made, '{"total": 2}'), { ok: true, value: { total: 2 } });
  assert.equal(checkOutput(made, '{"total": 2.5}').ok, false);
  assert.throws(() => outputSchema(z.string()), /must be an object/);
});

test('typed output: BATON_STRUCTURED_OUTPUT names configured providers', () => {
  const providers = [{ name: 'openai' }];
  assert.deepEqual(readStructuredOutput({}, providers), []);
  assert.deepEqual(readStructuredOutput({ BATON_STRUCTURED_OUTPUT: ' default, openai ,openai' }, providers), [
    'default',
    'openai',
  ]);
  assert.throws(
    () => readStructuredOutput({ BATON_STRUCTURED_OUTPUT: 'default,opnai' }, providers),
    (error: Error) =>
      error instanceof ConfigError &&
      /BATON_STRUCTURED_OUTPUT: 'opnai' is no configured provider \(providers: default, openai\)/.test(error.message),
  );
});
