import { z } from 'zod';
import { watchPatternSchema } from '../../common/agent-definition';
import { grantsCapability } from '../../common/capabilities';
import { MAX_ENV_DESCRIPTION_LENGTH, MAX_ENV_KEY_LENGTH, envKeyProblem } from '../../common/env-data';
import { MAX_DEBOUNCE_SECONDS, MAX_WATCH_MESSAGE_CHARS, MAX_WATCH_PATTERNS } from '../../common/watchers';
import {
  EnvDataError,
  EnvDataErrorType,
  versionConflictMessage,
  type EnvManifestEntry,
  type EnvProposal,
} from '../../db/env-data';
import { defineTool, ToolError, type ToolDefinition } from './types';

/** An env-data key as a tool argument: the store's own rule, said in the model's terms. */
export const envKeyArgument = z
  .string()
  .min(1)
  .max(MAX_ENV_KEY_LENGTH)
  .refine((value) => envKeyProblem(value) === undefined, {
    error: "may hold only letters, digits and _ - . / ('/' separates namespaces, e.g. 'arc/task')",
  })
  .describe("The entry's key, e.g. 'arc_task' or 'arc/observations'.");
const key = envKeyArgument;
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

/**
 * Entries per `list_env_data` page by default: with descriptions of up to 500 characters a page stays within a few
 * thousand tokens, however large the manifest grows.
 */
export const DEFAULT_LIST_LIMIT = 50;
/** The largest page a model may ask for. */
export const MAX_LIST_LIMIT = 200;

/**
 * The longest value (as JSON) a version conflict shows the model. A longer one is left out: the model reads the entry
 * again, or only the part it needs.
 */
export const MAX_CONFLICT_VALUE_CHARS = 2000;

/** Runs a store call, turning its refusals into errors the model can act on. */
async function refusalsAsToolErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof EnvDataError) throw new ToolError(refusalForModel(error));
    throw error;
  }
}

/**
 * A refusal as the model reads it. A version conflict comes with the entry's value when it is short, so the model can
 * retry from it in its next call instead of reading the entry first.
 */
function refusalForModel(error: EnvDataError): string {
  if (error.type !== EnvDataErrorType.VersionConflict || error.conflict === undefined) return error.message;
  const { key, expectedVersion, current } = error.conflict;
  const json = JSON.stringify(current.value);
  if (json.length > MAX_CONFLICT_VALUE_CHARS) return error.message;
  return versionConflictMessage(key, current.version, expectedVersion, json);
}

/**
 * The manifest as the model sees it: no values, and who stored what. Entries in the caller's own isolated store are
 * marked, and pending proposals follow the entries (only when there are any).
 */
function manifestView(entries: readonly EnvManifestEntry[], proposals: readonly EnvProposal[] = []) {
  const listed: Record<string, unknown>[] = entries.map((entry) => ({
    key: entry.key,
    short_description: entry.shortDescription,
    stored_by: entry.storedByTask ? `${entry.storedBy.agent} (${entry.storedByTask})` : entry.storedBy.agent,
    version: entry.version,
    updated_at: entry.updatedAt,
    ...(entry.scope === '' ? {} : { in: 'your isolated store (merged into the shared data if you succeed)' }),
    ...(entry.type === null ? {} : { type: entry.type }),
    ...(entry.tags.length === 0 ? {} : { tags: entry.tags }),
  }));
  for (const proposal of proposals) {
    listed.push({
      proposal: proposal.proposalId,
      key: proposal.key,
      proposed_by: proposal.forkTask
        ? `${proposal.proposedBy.agent} (${proposal.forkTask})`
        : proposal.proposedBy.agent,
      ...(proposal.shortDescription === null ? {} : { short_description: proposal.shortDescription }),
      ...(proposal.patch === null ? { value: proposal.value } : { patch: proposal.patch }),
      based_on_version: proposal.baseVersion,
      status: `pending: not applied; apply it with update_env_data({key: '${proposal.key}', proposal: '${proposal.proposalId}'})`,
    });
  }
  return listed;
}

/**
 * The five universal env-data capabilities, and `watch_env_data` (granted by name). The scope (the root thread) comes from the tool context, which the
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
          await context.env.store({
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
        const entry = await context.env.get(args.key);
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
        `version, by key, ${DEFAULT_LIST_LIMIT} at a time; when more match, the last item says how many and gives ` +
        'the cursor for the next page. Values are not included; read one with get_env_data.',
      parameters: z.strictObject({
        prefix: z.string().min(1).optional().describe("Only keys starting with this, e.g. 'arc/'."),
        type: z.string().min(1).optional().describe('Only entries of this type.'),
        tag: z.string().min(1).optional().describe('Only entries with this tag.'),
        stored_by: z.string().min(1).optional().describe('Only entries last written by this agent.'),
        exclude_self: z
          .boolean()
          .optional()
          .describe('Leave out entries you stored yourself (in a fork: see what the others found).'),
        limit: z
          .int()
          .min(1)
          .max(MAX_LIST_LIMIT)
          .optional()
          .describe(`Entries per page (default ${DEFAULT_LIST_LIMIT}, at most ${MAX_LIST_LIMIT}).`),
        cursor: z
          .string()
          .min(1)
          .max(MAX_ENV_KEY_LENGTH)
          .optional()
          .describe('The next_cursor of the previous page, to read the entries after it (keep the same filters).'),
      }),
      handledBy: 'activity',
      run: async (args, context) => {
        const page = await context.env.listPage(
          {
            ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
            ...(args.type === undefined ? {} : { type: args.type }),
            ...(args.tag === undefined ? {} : { tag: args.tag }),
            ...(args.stored_by === undefined ? {} : { storedBy: args.stored_by }),
            ...(args.exclude_self ? { excludeThread: context.scope.threadId } : {}),
          },
          { limit: args.limit ?? DEFAULT_LIST_LIMIT, ...(args.cursor === undefined ? {} : { after: args.cursor }) },
        );
        // Pending proposals follow the entries on the first page only.
        const proposals =
          args.cursor === undefined
            ? (await context.env.proposals()).filter(
                (proposal) => args.prefix === undefined || proposal.key.startsWith(args.prefix),
              )
            : [];
        const listed = manifestView(page.entries, proposals);
        if (page.nextCursor !== undefined) {
          listed.push({
            more: page.more,
            next_cursor: page.nextCursor,
            note:
              `${page.more} more entries match: call list_env_data with cursor '${page.nextCursor}' and the same ` +
              'filters to see the next page (or narrow it with prefix, type or tag).',
          });
        }
        return listed;
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
        proposal: z
          .string()
          .regex(/^p[1-9][0-9]*$/, { error: "is a proposal id such as 'p1' (list_env_data shows them)" })
          .optional()
          .describe('Apply this pending proposal (from a fork worker) to the entry instead of giving a value.'),
      }),
      handledBy: 'activity',
      run: (args, context) =>
        refusalsAsToolErrors(async () => {
          if (args.proposal !== undefined) {
            if (args.value !== undefined || args.short_description !== undefined) {
              throw new ToolError('give either a proposal to apply or a new value/short_description, not both');
            }
            const accepted = await context.env.acceptProposal(args.key, args.proposal);
            return `Applied proposal ${args.proposal} to '${args.key}' (now version ${accepted.version}).`;
          }
          const result = await context.env.update({
            key: args.key,
            shortDescription: args.short_description,
            value: args.value,
            expectedVersion: args.expected_version,
          });
          if (result.action === 'proposed') {
            return (
              `'${args.key}' belongs to the shared data and your store is isolated, so it was not changed: your ` +
              `update is recorded as proposal ${result.proposalId ?? ''}, offered to your caller if you succeed.`
            );
          }
          return `Updated '${args.key}' (now version ${result.version}).`;
        }),
    }),
    defineTool({
      name: 'delete_env_data',
      description: 'Delete an entry of the shared environment data (its history stays in the event log).',
      parameters: z.strictObject({
        key,
        reason: z.string().trim().min(1).max(500).optional().describe('Why, kept in the event log.'),
      }),
      handledBy: 'activity',
      run: (args, context) =>
        refusalsAsToolErrors(async () => {
          await context.env.delete(args.key, args.reason);
          return `Deleted '${args.key}' from environment data.`;
        }),
    }),
    defineTool({
      name: 'watch_env_data',
      description:
        'Watch keys of the shared environment data: from now on, whenever another agent changes a matching key, a ' +
        'turn of the watching agent (you, or an agent you may call) runs in a thread of its own, told what changed. ' +
        "Patterns use '/' between segments, '*' for one segment, '**' for any number.",
      parameters: z.strictObject({
        keys: z
          .array(watchPatternSchema)
          .min(1)
          .max(MAX_WATCH_PATTERNS)
          .describe("Key patterns to watch, e.g. ['findings/*', 'arc/**', 'arc_task']."),
        agent: z.string().min(1).max(64).optional().describe('The agent that wakes: yourself when omitted.'),
        message: z
          .string()
          .trim()
          .min(1)
          .max(MAX_WATCH_MESSAGE_CHARS)
          .optional()
          .describe('What the watching agent should do when it wakes.'),
        debounce_s: z
          .number()
          .min(0)
          .max(MAX_DEBOUNCE_SECONDS)
          .optional()
          .describe('Seconds to wait after a change for more, handled in the same wake-up.'),
        name: z.string().min(1).max(64).optional().describe("The watcher's name: the agent's when omitted."),
      }),
      handledBy: 'activity',
      run: async (args, context) => {
        const agent = args.agent ?? context.agent.name;
        if (agent !== context.agent.name && !grantsCapability(context.agent.capabilities, agent)) {
          throw new ToolError(
            `you may set a watcher only for yourself or an agent you may call, and '${agent}' is not one of them`,
          );
        }
        const watcher = await context.env.watch({
          agent,
          keys: args.keys,
          ...(args.debounce_s === undefined ? {} : { debounceS: args.debounce_s }),
          ...(args.message === undefined ? {} : { message: args.message }),
          ...(args.name === undefined ? {} : { name: args.name }),
        });
        return (
          `Watcher '${watcher.name}' set: ${watcher.agent} wakes when ${watcher.keys.join(', ')} change ` +
          '(not for its own writes).'
        );
      },
    }),
  ];
}
