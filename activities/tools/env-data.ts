import { z } from 'zod';
import { MAX_ENV_DESCRIPTION_LENGTH, MAX_ENV_KEY_LENGTH, envKeyProblem } from '../../common/env-data';
import { EnvDataError, type EnvManifestEntry } from '../../db/env-data';
import { defineTool, ToolError, type ToolContext, type ToolDefinition } from './types';

const key = z
  .string()
  .min(1)
  .max(MAX_ENV_KEY_LENGTH)
  .refine((value) => envKeyProblem(value) === undefined, {
    error: "may hold only letters, digits and _ - . / ('/' separates namespaces, e.g. 'arc/task')",
  })
  .describe("The entry's key, e.g. 'arc_task' or 'arc/observations'.");
const shortDescription = z
  .string()
  .trim()
  .min(1, { error: 'is required: one or two sentences saying what the value holds' })
  .max(MAX_ENV_DESCRIPTION_LENGTH)
  .describe('One or two sentences saying what the value holds, so others can decide whether to read it.');
// Any JSON value; the schema stays `{}` for the model (a recursive JSON schema confuses some endpoints).
const value = z
  .unknown()
  .refine((item) => item !== undefined, { error: 'is required' })
  .describe('The data: any JSON value (object, array, string, number, boolean or null).');

/** Runs a store call, turning its refusals into errors the model can act on. */
async function refusalsAsToolErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof EnvDataError) throw new ToolError(error.message);
    throw error;
  }
}

/** The manifest as the model sees it: no values, and who stored what. */
function manifestView(entries: readonly EnvManifestEntry[]) {
  return entries.map((entry) => ({
    key: entry.key,
    short_description: entry.shortDescription,
    stored_by: entry.storedBy.agent,
    version: entry.version,
    updated_at: entry.updatedAt,
    ...(entry.type === null ? {} : { type: entry.type }),
    ...(entry.tags.length === 0 ? {} : { tags: entry.tags }),
  }));
}

function env(context: ToolContext) {
  return context.env;
}

/**
 * The five universal env-data capabilities. The scope (the root thread) comes from the tool context, which the
 * workflow sets; the strict schemas refuse any scope-like argument a model invents.
 */
export function createEnvDataTools(): ToolDefinition[] {
  return [
    defineTool({
      name: 'store_env_data',
      description:
        'Store data for every agent in this conversation to share, under a key with a short description. ' +
        'Creates the key or replaces its value (last write wins).',
      parameters: z.strictObject({
        key,
        short_description: shortDescription,
        value,
        type: z.string().min(1).max(100).optional().describe("An optional kind, e.g. 'finding' (filter with list)."),
        tags: z.array(z.string().min(1).max(100)).max(20).optional().describe('Optional labels (filter with list).'),
      }),
      handledBy: 'activity',
      run: (args, context) =>
        refusalsAsToolErrors(async () => {
          await env(context).store(context.scope, context.operationId, {
            key: args.key,
            shortDescription: args.short_description,
            value: args.value,
            type: args.type,
            tags: args.tags,
          });
          return `Stored '${args.key}' in environment data.`;
        }),
    }),
    defineTool({
      name: 'get_env_data',
      description: 'Read the value stored under a key of the shared environment data.',
      parameters: z.strictObject({ key }),
      handledBy: 'activity',
      run: async (args, context) => {
        const entry = await env(context).get(context.scope.rootThreadId, args.key);
        if (!entry) {
          throw new ToolError(`No environment data under '${args.key}'. Call list_env_data() to see what exists.`);
        }
        return JSON.stringify(entry.value);
      },
    }),
    defineTool({
      name: 'list_env_data',
      description:
        'List the shared environment data of this conversation: keys, short descriptions, who stored each and its ' +
        'version. Values are not included; read one with get_env_data.',
      parameters: z.strictObject({
        prefix: z.string().min(1).optional().describe("Only keys starting with this, e.g. 'arc/'."),
        type: z.string().min(1).optional().describe('Only entries of this type.'),
        tag: z.string().min(1).optional().describe('Only entries with this tag.'),
        stored_by: z.string().min(1).optional().describe('Only entries last written by this agent.'),
        exclude_self: z.boolean().optional().describe('Leave out entries you stored yourself.'),
      }),
      handledBy: 'activity',
      run: async (args, context) => {
        const entries = await env(context).list(context.scope.rootThreadId, {
          ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
          ...(args.type === undefined ? {} : { type: args.type }),
          ...(args.tag === undefined ? {} : { tag: args.tag }),
          ...(args.stored_by === undefined ? {} : { storedBy: args.stored_by }),
          ...(args.exclude_self ? { excludeAgent: context.scope.agent } : {}),
        });
        return manifestView(entries);
      },
    }),
    defineTool({
      name: 'update_env_data',
      description:
        'Change an existing entry: a new short description, a new value, or both (what you leave out is kept). ' +
        'Give expected_version to refuse the update if someone changed the entry since you read it.',
      parameters: z.strictObject({
        key,
        short_description: shortDescription.optional(),
        value: z.unknown().optional().describe('The new value (any JSON value).'),
        expected_version: z.int().min(1).optional().describe('The version you read; the update fails if it moved on.'),
      }),
      handledBy: 'activity',
      run: (args, context) =>
        refusalsAsToolErrors(async () => {
          const result = await env(context).update(context.scope, context.operationId, {
            key: args.key,
            shortDescription: args.short_description,
            value: args.value,
            expectedVersion: args.expected_version,
          });
          return `Updated '${args.key}' (now version ${result.version}).`;
        }),
    }),
    defineTool({
      name: 'delete_env_data',
      description: 'Delete an entry of the shared environment data (its history stays in the event log).',
      parameters: z.strictObject({ key }),
      handledBy: 'activity',
      run: (args, context) =>
        refusalsAsToolErrors(async () => {
          await env(context).delete(context.scope, context.operationId, args.key);
          return `Deleted '${args.key}' from environment data.`;
        }),
    }),
  ];
}
