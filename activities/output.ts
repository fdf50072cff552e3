/**
 * Typed results (`docs/guides/typed-results.md`): an agent whose frontmatter sets `output` (a JSON Schema) ends its
 * turns with an object that matches it. The model is asked for it in one of two ways, by the endpoint that serves the
 * call: the provider's structured output (`response_format: json_schema`, for the providers the worker lists in
 * `BATON_STRUCTURED_OUTPUT`), else a `final_output` tool whose parameters are the schema. Either way the answer is
 * stored as the reply's text (a `final_output` call's arguments become it), so a stored reply is checked the same way
 * whichever served it, and a re-run after a crash decides the same.
 */
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import { setBounded } from '../common/bounded-map';
import type { ToolCallRequest } from '../common/types';
import type { ModelTool } from './tools';

/** The tool an agent with `output` is offered when its endpoint has no structured output: calling it answers. */
export const FINAL_OUTPUT_TOOL = 'final_output';

/** How one model call asks for the agent's output. */
export type OutputMode = 'json_schema' | 'tool';

/** A JSON Schema as an agent's `output` holds it. */
export type OutputSchema = Readonly<Record<string, unknown>>;

/** What a text answer is, checked against an agent's `output`. */
export type CheckedOutput = { ok: true; value: unknown } | { ok: false; problem: string };

/** Compiled schemas a worker keeps, by their text (an agent version's schema never changes). */
const MAX_COMPILED_SCHEMAS = 500;
const validator = new AjvJsonSchemaValidator();
const compiled = new Map<string, (input: unknown) => { valid: boolean; errorMessage?: string | undefined }>();

function compile(schema: OutputSchema) {
  const key = JSON.stringify(schema);
  const known = compiled.get(key);
  if (known !== undefined) return known;
  const validate = validator.getValidator(schema);
  setBounded(compiled, key, validate, MAX_COMPILED_SCHEMAS);
  return validate;
}

/**
 * The JSON Schema of a zod schema, for the `output` of an agent defined in code (`createBatonWorker({ agents })`): the
 * shape the answer must have as it is sent (zod's input side), without `$schema`, which endpoints do not take.
 * @throws Error when zod cannot express the schema in JSON Schema (a transform, a function), or its root is no object
 */
export function outputSchema(schema: z.ZodType): OutputSchema {
  const { $schema: _schema, ...jsonSchema } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  if (jsonSchema.type !== 'object') throw new Error("an agent's output schema must be an object (z.object({ … }))");
  return jsonSchema;
}

/** Why `schema` cannot be an agent's `output` (it does not compile), or `undefined` when it can. */
export function outputSchemaProblem(schema: OutputSchema): string | undefined {
  try {
    compile(schema);
    return undefined;
  } catch (error) {
    return `is not a JSON Schema that can be used: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** What one model request adds for an agent's output: a response format, or the `final_output` tool. */
export function outputRequest(
  schema: OutputSchema,
  mode: OutputMode,
):
  | { response_format: { type: 'json_schema'; json_schema: { name: string; schema: Record<string, unknown> } } }
  | {
      tool: ModelTool;
    } {
  if (mode === 'json_schema') {
    return { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { ...schema } } } };
  }
  return {
    tool: {
      type: 'function',
      function: {
        name: FINAL_OUTPUT_TOOL,
        description:
          'Give your final answer: call this once, alone, with the whole result as its arguments, instead of ' +
          'answering in text. Other calls in the same reply are not run.',
        parameters: { ...schema },
      },
    },
  };
}

/**
 * A reply of an agent with `output` as it is stored: a `final_output` call is the answer, its arguments the reply's
 * text (the reply's other calls are not run, as the tool's description says); any other reply stays as it came.
 */
export function asOutputReply(
  content: string | null,
  toolCalls: readonly ToolCallRequest[],
): { content: string | null; toolCalls: readonly ToolCallRequest[] } {
  const answer = toolCalls.find((call) => call.name === FINAL_OUTPUT_TOOL);
  return answer === undefined ? { content, toolCalls } : { content: answer.arguments, toolCalls: [] };
}

/** A JSON text, without the Markdown code fence a model may put around it. */
function unfenced(text: string): string {
  const fenced = /^```[a-zA-Z]*\s*\n([\s\S]*?)\n?```$/.exec(text.trim());
  return fenced?.[1] ?? text;
}

/** The object of an answer that was checked already (a stored answer read back): its JSON, parsed. */
export function answerObject(text: string | null): unknown {
  return JSON.parse(unfenced(text ?? ''));
}

/** Checks an answer's text against `schema`: the object it holds, or what is wrong with it. */
export function checkOutput(schema: OutputSchema, text: string | null): CheckedOutput {
  if (text === null || text.trim() === '') return { ok: false, problem: 'the answer is empty' };
  let value: unknown;
  try {
    value = JSON.parse(unfenced(text));
  } catch (error) {
    return { ok: false, problem: `the answer is not JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  const result = compile(schema)(value);
  if (result.valid) return { ok: true, value };
  return { ok: false, problem: `the answer does not match the schema: ${result.errorMessage ?? 'invalid'}` };
}

/** The message that asks the model to fix an answer that did not match: what was wrong, and how to answer. */
export function repairMessage(problem: string, mode: OutputMode, repairsLeft: number): string {
  const how =
    mode === 'tool'
      ? `Call ${FINAL_OUTPUT_TOOL} once, alone, with the whole result as its arguments.`
      : 'Answer with only the JSON object, nothing around it.';
  return (
    `[Output check] Your answer was not accepted: ${problem}. ${how} ` +
    `(${repairsLeft === 1 ? 'This is the last try' : `${repairsLeft} tries left`} before the turn fails.)`
  );
}
