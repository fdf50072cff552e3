/**
 * The LangGraph.js side of bench/langgraph.bench.ts: the agent loop a LangGraph user writes, checkpointed in Postgres.
 * It follows LangGraph's own graph-API pattern for a tool-calling agent: a `StateGraph` over `MessagesAnnotation`, a
 * model node calling LangChain's `ChatOpenAI` with the tools bound, a prebuilt `ToolNode`, `toolsCondition` between
 * them, compiled with `PostgresSaver` as its checkpointer. `ChatOpenAI` rather than a bare `openai` client in the node:
 * it is what LangGraph's documentation and its prebuilt agents use, so its cost (messages converted both ways, the
 * callbacks) is part of what a LangGraph user pays; underneath it is the `openai` client all the same.
 *
 * What it shares with Baton's side, so the two do the same I/O: the model is the scripted model server of Baton's
 * harness (over HTTP, the same `x-baton-*` headers), the request carries the system prompt and tool definitions
 * Baton's worker sent (`RecordedRequest`), the `think` tool answers what Baton's does, and the checkpoints go to the
 * bench's own Postgres database (the tables `PostgresSaver.setup()` creates, beside Baton's).
 */
import { HumanMessage, SystemMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { ChatOpenAI } from '@langchain/openai';
import type { Pool } from 'pg';
import { z } from 'zod';
import { uniqueThreadId } from '../testing/test-env';
import { TURN_MESSAGE, type RecordedRequest } from './baselines';
import type { BenchContext } from './common';

/**
 * LangGraph's `durability` settings: `async` (its default) stores each step's checkpoint while the next step runs and
 * waits for them all before `invoke` returns; `sync` stores it before the next step starts (as Baton stores each step
 * before the next); `exit` stores one at the end.
 */
export const LANGGRAPH_DURABILITIES = ['async', 'sync', 'exit'] as const;
export type LangGraphDurability = (typeof LANGGRAPH_DURABILITIES)[number];

/** What `think` answers in Baton (activities/tools/universal.ts), so the tool message is the same. */
const THOUGHT_RECORDED = 'Thought recorded.';

/** Told a turn's `thread_id` as its timed part begins (a bench timing the turn's first model call). */
export type TurnStarted = (threadId: string) => void;

/** The LangGraph side: its checkpointer and ways to prepare one turn, on a fresh `thread_id` or a standing one. */
export interface LangGraphSide {
  /** Prepares a turn (nothing to set up: a thread exists once its first checkpoint is stored); returns its timed part. */
  readonly prepareTurn: (started?: TurnStarted) => () => Promise<() => Promise<void>>;
  /**
   * Prepares the second turn of a thread: its first turn runs untimed (the `standingAgent`'s script answers both);
   * the timed part is the next message on the checkpointed thread, as a chat's next message.
   */
  readonly prepareStandingTurn: (started?: TurnStarted) => () => Promise<() => Promise<void>>;
  /** Runs one turn untimed and counts the rows its checkpointer stored for it. */
  readonly countCheckpointRows: () => Promise<{ checkpoints: number; blobs: number; writes: number }>;
}

/**
 * Builds the graph on the bench's database (creating the checkpointer's tables) and the given scripted model.
 * @param agent the agent whose script the model answers from (its `x-baton-agent` header)
 * @param standingAgent the agent whose script answers a standing thread's turns (two of `steps` each)
 * @param steps model calls a turn must make (its replies: each a `think` call, then the answer)
 */
export async function startLangGraph(
  context: BenchContext,
  options: {
    pool: Pool;
    modelBaseURL: string;
    agent: string;
    standingAgent: string;
    steps: number;
    request: RecordedRequest;
    durability: LangGraphDurability;
  },
): Promise<LangGraphSide> {
  // As LangGraph's documentation sets it up: from the connection string (a pool of its own, pg's default size, as
  // Baton's pool), `setup()` once.
  const checkpointer = PostgresSaver.fromConnString(context.stack.databaseUrl);
  context.defer(() => checkpointer.end());
  await checkpointer.setup();

  const recordedThink = options.request.tools.find(
    (definition) => definition.type === 'function' && definition.function.name === 'think',
  );
  const think = tool(() => THOUGHT_RECORDED, {
    name: 'think',
    description: recordedThink?.type === 'function' ? (recordedThink.function.description ?? '') : '',
    schema: z.object({ thought: z.string().min(1).describe('Your reasoning, plan or note.') }),
  });
  // Bound: the tool definitions Baton sent (`think` among them), so the request is as large as Baton's. Run: `think`,
  // the only one the script calls.
  const model = new ChatOpenAI({
    model: 'baton-scripted',
    apiKey: 'scripted',
    configuration: { baseURL: options.modelBaseURL, defaultHeaders: { 'x-baton-agent': options.agent } },
  }).bindTools(options.request.tools);

  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state, config) => {
      const threadId = String(config.configurable?.thread_id);
      const named: unknown = config.configurable?.agent;
      const agent = typeof named === 'string' ? named : options.agent;
      const reply = await model.invoke([new SystemMessage(options.request.system), ...state.messages], {
        options: { headers: { 'x-baton-agent': agent, 'x-baton-thread': threadId, 'x-baton-root-thread': threadId } },
      });
      return { messages: [reply] };
    })
    .addNode('tools', new ToolNode([think]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer });

  const runTurn = async (threadId: string, agent = options.agent): Promise<void> => {
    const result = await graph.invoke(
      { messages: [new HumanMessage(TURN_MESSAGE)] },
      { configurable: { thread_id: threadId, agent }, durability: options.durability },
    );
    checkTurn(result.messages, options.steps);
  };

  return {
    prepareTurn: (started) => () => {
      const threadId = uniqueThreadId('bench-langgraph');
      return Promise.resolve(() => {
        started?.(threadId);
        return runTurn(threadId);
      });
    },
    prepareStandingTurn: (started) => async () => {
      const threadId = uniqueThreadId('bench-langgraph-standing');
      await runTurn(threadId, options.standingAgent);
      return () => {
        started?.(threadId);
        return runTurn(threadId, options.standingAgent);
      };
    },
    countCheckpointRows: async () => {
      const threadId = uniqueThreadId('bench-langgraph');
      await runTurn(threadId);
      const count = async (table: string) =>
        Number(
          (
            await options.pool.query<{ count: string }>(`SELECT count(*) FROM ${table} WHERE thread_id = $1`, [
              threadId,
            ])
          ).rows[0]?.count,
        );
      return {
        checkpoints: await count('checkpoints'),
        blobs: await count('checkpoint_blobs'),
        writes: await count('checkpoint_writes'),
      };
    },
  };
}

/**
 * A turn must end after `steps` model replies (each but the last calling a tool), every call answered: counted from
 * its message, the thread's last human one (a standing thread's state holds its earlier turns too).
 */
function checkTurn(allMessages: readonly BaseMessage[], steps: number): void {
  const messages = allMessages.slice(allMessages.findLastIndex((message) => message.type === 'human') + 1);
  const replies = messages.filter((message) => message.type === 'ai').length;
  const toolResults = messages.filter((message) => message.type === 'tool').length;
  const last = messages.at(-1);
  if (replies !== steps || toolResults !== steps - 1 || last?.type !== 'ai') {
    throw new Error(
      `LangGraph turn ended after ${replies} model replies and ${toolResults} tool results (last: ${last?.type ?? 'none'}), not ${steps} and ${steps - 1}`,
    );
  }
}
