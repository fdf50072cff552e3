import { z } from 'zod';
import { ENV_KEY_PATTERN } from '../../common/env-data';
import { MAX_DELEGATION_MESSAGE_LENGTH } from './delegation';
import { defineTool } from './types';

/** The most tasks the schema accepts; the world's `BATON_MAX_FORK_TASKS` (default 32) is usually lower. */
export const MAX_FORK_TASKS_HARD_LIMIT = 256;
/** @default 900 */
export const DEFAULT_FORK_DEADLINE_SECONDS = 900;
/** @default 8 */
export const DEFAULT_FORK_MAX_PARALLEL = 8;

export const forkJoinParameters = z.strictObject({
  tasks: z
    .array(
      z.strictObject({
        agent: z.string().min(1).describe('The agent that runs this task (one you can call).'),
        message: z
          .string()
          .trim()
          .min(1)
          .max(MAX_DELEGATION_MESSAGE_LENGTH)
          .describe('What this task asks, self-contained: the worker does not see your conversation.'),
        context_keys: z
          .array(z.string().min(1))
          .max(50)
          .optional()
          .describe('Keys of shared environment data this worker should read.'),
        thread: z
          .enum(['new', 'clone'])
          .optional()
          .describe("'new' (default): a fresh conversation; 'clone': seeded with a copy of yours."),
      }),
    )
    .min(1)
    .max(MAX_FORK_TASKS_HARD_LIMIT)
    .describe('The tasks to run in parallel; results come back in this order.'),
  fail_fast: z.boolean().optional().describe('Stop every other task as soon as one fails (default false).'),
  deadline_seconds: z
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .optional()
    .describe(
      `Seconds the whole fork may take; unfinished tasks are then stopped (default ${DEFAULT_FORK_DEADLINE_SECONDS}).`,
    ),
  max_parallel: z
    .int()
    .min(1)
    .max(MAX_FORK_TASKS_HARD_LIMIT)
    .optional()
    .describe(`Most tasks running at once (default ${DEFAULT_FORK_MAX_PARALLEL}).`),
  store: z
    .enum(['isolated', 'shared'])
    .optional()
    .describe(
      "'isolated' (default): each worker writes to its own store, merged into yours under the prefix when it " +
        "succeeds; 'shared': workers write straight into the shared data and see each other's writes.",
    ),
  prefix: z
    .string()
    .min(1)
    .max(100)
    .regex(ENV_KEY_PATTERN, { error: "may hold only letters, digits and _ - . / (e.g. 'hypotheses')" })
    .optional()
    .describe("Where isolated findings land: '<prefix>/<task index>/<key>' (default 'fork/<n>')."),
});

export type ForkJoinArguments = z.infer<typeof forkJoinParameters>;

/**
 * `fork_join`: runs several agents in parallel and joins their results. Declared in `capabilities`; every task's
 * agent must be one the caller may call too. The workflow carries it out (child turns, deadline, reclaim, merge).
 */
export const forkJoinTool = defineTool({
  name: 'fork_join',
  description:
    'Run several agents in parallel and wait for all of them (up to a deadline). Returns every task in input order ' +
    'with its status (success, failed, timeout, cancelled), reply and, for isolated stores, what it merged into the ' +
    'shared data. Use it to try several approaches at once or to split work.',
  parameters: forkJoinParameters,
  handledBy: 'workflow',
  check: (args, caller, registry) => {
    for (const [index, task] of args.tasks.entries()) {
      const where = `task ${index + 1} (agent '${task.agent}')`;
      if (!registry.isAgent(task.agent)) return `${where}: there is no agent '${task.agent}'. Nothing was started.`;
      if (!caller.capabilities.includes(task.agent)) {
        return `${where}: '${task.agent}' is not one of your capabilities, so you cannot give it a task. Nothing was started.`;
      }
    }
    if (args.store === 'shared' && args.prefix !== undefined) {
      return "'prefix' applies to isolated stores only: shared-store workers write their own keys. Nothing was started.";
    }
    return undefined;
  },
});
