/**
 * `npm run record-histories [-- <scenario> …]`: runs the replay scenarios (or the ones named) on a fresh test stack
 * and writes their workflow histories to `test/replay/histories/`. Record a new scenario when a workflow gains
 * behaviour, and keep the files older code recorded: `test/replay` then proves they still replay (a change to what
 * they exercise goes behind `patched()`).
 */
import { ENV_CHANGED_SIGNAL, watcherWorkflowId, type EnvChangedSignalInput } from '../common/watchers';
import { SIGNALS_PER_RUN } from '../workflows/watcher';
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { z } from 'zod';
import type { McpServers } from '../activities/tools/mcp-servers';
import { defineTool } from '../activities/tools/types';
import { parseAgentFile } from '../worker/agents';
import { startAgentHarness, type AgentHarness } from './harness';
import { runThreadId, scheduleId, type ScheduledRunInput } from '../common/schedules';
import { scrubMachinePaths } from './history-paths';
import { parseScript } from '../scripted-model';
import { installRuntime } from '../worker/runtime';
import { startMcpServers } from '../worker/mcp';
import { stdioServerEntry, writeMcpConfig } from './mcp-reference-servers';
import { startTestStack } from './test-stack';
import { uniqueTaskQueue } from './test-env';

const ROOT = path.resolve(__dirname, '..');
const HISTORIES_DIR = path.join(ROOT, 'test', 'replay', 'histories');
const log = (line: string) => process.stderr.write(`[record] ${line}\n`);
/** The MCP server the harness connects (server-everything over stdio), whose tools `mcp-user` calls. */
const MCP_SERVER = 'everything';

/**
 * Agents and script of the recorded scenarios: a conversation, tool calls (good and refused) in one reply, a
 * retried model call, a question answered by a human, a thread that continues as new, a three-level delegation
 * (with two concurrent calls to one agent, the second reusing the first one's thread), fork/join, and `wait` calls
 * ended by their timer, by a wake and by a human message, a turn taking fewer dispatches per step, and tool calls
 * waiting for approval (a user tool's, approved and rejected, and one of Baton's own that expires), a delegated
 * turn and a fork task stopped by their own `timeout_s` and fenced by their caller, a message sent again under its
 * id after the thread continued as new, a turn whose own workflow code throws, and calls of an MCP server's tools
 * (server-everything over stdio: a read-only one and one with side effects, in one reply), a turn whose steps run
 * as local activities (`steps: local`) and one whose steps run in batches (`steps: batched`, its first batch also in
 * its `beginTurn`), turns begun (and, with local steps, answered) in their thread's workflow, and fork tasks begun
 * (and stepped, with local and with activity steps) in their fork's workflow, and watchers: woken by a write, through
 * a flood of signals, and by signals naming a traced writer's span; a turn asked for more budget, and a typed agent
 * asked to fix its answer.
 */
const agents = new Map(
  [
    '---\nname: greeter\ndescription: Greets people.\n---\nYou greet people.\n',
    '---\nname: caller\ndescription: Calls tools.\ncapabilities: [load_arc_task]\n---\nYou call tools.\n',
    '---\nname: flaky\ndescription: Its model fails once.\n---\nYou are flaky.\n',
    '---\nname: asker\ndescription: Asks a human.\n---\nYou ask.\n',
    '---\nname: lead\ndescription: Delegates to mid.\ncapabilities: [mid]\n---\nYou lead.\n',
    '---\nname: mid\ndescription: Delegates to leaf.\ncapabilities: [leaf, load_arc_task]\n---\nYou relay.\n',
    '---\nname: leaf\ndescription: Answers.\n---\nYou answer.\n',
    '---\nname: forker\ndescription: Fans work out.\ncapabilities: [fork_join, digger, dawdler, failer]\n---\nYou fork.\n',
    '---\nname: digger\ndescription: Finds things.\n---\nYou dig.\n',
    '---\nname: dawdler\ndescription: Too slow.\n---\nYou dawdle.\n',
    '---\nname: failer\ndescription: Its model refuses it.\n---\nYou fail.\n',
    '---\nname: waiter\ndescription: Waits.\n---\nYou wait.\n',
    '---\nname: sleeper\ndescription: Waits long.\n---\nYou sleep.\n',
    '---\nname: stepper\ndescription: Works in steps.\nmax_steps: 4\ncapabilities: [load_arc_task]\n---\nYou step.\n',
    '---\nname: gatekeeper\ndescription: Deploys with approval.\ncapabilities: [deploy, load_arc_task]\n' +
      'approval: [{ tool: load_arc_task, timeout_s: 1 }]\n---\nYou deploy.\n',
    '---\nname: fencer\ndescription: Calls slow agents.\ncapabilities: [fork_join, slowpoke, dawdler]\n---\nYou wait.\n',
    '---\nname: slowpoke\ndescription: Slower than its timeout.\ntimeout_s: 1\n---\nYou are slow.\n',
    `---\nname: mcp-user\ndescription: Calls an MCP server.\ncapabilities: [mcp:${MCP_SERVER}]\n---\nYou use MCP.\n`,
    '---\nname: local\ndescription: Steps inside the workflow task.\nsteps: local\ncapabilities: [leaf, load_arc_task]\n' +
      '---\nYou step locally.\n',
    '---\nname: quickstep\ndescription: Answers inside its thread.\nsteps: local\n---\nYou answer at once.\n',
    '---\nname: batcher\ndescription: Steps in batches.\nsteps: batched\ncapabilities: [leaf, load_arc_task]\n' +
      '---\nYou step in batches.\n',
    '---\nname: batchlead\ndescription: Begins with a batch.\nsteps: batched\ncapabilities: [batchleaf]\n---\nYou lead.\n',
    '---\nname: batchleaf\ndescription: Answers in a batch.\nsteps: batched\n---\nYou answer.\n',
    '---\nname: tasklead\ndescription: Forks tasks that begin in the fork.\n' +
      'capabilities: [fork_join, quicktask, deeptask, digger]\n---\nYou fork.\n',
    '---\nname: quicktask\ndescription: Answers in its first batch.\nsteps: batched\n---\nYou answer.\n',
    '---\nname: deeptask\ndescription: Steps locally, then delegates.\nsteps: local\ncapabilities: [leaf]\n' +
      '---\nYou go deep.\n',
    '---\nname: actlead\ndescription: Forks tasks that step as activities in the fork.\n' +
      'capabilities: [fork_join, digger, actdeep, dawdler]\n---\nYou fork.\n',
    '---\nname: actdeep\ndescription: Steps as activities, then delegates.\ncapabilities: [leaf]\n' +
      '---\nYou go deep.\n',
    '---\nname: watchlead\ndescription: Gets a watcher ready, then writes.\ncapabilities: [watchful]\n---\nYou lead.\n',
    '---\nname: watchful\ndescription: Watches w/*.\nwatches:\n  - keys: ["w/*"]\n    debounce_s: 0\n' +
      '    message: "Look at w."\n---\nYou watch.\n',
    '---\nname: floodlead\ndescription: Writes a watched value.\n---\nYou write.\n',
    '---\nname: floodwatched\ndescription: Watches fw/* through a flood of signals.\n---\nYou watch.\n',
    '---\nname: tracelead\ndescription: Writes a value a traced writer also signals.\n---\nYou write.\n',
    '---\nname: tracewatched\ndescription: Watches tw/*.\n---\nYou watch.\n',
    '---\nname: budgetasker\ndescription: Asks for more budget.\nsteps: local\non_budget: ask\n' +
      'budget: { tokens: 100000 }\ncapabilities: [load_arc_task]\n---\nYou ask.\n',
    '---\nname: typist\ndescription: Answers with a typed object.\n' +
      'output: { type: object, properties: { total: { type: integer } }, required: [total] }\n---\nYou count.\n',
  ].map((text) => {
    const agent = parseAgentFile(text, 'record-histories');
    return [agent.name, agent];
  }),
);
const script = parseScript(
  `
agents:
  greeter:
    - say: "Hello, human."
    - say: "Hello again."
    - say: "Third time."
  caller:
    - calls:
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: think, args: { thought: "two calls at once" } }
        - { call: read_file, args: { path: "not-mine.txt" } }
    - say: "Answered with tools."
  flaky:
    - fail: 503
    - say: "Recovered."
  asker:
    - call: ask_human
      args: { question: "Which colour?" }
    - say: "Blue it is."
  lead:
    - call: mid
      args: { message: "Solve ARC task 007bbfb7." }
    - say: "Mid says: tiled."
  mid:
    - calls:
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: leaf, args: { message: "What do you see?" } }
        - { call: leaf, args: { message: "Anything else?", thread: reuse } }
    - say: "tiled"
  leaf:
    - say: "A tiling."
    - say: "Nothing else."
  forker:
    - call: fork_join
      args:
        deadline_seconds: 3
        tasks:
          - { agent: digger, message: "Dig here." }
          - { agent: digger, message: "Dig there." }
          - { agent: dawdler, message: "Take your time." }
    - call: fork_join
      args:
        store: shared
        fail_fast: true
        max_parallel: 1
        tasks:
          - { agent: digger, message: "Dig again." }
          - { agent: failer, message: "Fail." }
          - { agent: digger, message: "Never started." }
    - say: "Forked twice."
  digger:
    - call: store_env_data
      args: { key: finding, short_description: "What was found.", value: { depth: 3 } }
    - say: "Found it."
  dawdler:
    - call: think
      args: { thought: "slowly" }
    - { say: "Too late.", delay_ms: 6000 }
  failer:
    - { fail: 401, message: "refused on purpose" }
    - say: "never"
  waiter:
    - call: wait
      args: { seconds: 1, reason: "a short pause" }
    - say: "Waited."
    - call: wait
      args: { seconds: 3600, reason: "an hour, unless woken" }
    - say: "Woken."
  sleeper:
    - call: wait
      args: { seconds: 3600, reason: "an hour, unless a message comes" }
    - say: "A message came."
    - say: "Handled the message."
  stepper:
    - calls:
        - { call: think, args: { thought: "first" } }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - calls:
        - { call: think, args: { thought: "mixed" } }
        - { call: ask_human, args: { question: "Go on?" } }
    - call: think
      args: { thought: "third" }
    - call: think
      args: { thought: "out of steps" }
  gatekeeper:
    - calls:
        - { call: deploy, args: { service: "api" } }
        - { call: deploy, args: { service: "web" } }
    - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - say: "Deployed what was approved."
  fencer:
    - call: slowpoke
      args: { message: "Take your time." }
    - call: fork_join
      args:
        fail_fast: true
        tasks:
          - { agent: slowpoke, message: "Again." }
          - { agent: dawdler, message: "Take your time." }
    - say: "Both were stopped."
  slowpoke:
    - { say: "Too late.", delay_ms: 5000 }
  mcp-user:
    - calls:
        - { call: ${MCP_SERVER}__echo, args: { message: "hello over MCP" } }
        - { call: ${MCP_SERVER}__toggle-simulated-logging, args: {} }
    - say: "Echoed and toggled."
  local:
    - calls:
        - { call: think, args: { thought: "inside the task" } }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - fail: 503
    - call: leaf
      args: { message: "What do you see?" }
    - call: think
      args: { thought: "back inside the task" }
    - say: "Stepped locally."
  batcher:
    - calls:
        - { call: think, args: { thought: "in a batch" } }
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
    - fail: 503
    - call: think
      args: { thought: "still in the batch" }
    - call: leaf
      args: { message: "What do you see?" }
    - call: think
      args: { thought: "a batch again" }
    - say: "Batched."
  batchlead:
    - call: think
      args: { thought: "first, in the turn's beginning" }
    - call: batchleaf
      args: { message: "Look." }
    - say: "Led from a batch."
  batchleaf:
    - call: think
      args: { thought: "in my turn's beginning" }
    - say: "Seen, in one batch."
  tasklead:
    - call: fork_join
      args:
        tasks:
          - { agent: quicktask, message: "Answer at once." }
          - { agent: deeptask, message: "Go deep." }
          - { agent: digger, message: "Dig here." }
    - say: "Every task came back."
  quicktask:
    - call: think
      args: { thought: "in the fork's task" }
    - say: "Answered in the fork."
  deeptask:
    - call: think
      args: { thought: "a local step in the fork" }
    - call: leaf
      args: { message: "What do you see?" }
    - say: "Went deep."
  actlead:
    - call: fork_join
      args:
        deadline_seconds: 4
        tasks:
          - { agent: digger, message: "Dig here." }
          - { agent: actdeep, message: "Go deep." }
          - { agent: dawdler, message: "Take your time." }
    - say: "Two came back, one was stopped."
  actdeep:
    - call: think
      args: { thought: "an activity step in the fork" }
    - call: leaf
      args: { message: "What do you see?" }
    - say: "Went deep with activities."
  quickstep:
    - say: "Answered in the thread."
    - say: "Again in the thread."
  watchlead:
    - call: watchful
      args: { message: "Stand by." }
    - call: store_env_data
      args: { key: w/1, short_description: "A watched value.", value: 1 }
    - say: "Done."
  watchful:
    - call: store_env_data
      args: { key: w/mine, short_description: "The watcher's own value.", value: 2 }
    - say: "Looked."
  floodlead:
    - call: store_env_data
      args: { key: fw/1, short_description: "A flooded value.", value: 1 }
    - say: "Stored."
  floodwatched:
    - { say: "Seen at last.", hold: flood }
  tracelead:
    - call: store_env_data
      args: { key: tw/1, short_description: "A traced value.", value: 1 }
    - say: "Stored."
  tracewatched:
    - say: "Seen."
  typist:
    - say: "About three."
    - call: final_output
      args: { total: 3 }
  budgetasker:
    - call: load_arc_task
      args: { task_id: "007bbfb7" }
    - say: "More was given."
`,
  'record-histories',
);

/** A user tool that needs approval for every call, with its own timeout (it runs as an activity of its own). */
const deployTool = defineTool({
  name: 'deploy',
  description: 'Deploys a service.',
  parameters: z.object({ service: z.string() }),
  sideEffects: true,
  needsApproval: true,
  timeout_s: 30,
  run: ({ service }) => `deployed ${service}`,
});

interface Scenario {
  name: string;
  agent: string;
  /** A scheduled run (`scheduledRunWorkflow`) posting the first message into a new thread, instead of a human. */
  scheduled?: boolean;
  messages: string[];
  /** Answers given to the questions the agent asks, in order. */
  answers?: string[];
  continueAsNewAfterTurns?: number;
  /** Once the last message's turn waits (`wait`): wake the thread, or send it this message. */
  interruptWait?: 'wake' | { message: string };
  /** Decisions on the approvals the agent's calls wait for, in the order of their ids (a1, a2, …). */
  decisions?: ({ approve: true } | { approve: false; reason: string })[];
  /** Each message's id (`send --message-id`), by position. */
  messageIds?: string[];
  /** Once every message's turn ended and the thread continued as new: send message `index` again under its id. */
  resend?: { index: number; afterRuns: number };
  /** The conversation's budget (`startThread({ limits: { budget } })`). */
  budget?: { tokens: number };
  /** Instead of a thread's turns: the agent's turn started by hand with input its workflow code cannot handle. */
  throwingTurn?: boolean;
  /** The thread started with its first message in one call (`run`: Update-with-Start), not `startThread` then `send`. */
  startedByRun?: boolean;
  /** Watchers whose wake-ups (this many) finish before the thread ends; their workflows' histories are written too. */
  watchers?: { name: string; wakeups: number }[];
  /**
   * A watcher added before the first message, whose first wake-up's turn is held (`hold`) until `signals` more
   * signals than its run's bound reached it and its run continued as new.
   */
  flood?: { watcher: string; keys: string[]; debounceS: number; hold: string; signals: number };
  /**
   * A watcher added before the first message; once that message's turn wrote, its workflow gets a signal naming a
   * writer's span (as a traced writer sends), most likely within its debounce window.
   */
  tracedSignal?: { watcher: string; keys: string[]; debounceS: number; traceparent: string };
}

const scenarios: Scenario[] = [
  { name: 'greeter-two-turns', agent: 'greeter', messages: ['Hi', 'Hi again'] },
  { name: 'caller-tools', agent: 'caller', messages: ['Load the task'] },
  { name: 'flaky-model-retry', agent: 'flaky', messages: ['Try'] },
  { name: 'asker-human-answer', agent: 'asker', messages: ['Pick a colour'], answers: ['Blue'] },
  { name: 'greeter-continue-as-new', agent: 'greeter', messages: ['1', '2', '3'], continueAsNewAfterTurns: 2 },
  { name: 'three-level-delegation', agent: 'lead', messages: ['Solve ARC task 007bbfb7'] },
  // An isolated fork whose third task misses the deadline (reclaimed, cancelled), then a shared fork cut short by
  // fail_fast with a task that never started.
  { name: 'fork-join', agent: 'forker', messages: ['Fan out.'] },
  // A wait ended by its timer, then one ended by `baton wake`.
  { name: 'wait-timer-and-wake', agent: 'waiter', messages: ['Pause.', 'Wait an hour.'], interruptWait: 'wake' },
  // A wait ended by a human message, which then runs as the next turn.
  {
    name: 'wait-ended-by-message',
    agent: 'sleeper',
    messages: ['Wait an hour.'],
    interruptWait: { message: 'Do not wait.' },
  },
  // One run of a `--new-thread` schedule: it starts the run's thread, posts into it and waits for the reply.
  { name: 'scheduled-run', agent: 'greeter', scheduled: true, messages: ['Say hello to the team.'] },
  // Recorded with fewer dispatches per step: a local start, tool calls run with the next model call, a mixed reply
  // run call by call, and a last step's calls run on their own.
  {
    name: 'stepper-fewer-dispatches',
    agent: 'stepper',
    messages: ['Work in steps.'],
    answers: ['Yes'],
  },
  // The same delegation and fork/join as above, recorded with their Postgres steps as local activities.
  { name: 'three-level-delegation-fewer-dispatches', agent: 'lead', messages: ['Solve ARC task 007bbfb7'] },
  { name: 'fork-join-fewer-dispatches', agent: 'forker', messages: ['Fan out.'] },
  // Waits, a scheduled run and continue-as-new as the code records them since fewer dispatches per step (ask_human
  // mixed with tools is in stepper-fewer-dispatches).
  {
    name: 'wait-timer-and-wake-fewer-dispatches',
    agent: 'waiter',
    messages: ['Pause.', 'Wait an hour.'],
    interruptWait: 'wake',
  },
  {
    name: 'wait-ended-by-message-fewer-dispatches',
    agent: 'sleeper',
    messages: ['Wait an hour.'],
    interruptWait: { message: 'Do not wait.' },
  },
  { name: 'scheduled-run-fewer-dispatches', agent: 'greeter', scheduled: true, messages: ['Say hello to the team.'] },
  {
    name: 'greeter-continue-as-new-fewer-dispatches',
    agent: 'greeter',
    messages: ['1', '2', '3'],
    continueAsNewAfterTurns: 2,
  },
  // Two calls of a user tool waiting for approval at once (one approved, one rejected), then a call of Baton's own
  // tool whose approval expires after a second.
  {
    name: 'approvals',
    agent: 'gatekeeper',
    messages: ['Deploy api and web.'],
    decisions: [{ approve: true }, { approve: false, reason: 'web is frozen' }],
  },
  // The same approvals under baton-decisions-after-acceptance: each decision written by an activity that the workflow
  // task accepting its Update scheduled, not by a local activity inside that task.
  {
    name: 'approvals-after-acceptance',
    agent: 'gatekeeper',
    messages: ['Deploy api and web.'],
    decisions: [{ approve: true }, { approve: false, reason: 'web is frozen' }],
  },
  // A delegated turn stopped by its own timeout_s, then a fork task stopped by its own: each fenced by its caller
  // (the other task of the fail_fast fork is reclaimed).
  { name: 'fenced-failures', agent: 'fencer', messages: ['Call the slow ones.'] },
  // Two messages with ids, a run each; the third run gets the first message again and answers from turn 1.
  {
    name: 'message-id-across-continue-as-new',
    agent: 'greeter',
    messages: ['Hi', 'Hi again'],
    messageIds: ['hi-1', 'hi-2'],
    continueAsNewAfterTurns: 1,
    resend: { index: 0, afterRuns: 3 },
  },
  // A turn whose delegation check throws a TypeError (its chain is no list): the turn fails as Turn.CodeFailed.
  { name: 'turn-code-error', agent: 'lead', messages: ['Solve ARC task 007bbfb7'], throwingTurn: true },
  // Two MCP tool calls in one reply, run with the next model call: a read-only one (echo) and one with side effects
  // (toggle-simulated-logging), whose run is claimed before it starts.
  { name: 'mcp-tools', agent: 'mcp-user', messages: ['Echo and toggle.'] },
  // Local steps (steps: local): tool calls run with the next model call, a model call retried inside the task, a
  // delegation that leaves the task, then local steps again.
  { name: 'local-steps', agent: 'local', messages: ['Step locally.'] },
  // The thread starts each turn without reading the world's limits (the turn does, as it begins), and each turn's
  // answer records it completed: no local activity at either end. The same conversation as `local-steps`.
  { name: 'turn-ends-with-answer', agent: 'local', messages: ['Step locally.'] },
  // Turns that begin in the thread's workflow (baton-turns-begin-in-thread): the same local-step turn as
  // `local-steps`, whose steps run in the thread until the delegation, and whose turn workflow goes on from there.
  { name: 'turn-begins-in-thread', agent: 'local', messages: ['Step locally.'] },
  // Batched steps (steps: batched): consecutive steps in one local activity, retried after a model error inside it,
  // in the thread until the delegation; the turn's workflow goes on from there with another batch.
  { name: 'batched-steps', agent: 'batcher', messages: ['Step in batches.'] },
  // Turns run their first batch in their `beginTurn` (baton-first-batch-in-begin-turn): the lead's, begun in the
  // thread, one local activity until the delegation; the delegated turn's, in its own workflow, its whole turn.
  { name: 'first-batch-in-begin', agent: 'batchlead', messages: ['Begin with a batch.'] },
  // The `batched-steps` conversation under that patch: its first batch meets the model error, and the turn's own
  // `runSteps` goes on from the step it stored.
  { name: 'first-batch-falls-back', agent: 'batcher', messages: ['Step in batches.'] },
  // A turn with steps as activities: begun in the thread, its steps in its own workflow.
  { name: 'activity-turn-begins-in-thread', agent: 'caller', messages: ['Load the task'] },
  // Turns answered whole in the thread (no turn workflow), under message ids; the first sent again after two
  // continue-as-new gets its answer back from what the thread carried and the transcript.
  {
    name: 'answered-in-thread',
    agent: 'quickstep',
    messages: ['Hi', 'Hi again'],
    messageIds: ['quick-1', 'quick-2'],
    continueAsNewAfterTurns: 1,
    resend: { index: 0, afterRuns: 3 },
  },
  // Fork tasks that begin in the fork's workflow (baton-fork-tasks-begin-in-fork): a batched task answered there whole,
  // a local-step task stepping there until its delegation, then going on in a `forkTaskTurnWorkflow`, and a task with
  // steps as activities, begun there and going on in one.
  { name: 'fork-tasks-begin-in-fork', agent: 'tasklead', messages: ['Fan out.'] },
  // Fork tasks with steps as activities stepping in the fork's workflow (baton-fork-activity-steps-in-fork): one
  // answered there (its store carried with its second model call), one stepping there until its delegation and going
  // on in a `forkTaskTurnWorkflow`, and one whose model call the fork's deadline cancelled there.
  { name: 'fork-activity-steps-in-fork', agent: 'actlead', messages: ['Fan out with activities.'] },
  // A frontmatter watcher registered by its agent's delegated turn wakes once for the lead's write (its own writes,
  // in both its turns, wake nothing); the thread's end stops it and its workflow ends.
  {
    name: 'watcher-wakes',
    agent: 'watchlead',
    messages: ['Write something watched.'],
    watchers: [{ name: 'watchful', wakeups: 1 }],
  },
  // A watcher under baton-watcher-signals-bound: it waits out its debounce window, wakes, and a flood of signals
  // during its wake-up's turn makes its run continue as new, leaving the turn running; the next run waits for the
  // turn (awaitWatchWakeup) and records its end.
  {
    name: 'watcher-signals-bound',
    agent: 'floodlead',
    messages: ['Write the flooded value.'],
    flood: { watcher: 'floodwatched', keys: ['fw/*'], debounceS: 1, hold: 'flood', signals: SIGNALS_PER_RUN + 10 },
    watchers: [{ name: 'floodwatched', wakeups: 1 }],
  },
  // Watch signals that name the writer's span (a traced writer's): the wake-up's span links to it; a signal without
  // one (the write's own, from an untraced worker) names none.
  {
    name: 'watcher-signal-names-writer',
    agent: 'tracelead',
    messages: ['Write the traced value.'],
    tracedSignal: {
      watcher: 'tracewatched',
      keys: ['tw/*'],
      debounceS: 1,
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    },
    watchers: [{ name: 'tracewatched', wakeups: 1 }],
  },
  // A root turn on local steps whose budget is spent at its second model call (`on_budget: ask`): the thread hands the
  // turn to a turn workflow of its own, which asks for more (an `extend_budget` approval), is approved, adds it and
  // makes the call.
  {
    name: 'budget-ask',
    agent: 'budgetasker',
    messages: ['Ask for more.'],
    budget: { tokens: 30 },
    decisions: [{ approve: true }],
  },
  // Threads started with their first message (\`run\`): the first turn's beginTurn opens the thread's record
  // (under baton-first-turn-opens-thread), answering in the thread (batched) or going on in a turn workflow that is
  // handed the epoch (activity steps), whose second message is sent as usual.
  {
    name: 'first-turn-opens-thread',
    agent: 'batcher',
    messages: ['Step in batches.'],
    startedByRun: true,
  },
  {
    name: 'first-turn-opens-thread-activity',
    agent: 'greeter',
    messages: ['Hi', 'Hi again'],
    startedByRun: true,
  },
  // A thread started by `startThread` on a client with the database, which opens the record itself: the thread's
  // first task opens nothing, and the first message's turn (answered in the thread) takes the record's epoch.
  { name: 'starter-opens-thread', agent: 'quickstep', messages: ['Hi', 'Hi again'] },
  // A typed agent (\`output\`) whose first answer is not JSON: the model is told why, and its second answer (a
  // \`final_output\` call) ends the turn with the object (under baton-typed-output).
  {
    name: 'typed-output',
    agent: 'typist',
    messages: ['How many?'],
  },
];

/**
 * The scenarios named on the command line (all when none is): only their files are replaced, so histories recorded
 * by older workflow code stay as they are and keep proving that it still replays.
 */
function selectedScenarios(names: readonly string[]): Scenario[] {
  if (names.length === 0) return scenarios;
  const unknown = names.filter((name) => !scenarios.some((scenario) => scenario.name === name));
  if (unknown.length > 0) {
    throw new Error(`unknown scenario ${unknown.join(', ')}; known: ${scenarios.map((s) => s.name).join(', ')}`);
  }
  return scenarios.filter((scenario) => names.includes(scenario.name));
}

async function main(): Promise<void> {
  const selected = selectedScenarios(process.argv.slice(2));
  installRuntime();
  const stack = await startTestStack(ROOT, process.env, log);
  let mcp: McpServers | undefined;
  try {
    const mcpConfig = writeMcpConfig(path.join(stack.stateDir, 'record-mcp.json'), {
      [MCP_SERVER]: stdioServerEntry('everything'),
    });
    mcp = await startMcpServers(mcpConfig, process.env, { log });
    const harness = await startAgentHarness({
      temporalAddress: stack.temporalAddress,
      databaseUrl: stack.databaseUrl,
      taskQueue: uniqueTaskQueue('record'),
      agents,
      script,
      tools: [deployTool],
      mcp,
      workflowBundle: { codePath: stack.workflowBundlePath },
    });
    try {
      fs.mkdirSync(HISTORIES_DIR, { recursive: true });
      for (const file of fs.readdirSync(HISTORIES_DIR)) {
        if (selected.some((scenario) => file.startsWith(`${scenario.name}.`)))
          fs.rmSync(path.join(HISTORIES_DIR, file));
      }
      for (const scenario of selected) {
        if (scenario.scheduled) {
          await recordScheduledRun(harness, scenario);
          continue;
        }
        if (scenario.throwingTurn) {
          await recordThrowingTurn(harness, scenario);
          continue;
        }
        const start = {
          agent: scenario.agent,
          threadId: `replay-${scenario.name}`,
          ...(scenario.continueAsNewAfterTurns ? { continueAsNewAfterTurns: scenario.continueAsNewAfterTurns } : {}),
          ...(scenario.budget === undefined ? {} : { limits: { budget: scenario.budget } }),
        };
        const thread = scenario.startedByRun
          ? harness.client.thread(start.threadId)
          : await harness.client.startThread(start);
        const { flood, tracedSignal } = scenario;
        if (flood !== undefined) {
          await thread.addWatcher({ agent: flood.watcher, keys: flood.keys, debounceS: flood.debounceS });
        }
        if (tracedSignal !== undefined) {
          await thread.addWatcher({
            agent: tracedSignal.watcher,
            keys: tracedSignal.keys,
            debounceS: tracedSignal.debounceS,
          });
        }
        for (const [index, message] of scenario.messages.entries()) {
          const messageId = scenario.messageIds?.[index];
          const options = messageId === undefined ? {} : { messageId };
          const reply =
            scenario.startedByRun && index === 0
              ? harness.client.run({ ...start, message, ...options }).then(({ result }) => result)
              : thread.send(message, options);
          for (const answer of scenario.answers ?? []) {
            const questionId = await firstOpenQuestion(() => thread.questions());
            await thread.answer(questionId, answer);
          }
          for (const [position, decision] of (scenario.decisions ?? []).entries()) {
            const approvalId = `a${position + 1}`;
            await until(`approval ${approvalId}`, async () =>
              (await thread.approvals()).some((row) => row.approvalId === approvalId) ? true : undefined,
            );
            if (decision.approve) await thread.approve(approvalId, { by: 'recorder' });
            else await thread.reject(approvalId, { by: 'recorder', reason: decision.reason });
          }
          const interrupt = index === scenario.messages.length - 1 ? scenario.interruptWait : undefined;
          if (interrupt !== undefined) {
            await until('a wait', async () => ((await thread.status()).waits?.length ? true : undefined));
            if (interrupt === 'wake') await thread.wake();
            else await thread.send(interrupt.message);
          }
          await reply;
        }
        if (flood !== undefined) await floodWatcher(harness, thread.threadId, flood);
        if (tracedSignal !== undefined) {
          const signal: EnvChangedSignalInput = { traceparent: tracedSignal.traceparent };
          await harness.client.temporal.workflow
            .getHandle(watcherWorkflowId(thread.threadId, tracedSignal.watcher))
            .signal(ENV_CHANGED_SIGNAL, signal);
        }
        if (scenario.resend !== undefined) {
          const { index, afterRuns } = scenario.resend;
          await until(`run ${afterRuns}`, async () => ((await thread.status()).runs >= afterRuns ? true : undefined));
          const again = await thread.send(scenario.messages[index] ?? '', { messageId: scenario.messageIds?.[index] });
          if (again.turn !== index + 1) throw new Error(`the message sent again ran as turn ${again.turn}`);
        }
        for (const watcher of scenario.watchers ?? []) {
          await until(`${watcher.wakeups} wake-up(s) of ${watcher.name}`, async () => {
            const wakeups = await thread.wakeups({ watcher: watcher.name });
            return wakeups.length === watcher.wakeups && wakeups.every((wakeup) => wakeup.status !== 'running')
              ? true
              : undefined;
          });
        }
        await thread.end();
        await thread.result();
        for (const watcher of scenario.watchers ?? []) {
          await harness.client.temporal.workflow.getHandle(watcherWorkflowId(thread.threadId, watcher.name)).result();
        }
        // Every run of every workflow of the conversation (a thread that continued as new has several).
        const runs: { workflowId: string; runId: string }[] = [];
        for await (const execution of harness.client.temporal.workflow.list({
          query: `BatonRootThreadId="${thread.threadId}"`,
        })) {
          runs.push({ workflowId: execution.workflowId, runId: execution.runId });
        }
        runs.sort((a, b) => a.workflowId.localeCompare(b.workflowId) || a.runId.localeCompare(b.runId));
        for (const [index, run] of runs.entries()) {
          const history = await harness.client.temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
          const part = run.workflowId.slice(thread.workflowId.length + 1) || 'thread';
          const file = path.join(HISTORIES_DIR, `${scenario.name}.${part}.${index}.json`);
          // Committed files: the recording machine's paths (stack traces of failures) are scrubbed.
          fs.writeFileSync(file, `${scrubMachinePaths(historyToJSON(history), ROOT)}\n`);
          log(`wrote ${path.relative(ROOT, file)}`);
        }
      }
    } finally {
      await harness.close();
    }
  } finally {
    await mcp?.close();
    await stack.stop();
  }
}

/**
 * Runs `scheduledRunWorkflow` as a Schedule would (its nominal time given in the input, since no Schedule sets
 * `TemporalScheduledStartTime` here), then writes its history and those of the thread it started.
 */
async function recordScheduledRun(harness: AgentHarness, scenario: Scenario): Promise<void> {
  const scheduledAt = '2025-01-01T09:00:00.000Z';
  const input: ScheduledRunInput = {
    schedule: scenario.name,
    agent: scenario.agent,
    message: scenario.messages[0] ?? '',
    target: { kind: 'new-thread' },
    timing: { cron: '0 9 * * *' },
    scheduledAt,
  };
  const temporal = harness.client.temporal;
  const run = await temporal.workflow.start('scheduledRunWorkflow', {
    workflowId: `${scheduleId(scenario.name)}-2025-01-01T09:00:00Z`,
    taskQueue: harness.taskQueue,
    args: [input],
  });
  await run.result();
  const thread = harness.client.thread(runThreadId(scenario.name, scheduledAt));
  await thread.end();
  await thread.result();
  const workflowIds = [run.workflowId, thread.workflowId, `${thread.workflowId}/turn-1`];
  for (const [index, workflowId] of workflowIds.entries()) {
    const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
    const part = ['run', 'thread', 'turn-1'][index];
    const file = path.join(HISTORIES_DIR, `${scenario.name}.${part}.${index}.json`);
    fs.writeFileSync(file, `${scrubMachinePaths(historyToJSON(history), ROOT)}\n`);
    log(`wrote ${path.relative(ROOT, file)}`);
  }
}

/**
 * Starts the scenario's agent's turn by hand, as a parent would, in a thread of its own but with a chain that is no
 * list, so the turn's delegation check throws inside its workflow code; writes the failed turn's history.
 */
async function recordThrowingTurn(harness: AgentHarness, scenario: Scenario): Promise<void> {
  const thread = await harness.client.startThread({ agent: scenario.agent, threadId: `replay-${scenario.name}` });
  const epoch = await until('the thread row', async () => {
    const { rows } = await harness.pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [
      thread.threadId,
    ]);
    return rows[0]?.epoch;
  });
  const temporal = harness.client.temporal;
  const turn = await temporal.workflow.start('agentTurnWorkflow', {
    workflowId: `${thread.workflowId}/turn-by-hand`,
    taskQueue: harness.taskQueue,
    args: [
      {
        rootThreadId: thread.threadId,
        threadId: thread.threadId,
        agent: scenario.agent,
        message: scenario.messages[0] ?? '',
        sender: 'human',
        epoch,
        chain: 42,
      },
    ],
  });
  const failed = await turn.result().then(
    () => false,
    () => true,
  );
  if (!failed) throw new Error('the turn given a chain that is no list did not fail');
  await thread.end();
  await thread.result();
  const file = path.join(HISTORIES_DIR, `${scenario.name}.turn-by-hand.0.json`);
  fs.writeFileSync(file, `${scrubMachinePaths(historyToJSON(await turn.fetchHistory()), ROOT)}\n`);
  log(`wrote ${path.relative(ROOT, file)}`);
}

/**
 * Once the flooded watcher's wake-up turn calls the model (and is held there), sends its workflow `signals` signals,
 * waits for its run to continue as new, and lets the turn answer.
 */
async function floodWatcher(
  harness: AgentHarness,
  rootThreadId: string,
  flood: NonNullable<Scenario['flood']>,
): Promise<void> {
  await until('the wake-up turn to call the model', () =>
    Promise.resolve(harness.model.requestCount(flood.watcher) >= 1 ? true : undefined),
  );
  const handle = harness.client.temporal.workflow.getHandle(watcherWorkflowId(rootThreadId, flood.watcher));
  const firstRun = (await handle.describe()).runId;
  for (let index = 0; index < flood.signals; index += 1) await handle.signal(ENV_CHANGED_SIGNAL);
  await until('the watcher to continue as new', async () =>
    (await handle.describe()).runId !== firstRun ? true : undefined,
  );
  harness.model.release(flood.hold);
}

async function firstOpenQuestion(list: () => Promise<{ questionId: string }[]>): Promise<string> {
  return until('a question', async () => (await list())[0]?.questionId);
}

/** Polls `probe` until it returns a value; fails naming `what` after 30 s. */
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no ${what} within 30 s`);
}

main().catch((error: unknown) => {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
