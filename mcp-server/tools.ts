/**
 * The tools `baton mcp serve` offers an MCP client: each a zod schema for its arguments (the JSON Schema clients
 * see is made from it) and a function over the client SDK. A tool's result is the JSON the SDK returns, the same
 * rows `baton … --json` prints; arguments are snake_case, as the tools Baton gives its own agents.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { BatonClientError, type BatonClient, type StoredAgent, type ThreadHandle } from '../client';
import { publicDefinition } from '../client/agents';
import { describeError } from '../client/errors';
import { MAX_APPROVAL_REASON_CHARS, MAX_DECIDED_BY_CHARS, type SendMessageResult } from '../common/types';
import { agentResourceUri } from './resources';

/** How long `wait: true` waits for a reply unless told otherwise. */
export const DEFAULT_WAIT_SECONDS = 20;
/**
 * The longest any call waits for a turn: below the 60 s many MCP clients give a request (the TypeScript SDK's
 * default), so a long turn never holds a request open until the client gives up on it; the client polls instead.
 */
export const MAX_WAIT_SECONDS = 50;
/** Transcript messages and env-data entries one call returns unless told otherwise, and at most. */
const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;
/**
 * How long `start_thread` and `send_message` wait for the thread to accept the message before the call fails saying no
 * worker took it (`BatonMcpServerOptions.acceptWaitSeconds`).
 */
export const DEFAULT_ACCEPT_WAIT_SECONDS = 20;
/** How long `get_thread` waits for the thread's worker to say what it is doing (`statusWaitSeconds`). */
export const DEFAULT_STATUS_WAIT_SECONDS = 10;

/** The server's own bounds on waiting for a worker, in seconds. */
export interface McpServerWaits {
  /** @default DEFAULT_ACCEPT_WAIT_SECONDS */
  readonly acceptWaitSeconds: number;
  /** @default DEFAULT_STATUS_WAIT_SECONDS */
  readonly statusWaitSeconds: number;
}

/** What a tool runs with. */
export interface ToolCallContext {
  client: BatonClient;
  /** How long a call waits for a worker to accept a message or to answer a status query. */
  waits: McpServerWaits;
  /** Aborted when the client cancels the request or goes away. */
  signal: AbortSignal;
  /** The MCP client's name from its `initialize`, for the record of who decided an approval. */
  clientName: string | undefined;
}

export interface McpTool<Schema extends z.ZodType = z.ZodType> {
  name: string;
  title: string;
  description: string;
  parameters: Schema;
  annotations: ToolAnnotations;
  run(args: z.infer<Schema>, context: ToolCallContext): Promise<Record<string, unknown>>;
}

function tool<Schema extends z.ZodType>(definition: McpTool<Schema>): McpTool {
  return definition;
}

const READ_ONLY: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
const WRITES: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, openWorldHint: false };

const threadId = z.string().min(1).max(500).describe('The thread id (a root thread unless said otherwise).');
const rootThreadId = threadId.describe('The root thread id: questions, approvals and env data belong to a whole tree.');
const message = z.string().min(1).describe('The message, self-contained: the agent sees only its own thread.');
const wait = z
  .boolean()
  .optional()
  .describe(
    `Wait for the reply, at most wait_seconds (default ${DEFAULT_WAIT_SECONDS}); if the turn is still running ` +
      'then, the result says so and get_thread with the message_id waits again. Without it, return at once.',
  );
const waitSeconds = z
  .int()
  .min(1)
  .max(MAX_WAIT_SECONDS)
  .optional()
  .describe(`How long to wait for the reply, in seconds (1 to ${MAX_WAIT_SECONDS}).`);
/** What a decision's `decidedBy` gets after the name given: the way it came, which the caller cannot leave out. */
const MCP_CHANNEL = ' (over MCP)';
const allRows = z.boolean().optional().describe('Closed ones too (answered, decided, expired, cancelled).');

/** What a thread's turns wait for from a person: its open questions and pending approvals, whole tree included. */
async function waitingForPeople(thread: ThreadHandle): Promise<Record<string, unknown>> {
  const [questions, approvals] = await Promise.all([thread.questions(), thread.approvals()]);
  return {
    openQuestions: questions.map(({ questionId, agent, threadId: asker, question, expiresAt }) => ({
      questionId,
      agent,
      threadId: asker,
      question,
      expiresAt,
    })),
    pendingApprovals: approvals.map(
      ({ approvalId, agent, threadId: caller, tool: name, arguments: args, expiresAt }) => ({
        approvalId,
        agent,
        threadId: caller,
        tool: name,
        arguments: args,
        expiresAt,
      }),
    ),
  };
}

/**
 * The result of the turn answering the message posted under `messageId`, waiting for it at most `waitSeconds` (at
 * least a brief look); `undefined` while it runs.
 * @throws BatonClientError naming the thread and the message when the turn failed.
 */
async function awaitReply(
  thread: ThreadHandle,
  messageId: string,
  waitSeconds: number,
  signal: AbortSignal,
): Promise<SendMessageResult | undefined> {
  try {
    return await thread.reply(messageId, { waitMs: waitSeconds * 1000, signal });
  } catch (error) {
    if (!(error instanceof WorkflowUpdateFailedError)) throw error;
    throw new BatonClientError(
      `the turn answering message '${messageId}' of thread '${thread.threadId}' failed: ${describeError(error)}`,
      { cause: error },
    );
  }
}

/**
 * What `start_thread` and `send_message` return: the reply when it came within `waitSeconds` (0: return at once),
 * else `running` with what the thread waits for from a person and how to go on.
 */
async function sentMessage(
  thread: ThreadHandle,
  messageId: string,
  waitSeconds: number,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const result = waitSeconds > 0 ? await awaitReply(thread, messageId, waitSeconds, signal) : undefined;
  if (result) return { ...result, messageId };
  return {
    threadId: thread.threadId,
    messageId,
    status: 'running',
    ...(await waitingForPeople(thread)),
    next:
      `The turn is still running: call get_thread with thread_id '${thread.threadId}', message_id ` +
      `'${messageId}' and wait_seconds for its reply (answer its open questions and approvals first, if it has any).`,
  };
}

/** A message's outcome inside `get_thread`: its turn's result, `running`, or `failed` with the reason. */
async function messageOutcome(
  thread: ThreadHandle,
  messageId: string,
  waitSeconds: number,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  try {
    const result = await awaitReply(thread, messageId, waitSeconds, signal);
    return result ? { ...result, messageId } : { messageId, status: 'running' };
  } catch (error) {
    if (!(error instanceof BatonClientError && error.cause instanceof WorkflowUpdateFailedError)) throw error;
    return { messageId, status: 'failed', error: error.message };
  }
}

function agentSummary(stored: StoredAgent): Record<string, unknown> {
  const { body: _body, ...frontmatter } = publicDefinition(stored.definition);
  return { ...frontmatter, version: stored.version, uri: agentResourceUri(stored.definition.name) };
}

export const TOOLS: readonly McpTool[] = [
  tool({
    name: 'list_agents',
    title: 'List agents',
    description:
      "The agents Baton's workers have defined: name, description, capabilities and options. Each one's full " +
      'definition (its system prompt too) is the resource at its uri.',
    parameters: z.strictObject({}),
    annotations: READ_ONLY,
    async run(_args, { client }) {
      return { agents: (await client.agents()).map(agentSummary) };
    },
  }),
  tool({
    name: 'start_thread',
    title: 'Start a thread',
    description:
      'Starts a conversation (a root thread) with an agent and sends it the first message. Returns the thread id ' +
      'and the message id at once, or with wait: true the reply (within a bounded wait; a longer turn is ' +
      'followed with get_thread).',
    parameters: z.strictObject({
      agent: z.string().min(1).describe('The agent that answers (list_agents names them).'),
      message,
      thread_id: z
        .string()
        .optional()
        .describe("A thread id of your own (letters, digits, '_', '-', '.'); a new one is made without it."),
      world: z.string().optional().describe("The world the conversation runs in (default 'default')."),
      wait,
      wait_seconds: waitSeconds,
    }),
    annotations: WRITES,
    async run(args, { client, signal, waits }) {
      await client.agent(args.agent);
      const thread = await client.startThread({
        agent: args.agent,
        ...(args.thread_id === undefined ? {} : { threadId: args.thread_id }),
        ...(args.world === undefined ? {} : { world: args.world }),
      });
      const posted = await thread.post(args.message, { acceptWaitMs: waits.acceptWaitSeconds * 1000 });
      return sentMessage(thread, posted.messageId, waitFor(args), signal);
    },
  }),
  tool({
    name: 'send_message',
    title: 'Send a message',
    description:
      "Sends the next message to a root thread; its agent answers after the thread's earlier messages. Returns at " +
      'once, or with wait: true the reply (within a bounded wait). Under a message_id of your own the message is ' +
      'delivered once however often you send it, and sending it again returns its turn.',
    parameters: z.strictObject({
      thread_id: threadId,
      message,
      message_id: z
        .string()
        .optional()
        .describe('An id of your own for this message (at most 200 characters), so a retry runs no second turn.'),
      wait,
      wait_seconds: waitSeconds,
    }),
    annotations: WRITES,
    async run(args, { client, signal, waits }) {
      const thread = client.thread(args.thread_id);
      const posted = await thread.post(args.message, {
        acceptWaitMs: waits.acceptWaitSeconds * 1000,
        ...(args.message_id === undefined ? {} : { messageId: args.message_id }),
      });
      return sentMessage(thread, posted.messageId, waitFor(args), signal);
    },
  }),
  tool({
    name: 'get_thread',
    title: 'Get a thread',
    description:
      "A root thread's state: its agent, turns, whether a turn is running, the waits in progress in its tree, its " +
      'last reply, token usage, and the questions and approvals waiting for a person. With message_id, also that ' +
      "message's outcome, waiting for it at most wait_seconds.",
    parameters: z.strictObject({
      thread_id: threadId,
      message_id: z.string().optional().describe('A message start_thread or send_message returned.'),
      wait_seconds: waitSeconds.describe(
        `With message_id: wait at most this long for that message's reply (1 to ${MAX_WAIT_SECONDS}); default: do not wait.`,
      ),
    }),
    annotations: READ_ONLY,
    async run(args, { client, signal, waits }) {
      if (args.wait_seconds !== undefined && args.message_id === undefined) {
        throw new BatonClientError("'wait_seconds' waits for one message's reply: give its 'message_id' too");
      }
      const thread = client.thread(args.thread_id);
      const outcome =
        args.message_id === undefined
          ? undefined
          : await messageOutcome(thread, args.message_id, args.wait_seconds ?? 0, signal);
      const status = await thread.status({ timeoutMs: waits.statusWaitSeconds * 1000 });
      const [lastReply, usage, people] = await Promise.all([
        thread.lastReply(),
        thread.usage(),
        waitingForPeople(thread),
      ]);
      return {
        ...status,
        threadId: thread.threadId,
        lastReply: lastReply
          ? { seq: lastReply.seq, agent: lastReply.agent, content: lastReply.content, createdAt: lastReply.createdAt }
          : null,
        usage,
        ...people,
        ...(outcome ? { message: outcome } : {}),
      };
    },
  }),
  tool({
    name: 'get_transcript',
    title: 'Get a transcript',
    description:
      "One page of a thread's messages in order (a root thread's, or a delegation thread's such as " +
      "'<root>/<agent>-1'): user messages, the agent's replies and tool calls, tool results. Page on with after.",
    parameters: z.strictObject({
      thread_id: threadId.describe("The thread id: a root thread, or a delegation thread '<root>/<agent>-<n>'."),
      after: z.int().min(0).optional().describe('Messages after this sequence number (default 0: from the start).'),
      limit: z
        .int()
        .min(1)
        .max(MAX_PAGE)
        .optional()
        .describe(`Messages per page (default ${DEFAULT_PAGE}, at most ${MAX_PAGE}).`),
    }),
    annotations: READ_ONLY,
    async run(args, { client }) {
      const page = await client
        .thread(args.thread_id)
        .transcriptPage({ after: args.after ?? 0, limit: args.limit ?? DEFAULT_PAGE });
      return { threadId: args.thread_id, ...page };
    },
  }),
  tool({
    name: 'list_questions',
    title: 'List questions',
    description:
      "The questions agents of a root thread's whole tree asked a person (ask_human) that wait for an answer; " +
      'with all: true, the answered, expired and cancelled ones too.',
    parameters: z.strictObject({ thread_id: rootThreadId, all: allRows }),
    annotations: READ_ONLY,
    async run(args, { client }) {
      return { questions: await client.thread(args.thread_id).questions({ all: args.all ?? false }) };
    },
  }),
  tool({
    name: 'answer_question',
    title: 'Answer a question',
    description: 'Answers an open question (q1, q2, … as list_questions lists them); the turn that asked it goes on.',
    parameters: z.strictObject({
      thread_id: rootThreadId,
      question_id: z.string().regex(/^q[1-9][0-9]{0,8}$/, 'must be a question id such as q1'),
      answer: z.string().refine((text) => text.trim() !== '', 'must not be empty'),
    }),
    annotations: WRITES,
    async run(args, { client }) {
      return { ...(await client.thread(args.thread_id).answer(args.question_id, args.answer)) };
    },
  }),
  tool({
    name: 'list_approvals',
    title: 'List approvals',
    description:
      "The tool calls of a root thread's whole tree that wait for a person's approval before they run (the tool, " +
      'its exact arguments, the agent); with all: true, the decided, expired and cancelled ones too.',
    parameters: z.strictObject({ thread_id: rootThreadId, all: allRows }),
    annotations: READ_ONLY,
    async run(args, { client }) {
      return { approvals: await client.thread(args.thread_id).approvals({ all: args.all ?? false }) };
    },
  }),
  tool({
    name: 'decide_approval',
    title: 'Approve or reject a tool call',
    description:
      'Approves a pending tool call (a1, a2, … as list_approvals lists them), which then runs, or rejects it: it ' +
      'does not run, and the agent reads the reason. The decision is recorded as made by `by` (over MCP).',
    parameters: z.strictObject({
      thread_id: rootThreadId,
      approval_id: z.string().regex(/^a[1-9][0-9]{0,8}$/, 'must be an approval id such as a1'),
      decision: z.enum(['approve', 'reject']),
      reason: z
        .string()
        .max(MAX_APPROVAL_REASON_CHARS)
        .optional()
        .describe('Why it is rejected, told to the agent (with reject only).'),
      by: z
        .string()
        .trim()
        .min(1)
        .max(MAX_DECIDED_BY_CHARS - MCP_CHANNEL.length)
        .optional()
        .describe("Who decides, for the record (default: this MCP client's name); recorded with ' (over MCP)'."),
    }),
    annotations: { ...WRITES, destructiveHint: true },
    async run(args, { client, clientName }) {
      if (args.decision === 'approve' && args.reason !== undefined) {
        throw new BatonClientError("'reason' goes with a rejection: an approval has none");
      }
      // The name is the caller's claim; that the decision came over MCP is the server's to record.
      const name = args.by ?? (clientName ?? 'an MCP client').slice(0, MAX_DECIDED_BY_CHARS - MCP_CHANNEL.length);
      const by = `${name}${MCP_CHANNEL}`;
      const thread = client.thread(args.thread_id);
      const result =
        args.decision === 'approve'
          ? await thread.approve(args.approval_id, { by })
          : await thread.reject(args.approval_id, {
              by,
              ...(args.reason === undefined ? {} : { reason: args.reason }),
            });
      return { ...result };
    },
  }),
  tool({
    name: 'list_env_data',
    title: 'List environment data',
    description:
      "The manifest of a root thread's shared environment data (what its agents stored for each other): key, " +
      'description, who stored it, version; never values (get_env_data reads one). Paged by key.',
    parameters: z.strictObject({
      thread_id: rootThreadId,
      prefix: z.string().optional().describe("Keys starting with this (a namespace such as 'arc/')."),
      type: z.string().optional(),
      tag: z.string().optional(),
      stored_by: z.string().optional().describe('Entries last written by this agent.'),
      limit: z
        .int()
        .min(1)
        .max(MAX_PAGE)
        .optional()
        .describe(`Entries per page (default ${DEFAULT_PAGE}, at most ${MAX_PAGE}).`),
      after: z.string().optional().describe('The nextCursor of the previous page.'),
    }),
    annotations: READ_ONLY,
    async run(args, { client }) {
      const page = await client.thread(args.thread_id).envDataPage(
        {
          ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
          ...(args.type === undefined ? {} : { type: args.type }),
          ...(args.tag === undefined ? {} : { tag: args.tag }),
          ...(args.stored_by === undefined ? {} : { storedBy: args.stored_by }),
        },
        { limit: args.limit ?? DEFAULT_PAGE, ...(args.after === undefined ? {} : { after: args.after }) },
      );
      return { threadId: args.thread_id, ...page };
    },
  }),
  tool({
    name: 'get_env_data',
    title: 'Get environment data',
    description: "One entry of a root thread's shared environment data, with its value.",
    parameters: z.strictObject({ thread_id: rootThreadId, key: z.string().min(1) }),
    annotations: READ_ONLY,
    async run(args, { client }) {
      const entry = await client.thread(args.thread_id).envGet(args.key);
      if (!entry) throw new BatonClientError(`no entry '${args.key}' in thread '${args.thread_id}'`);
      return { ...entry };
    },
  }),
];

/** Seconds to wait for a reply: none unless `wait`, then `wait_seconds` or the default. */
function waitFor(args: { wait?: boolean | undefined; wait_seconds?: number | undefined }): number {
  if (!args.wait) {
    if (args.wait_seconds !== undefined) throw new BatonClientError("'wait_seconds' goes with 'wait: true'");
    return 0;
  }
  return args.wait_seconds ?? DEFAULT_WAIT_SECONDS;
}
