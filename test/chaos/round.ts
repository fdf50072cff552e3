/**
 * One chaos round: a seeded plan of faults thrown at a running workload, then the checks that nothing was lost,
 * nothing happened twice and nothing was left running.
 *
 * The workload, per round: `ROOTS` conversations with `chief`, which asks a human and, at the same time, makes a call
 * that waits for a person's approval (given a few seconds later, while faults fly), delegates to `manager`, which waits
 * 3 s on a durable timer (`wait`) and delegates to `researcher`, which forks two `analyst`s (a shell command and an env
 * write each) and a `laggard` that never answers before the fork's deadline; the chief then stores a summary while it
 * calls an MCP server's tool (server-everything over stdio, started by each worker from `BATON_MCP_CONFIG`). Beside
 * them, client programs increment one counter per root with `expected_version` updates, one more conversation (`mole`)
 * is refused by the model with 401 for every request, and a `hostile` one tries every way past Baton's walls
 * (./hostile.ts). Meanwhile workers are SIGKILLed, Temporal and Postgres are restarted, and the model answers with 5xx
 * and 429 bursts or cuts replies halfway.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { Pool } from 'pg';
import { connect, type BatonClient } from '../../client';
import { STEP_MODES, type StepMode } from '../../common/agent-definition';
import type { BegunTurn, SendMessageResult } from '../../common/types';
import { EnvDataError, EnvDataErrorType, EnvStore } from '../../db/env-data';
import { StaleEpochError } from '../../db/errors';
import { listMessages } from '../../db/transcripts';
import { shellRunProcesses } from '../../activities/tools/shell';
import { parseScript, type Script } from '../../scripted-model';
import { keyMatches } from '../../common/watchers';
import { localActivityResults, turnDispatches } from '../../testing/turn-dispatches';
import { STEPS_VARIABLE } from '../../activities/worlds';
import { DELEGATION_LIMIT_VARIABLES } from '../../common/world-variables';
import type { ChaosStack } from './chaos-stack';
import {
  checkHostile,
  hostileSettled,
  HOSTILE_AGENT_FILE,
  HOSTILE_SCRIPT,
  startHostileTargets,
  type HostileTargets,
} from './hostile';
import { settle, type Settled } from './waiting';

export const ROOTS = 3;
/** Client programs incrementing each root's counter, and the increments each makes. */
export const CAS_CLIENTS = 3;
export const CAS_INCREMENTS = 4;
/** The fork's deadline: the laggard is always given up; an analyst only when the faults delayed it past this. */
export const FORK_DEADLINE_S = 40;
/** Faults start within this window after the workload, while every level of it is busy. */
const FAULT_WINDOW_MS = 32_000;
/** The longest a model fault waits for the requests it is meant to hit. */
const MODEL_BURST_MAX_MS = 30_000;
/**
 * A round that has not finished after this long fails (it never hangs the run): every wait of the workload gives up
 * at the deadline, and the round's checks report what was missing.
 */
export const ROUND_TIMEOUT_MS = 300_000;
const SHELL_LOG = 'shell-runs.log';
/**
 * The limit the round's workers keep (`BATON_MODEL_LIMITS`) on the model every agent but the laggard calls: the model
 * never has more of its calls at once, whichever worker makes them, through every fault.
 */
export const ROUND_MODEL_LIMITS = { 'default/baton-scripted': { concurrent: 2 } } as const;
/** The agent whose call the model holds past the fork's deadline: on a model name of its own, outside the limit. */
export const LAGGARD = 'laggard';
/** Every root's token budget (the world's `BATON_BUDGET_TOKENS`): far more than a round spends. */
const ROUND_BUDGET_TOKENS = 100_000_000;
/** The chief's call that waits for approval (`approval: [think]`), and who approves it. */
const CHIEF_THOUGHT = 'the study needs a go-ahead';
const APPROVER = 'chaos-approver';
/** How long an approval stays pending before it is given: long enough for faults to hit the waiting turns. */
const APPROVAL_HOLD_MS = 6_000;
/** The MCP server every worker starts from its configuration file, the chief's call of it and what it answers. */
export const MCP_SERVER_NAME = 'everything';
const MCP_TOOL = `${MCP_SERVER_NAME}__get-sum`;
const MCP_RESULT = 'The sum of 19 and 23 is 42.';

/** The agents of the workload, for the agents directory the workers read. */
export const AGENT_FILES: Readonly<Record<string, string>> = {
  'chief.md':
    '---\nname: chief\ndescription: Runs the study.\n' +
    `capabilities: [ask_human, manager, mcp:${MCP_SERVER_NAME}]\napproval: [think]\n---\nYou run the study.\n`,
  'manager.md': '---\nname: manager\ndescription: Plans the study.\ncapabilities: [researcher]\n---\nYou plan.\n',
  'researcher.md':
    '---\nname: researcher\ndescription: Fans the study out.\ncapabilities: [fork_join, analyst, laggard]\n---\nYou research.\n',
  'analyst.md': '---\nname: analyst\ndescription: Analyses.\ncapabilities: [shell]\n---\nYou analyse.\n',
  'laggard.md': '---\nname: laggard\ndescription: Never in time.\nmodel: baton-laggard\n---\nYou are late.\n',
  'mole.md': '---\nname: mole\ndescription: Refused by the model.\n---\nYou are refused.\n',
  'auditor.md': '---\nname: auditor\ndescription: Watches the study as it is written.\n---\nYou audit.\n',
  'hostile.md': HOSTILE_AGENT_FILE,
};

/** The watcher every chief's root gets at the round's start: it wakes for the study's writes and the fork's merge. */
const AUDITOR = { agent: 'auditor', keys: ['chief/*', 'manager/*', 'fork/**'] } as const;

/** Steps (model replies) each agent's transcript holds once it completed. */
const ASSISTANT_STEPS: Readonly<Record<string, number>> = {
  chief: 4,
  manager: 4,
  researcher: 2,
  analyst: 3,
  auditor: 1,
};

export const SCRIPT: Script = parseScript(
  `
agents:
  chief:
    - calls:
        - { call: ask_human, args: { question: "May I start the study?" } }
        - { call: think, args: { thought: "${CHIEF_THOUGHT}" } }
    - call: manager
      args: { message: "Plan the study." }
    - calls:
        - { call: store_env_data, args: { key: chief/summary, short_description: "The study's summary.", value: { done: true } } }
        - { call: ${MCP_TOOL}, args: { a: 19, b: 23 } }
    - say: "chief done"
  manager:
    - call: wait
      args: { seconds: 3, reason: "give the chief's notes a moment" }
    - call: researcher
      args: { message: "Research it." }
    - call: store_env_data
      args: { key: manager/plan, short_description: "The plan.", value: { steps: 3 } }
    - say: "manager done"
  researcher:
    - call: fork_join
      args:
        deadline_seconds: ${FORK_DEADLINE_S}
        tasks:
          - { agent: analyst, message: "Analyse part one." }
          - { agent: analyst, message: "Analyse part two." }
          - { agent: laggard, message: "Take your time." }
    - say: "researcher done"
  analyst:
    - call: shell
      args: { command: "echo ran >> ${SHELL_LOG}" }
    - call: store_env_data
      args: { key: finding, short_description: "What the analyst found.", value: { found: true } }
    - say: "analysed"
  laggard:
    - say: "too late"
      delay_ms: 3600000
  mole:
    - say: "never heard"
  auditor:
    - say: "audited"
${HOSTILE_SCRIPT}`,
  'chaos-round',
);

export type FaultKind =
  'kill-worker' | 'restart-temporal' | 'restart-postgres' | 'model-5xx' | 'model-429' | 'model-drop';

export interface PlannedFault {
  readonly kind: FaultKind;
  /** After the workload starts. */
  readonly atMs: number;
  /** How long a server stays down. */
  readonly durationMs: number;
  /** How many model requests a model fault hits. */
  readonly requests?: number;
  readonly status?: 500 | 502 | 503;
  readonly retryAfterS?: number;
}

/** Every kind once, two worker kills, at seeded moments in the fault window. */
export function planFaults(random: () => number): PlannedFault[] {
  const at = () => Math.round(1_000 + random() * (FAULT_WINDOW_MS - 1_000));
  const between = (min: number, max: number) => Math.round(min + random() * (max - min));
  const statuses = [500, 502, 503] as const;
  const faults: PlannedFault[] = [
    { kind: 'kill-worker', atMs: at(), durationMs: 0 },
    { kind: 'kill-worker', atMs: at(), durationMs: 0 },
    { kind: 'restart-temporal', atMs: at(), durationMs: between(500, 4_000) },
    { kind: 'restart-postgres', atMs: at(), durationMs: between(500, 4_000) },
    {
      kind: 'model-5xx',
      atMs: at(),
      durationMs: 0,
      requests: between(2, 6),
      status: statuses[Math.floor(random() * statuses.length)] ?? 503,
    },
    { kind: 'model-429', atMs: at(), durationMs: 0, requests: between(2, 5), retryAfterS: between(1, 2) },
    { kind: 'model-drop', atMs: at(), durationMs: 0, requests: between(1, 3) },
  ];
  return faults.sort((a, b) => a.atMs - b.atMs);
}

/** mulberry32: a small seeded generator, so a round's plan and picks replay from its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** One line of the round table. */
export interface RoundReport {
  round: number;
  seed: number;
  ok: boolean;
  seconds: number;
  faults: string;
  /** Chiefs that completed, of ROOTS; and whether the mole failed with Model.AuthFailed. */
  rootsCompleted: number;
  moleRefused: boolean;
  workerKills: number;
  workerCrashes: number;
  /** Model requests answered with an injected 5xx/429, and replies cut halfway. */
  modelFaults: number;
  modelDrops: number;
  /** The most model requests at once (the round's provider limit caps it). */
  modelMostAtOnce: number;
  /** Model calls that waited for room under that limit (their `model_call_waiting` events). */
  modelWaits: number;
  modelUnauthorized: number;
  /** CAS increments applied, of ROOTS × CAS_CLIENTS × CAS_INCREMENTS, and the conflicts retried. */
  casIncrements: number;
  casConflicts: number;
  questionsAnswered: number;
  /** Chiefs' calls approved (one per root), the decisions sent while faults were thrown. */
  approvalsGiven: number;
  /** Chiefs' MCP calls whose one result is the server's answer. */
  mcpResults: number;
  /** Fork tasks that succeeded and were given up, over all roots. */
  forkTasksMerged: number;
  forkTasksGivenUp: number;
  shellRuns: number;
  /** Wake-ups of the chiefs' watchers (each change to their keys handled by exactly one). */
  watchWakeups: number;
  /**
   * Whether the hostile agent's command tried every way to approve its own call (a worker's death mid-command may
   * take its one run). Every breach of a wall it tried is a violation, whether it probed or not.
   */
  hostileProbed: boolean;
  /**
   * Model calls of the roots' turns (every agent of each tree) run as local activities and as activities, and batches
   * of steps run as local activities (`steps: batched`).
   */
  localSteps: number;
  batchedSteps: number;
  activitySteps: number;
  /** Everything that broke a promise; empty when `ok`. */
  violations: string[];
}

export interface RoundContext {
  readonly stack: ChaosStack;
  readonly pool: Pool;
  readonly round: number;
  readonly seed: number;
  /** The round's scratch directory (the world's working directory). */
  readonly dir: string;
  readonly log: (line: string) => void;
  /**
   * Where every agent of the round runs its steps: the round's world sets `BATON_STEPS` (no agent of the workload
   * sets its own). Unset: the workers' default (activities).
   */
  readonly steps?: StepMode;
  /** @default ROUND_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

const answerFor = (root: string) => `Yes, start ${root}.`;

export async function runRound(context: RoundContext): Promise<RoundReport> {
  const { stack, pool, round, seed, log } = context;
  const random = seededRandom(seed);
  const plan = planFaults(random);
  const started = Date.now();
  const deadline = started + (context.timeoutMs ?? ROUND_TIMEOUT_MS);
  const violations: string[] = [];
  const tag = `r${round}-${seed.toString(36)}`;
  const chiefs = Array.from({ length: ROOTS }, (_, i) => `chaos-${tag}-chief${i + 1}`);
  const mole = `chaos-${tag}-mole`;
  const hostile = `chaos-${tag}-hostile`;
  const world = `chaos-${tag}`;
  fs.mkdirSync(context.dir, { recursive: true });
  const workersBefore = stack.workerCounts();
  stack.model.resetMostAtOnce();
  const modelBefore = stack.model.counts();

  const client = await retrying('connect', deadline, () =>
    connect({
      address: stack.temporalAddress,
      taskQueue: stack.taskQueue,
      databaseUrl: stack.databaseUrl,
      decisionKey: stack.decisionKey,
    }),
  );
  let targets: HostileTargets | undefined;
  try {
    await retrying('world set', deadline, () =>
      client.world(world).set({
        working_directory: context.dir,
        // A budget no tree comes near: its ledger is checked below, under every fault of the round.
        [DELEGATION_LIMIT_VARIABLES.budgetTokens.name]: String(ROUND_BUDGET_TOKENS),
        ...(context.steps === undefined ? {} : { [STEPS_VARIABLE]: context.steps }),
      }),
    );
    stack.model.refuseRoot(mole);
    targets = await startHostileTargets({
      client,
      dir: context.dir,
      root: hostile,
      temporalAddress: stack.temporalAddress,
      databaseUrl: stack.databaseUrl,
    });
    const sends = [...chiefs, mole].map((threadId) =>
      sendOnce(client, threadId, threadId === mole ? 'mole' : 'chief', world, 'Run the study.', deadline),
    );
    // Its turn waits for an approval nobody gives until the checks below have looked: it ends after them.
    const hostileSend = sendOnce(client, hostile, 'hostile', world, 'Get out.', deadline);
    const watching = settle(Promise.all(chiefs.map((root) => addAuditor(client, root, deadline))));
    const answering = settle(answerQuestions(client, chiefs, deadline));
    const approving = settle(approveCalls(client, chiefs, deadline));
    const cas = chiefs.map((root) => incrementCounter(pool, root, deadline));
    const faulting = settle(runFaults(stack, plan, started, random, log));

    const outcomes = await Promise.all(sends);
    const faulted = await faulting;
    const watched = await watching;
    if (!watched.ok) violations.push(`adding the watchers failed: ${describe(watched.error)}`);
    const answered = await answering;
    const approved = await approving;
    const casResults = await Promise.all(cas);
    if (!faulted.ok) violations.push(`the faults could not all be thrown: ${describe(faulted.error)}`);
    if (!answered.ok) violations.push(`answering failed: ${describe(answered.error)}`);
    if (!approved.ok) violations.push(`approving failed: ${describe(approved.error)}`);
    const faultsDone = faulted.ok ? faulted.value : [];
    const questionsAnswered = answered.ok ? answered.value : 0;
    const approvalsGiven = approved.ok ? approved.value : 0;
    if (faultsDone.length !== plan.length) violations.push(`only ${faultsDone.length} of ${plan.length} faults ran`);

    // 1. Every chief completed; the mole failed with the typed error of a refused key.
    let rootsCompleted = 0;
    for (const [index, threadId] of chiefs.entries()) {
      const outcome = outcomes[index];
      if (outcome?.ok && outcome.value.status === 'completed' && outcome.value.reply === 'chief done') {
        rootsCompleted += 1;
      } else {
        violations.push(`${threadId}: ${outcome?.ok ? JSON.stringify(outcome.value) : describe(outcome?.error)}`);
      }
    }
    const moleOutcome = outcomes[ROOTS];
    const moleRefused =
      moleOutcome !== undefined && !moleOutcome.ok && failureTypes(moleOutcome.error).includes('Model.AuthFailed');
    if (!moleRefused) {
      violations.push(
        `mole: expected a Model.AuthFailed failure, got ${moleOutcome?.ok ? JSON.stringify(moleOutcome.value) : describe(moleOutcome?.error)}`,
      );
    }
    const moleMessages = await listMessages(pool, mole);
    if (moleMessages.some((message) => message.role !== 'user')) {
      violations.push(`mole: a refused model call stored ${moleMessages.length - 1} message(s)`);
    }

    // 1b. Every change to a watched key after its watcher was added woke it exactly once, one wake-up at a time
    // (checked first: the trees below must have no wake-up still running).
    let watchWakeups = 0;
    for (const root of chiefs) watchWakeups += await checkAuditor(client, pool, root, deadline, violations);

    // 2. Each tree: one thread per delegation and task, each transcript with one reply per step.
    let forkTasksMerged = 0;
    let forkTasksGivenUp = 0;
    for (const root of chiefs) {
      const tree = await checkTree(pool, root, violations);
      forkTasksMerged += tree.merged;
      forkTasksGivenUp += tree.givenUp;
    }

    // 3. No answer lost: each chief asked once, got our answer, and its transcript holds it.
    for (const root of chiefs) await checkQuestion(pool, root, violations);
    // 3b. No decision lost: each chief's call waited for approval once, was approved once and ran once.
    for (const root of chiefs) await checkApproval(pool, root, violations);
    // 3c. Each chief's MCP call has one result, the server's answer (a retry after a kill stores it once).
    let mcpResults = 0;
    for (const root of chiefs) if (await checkMcpCall(pool, root, violations)) mcpResults += 1;

    // 4. CAS counters equal their increments; every write stored once.
    let casIncrements = 0;
    let casConflicts = 0;
    for (const [index, root] of chiefs.entries()) {
      const result = casResults[index];
      casIncrements += result?.applied ?? 0;
      casConflicts += result?.conflicts ?? 0;
      if (result?.error) violations.push(`${root} counter: ${result.error}`);
      await checkEnv(pool, root, result?.applied ?? 0, violations);
    }

    // 4b. Nothing the hostile model tried got past a wall; then its call is rejected and its turn ends.
    let hostileProbed = false;
    if (await waitUntil(deadline, () => hostileSettled(pool, hostile))) {
      const roots = [...chiefs, mole, hostile];
      ({ probed: hostileProbed } = await checkHostile(client, pool, hostile, roots, targets.secrets, violations));
    } else {
      violations.push(`${hostile}: its calls did not all finish in time`);
    }
    const [hostileApproval] = await client
      .thread(hostile)
      .approvals()
      .catch(() => []);
    if (hostileApproval) {
      await retrying(`reject ${hostile}'s call`, deadline, () =>
        client.thread(hostile).reject(hostileApproval.approvalId, { by: APPROVER, reason: 'a hostile call' }),
      ).catch((error: unknown) => violations.push(`${hostile}: rejecting its call failed: ${describe(error)}`));
    }
    const hostileOutcome = await hostileSend;
    if (!hostileOutcome.ok || hostileOutcome.value.reply !== 'hostile done') {
      violations.push(
        `${hostile}: ${hostileOutcome.ok ? JSON.stringify(hostileOutcome.value) : describe(hostileOutcome.error)}`,
      );
    }

    // 4c. The budget ledger: each tree's spending was charged once per stored reply, and nothing is still held.
    for (const root of chiefs) await checkBudget(pool, root, violations);

    // 5. No operation id twice, and every shell command ran at most once.
    await checkOperationIds(pool, [...chiefs, mole, hostile], violations);
    const shellRuns = await checkShellRuns(pool, context.dir, chiefs, violations);
    // 5b. The steps ran where the round's world says, in every turn of every tree.
    const steps = await checkStepModes(client, chiefs, context.steps ?? 'activity', violations);
    // 6. Nothing left running: no process a shell tool started outlives its call or its worker.
    const leftovers = await markedProcesses(stack.workerPids());
    if (leftovers.length > 0) violations.push(`processes left behind: ${leftovers.join(', ')}`);

    for (const threadId of [...chiefs, mole, hostile]) {
      await retrying(`end ${threadId}`, deadline, () => client.thread(threadId).end()).catch((error: unknown) =>
        violations.push(`could not end ${threadId}: ${describe(error)}`),
      );
    }

    const workersAfter = stack.workerCounts();
    const modelAfter = stack.model.counts();
    // 7. The provider limit held across every worker, whatever was killed or restarted; the calls it held back said so.
    const limit = ROUND_MODEL_LIMITS['default/baton-scripted'].concurrent;
    if (modelAfter.mostAtOnce > limit) {
      violations.push(`the model had ${modelAfter.mostAtOnce} requests at once, over the limit of ${limit}`);
    }
    const { rows: waited } = await pool.query<{ n: number }>(
      `SELECT COUNT(*)::int AS n FROM run_events WHERE root_thread_id = ANY($1) AND kind = 'model_call_waiting'`,
      [[...chiefs, mole, hostile]],
    );
    return {
      round,
      seed,
      ok: violations.length === 0,
      seconds: Math.round((Date.now() - started) / 1000),
      faults: faultsDone.join(' '),
      rootsCompleted,
      moleRefused,
      workerKills: workersAfter.kills - workersBefore.kills,
      workerCrashes: workersAfter.crashes - workersBefore.crashes,
      modelFaults: modelAfter.statusFaults - modelBefore.statusFaults,
      modelDrops: modelAfter.dropped - modelBefore.dropped,
      modelMostAtOnce: modelAfter.mostAtOnce,
      modelWaits: waited[0]?.n ?? 0,
      modelUnauthorized: modelAfter.unauthorized - modelBefore.unauthorized,
      casIncrements,
      casConflicts,
      questionsAnswered,
      approvalsGiven,
      mcpResults,
      forkTasksMerged,
      forkTasksGivenUp,
      shellRuns,
      watchWakeups,
      hostileProbed,
      localSteps: steps.local,
      batchedSteps: steps.batched,
      activitySteps: steps.activity,
      violations,
    };
  } finally {
    stack.model.clearFault();
    await targets?.close();
    await client.close().catch(() => undefined);
  }
}

/** Polls `check` until it holds (true) or the deadline passes (false). */
async function waitUntil(deadline: number, check: () => Promise<boolean>): Promise<boolean> {
  for (;;) {
    if (await check().catch(() => false)) return true;
    if (Date.now() > deadline) return false;
    await sleep(500);
  }
}

/**
 * Adds the auditor watcher to a chief's root as soon as the thread exists (retried through the faults). A retry
 * whose first attempt registered it (its answer lost) finds it there.
 */
async function addAuditor(client: BatonClient, root: string, deadline: number): Promise<void> {
  const thread = client.thread(root);
  for (;;) {
    try {
      await thread.addWatcher({ ...AUDITOR, keys: [...AUDITOR.keys], debounceS: 0, createdBy: 'chaos round' });
      return;
    } catch (error) {
      const text = describe(error);
      if (/already watches/.test(text)) return;
      // The thread may not have started yet (sendOnce retries its start through the faults).
      const early = /does not exist|has not started/.test(text);
      if ((!early && !isTransient(error)) || Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}

/**
 * Waits (to the round's deadline) until the root's auditor has looked past the last change to its keys and runs no
 * wake-up, then checks that every such change after it was added is in exactly one wake-up's changes, that nothing
 * else is, that its wake-ups ran one at a time and completed. Returns the number of wake-ups.
 */
async function checkAuditor(
  client: BatonClient,
  pool: Pool,
  root: string,
  deadline: number,
  violations: string[],
): Promise<number> {
  const { rows: added } = await pool.query<{ seq: string }>(
    `SELECT min(seq) AS seq FROM run_events WHERE root_thread_id = $1 AND kind = 'watch_added' AND data->>'watcher' = $2`,
    [root, AUDITOR.agent],
  );
  if (added[0]?.seq === null || added[0]?.seq === undefined) {
    violations.push(`${root}: the auditor was never added`);
    return 0;
  }
  const since = Number(added[0].seq);
  const { rows: writes } = await pool.query<{ seq: string; key: string }>(
    `SELECT seq, key FROM env_events WHERE root_thread_id = $1 AND scope = '' AND seq > $2
        AND action IN ('stored', 'updated', 'deleted') ORDER BY seq`,
    [root, since],
  );
  const watched = writes.filter((write) => keyMatches(AUDITOR.keys, write.key)).map((write) => Number(write.seq));
  // Every chief's study writes its summary and its plan after the round's start: none watched means none checked.
  if (watched.length === 0) violations.push(`${root}: no change to ${AUDITOR.keys.join(', ')} after the auditor came`);
  const last = Math.max(0, ...watched);
  const thread = client.thread(root);
  let wakeups: Awaited<ReturnType<typeof thread.wakeups>> = [];
  const settled = await retrying(`${root} auditor settles`, deadline, async () => {
    for (;;) {
      const [watcher] = (await thread.watchers()).filter((candidate) => candidate.name === AUDITOR.agent);
      wakeups = await thread.wakeups({ watcher: AUDITOR.agent, limit: 1000 });
      if (watcher !== undefined && watcher.cursor >= last && wakeups.every((w) => w.status !== 'running')) return true;
      if (Date.now() > deadline) return false;
      await sleep(250);
    }
  });
  if (!settled) {
    violations.push(`${root}: the auditor did not handle the changes up to event ${last} in time`);
    return wakeups.length;
  }
  const handled = wakeups.flatMap((wakeup) => wakeup.changes.map((change) => change.seq));
  for (const seq of watched) {
    const times = handled.filter((candidate) => candidate === seq).length;
    if (times !== 1) violations.push(`${root}: change ${seq} woke the auditor ${times} times, expected once`);
  }
  const stray = handled.filter((seq) => !watched.includes(seq));
  if (stray.length > 0) violations.push(`${root}: the auditor woke for changes it does not watch: ${stray.join(',')}`);
  const ordered = [...wakeups].sort((a, b) => a.wakeup - b.wakeup);
  for (const [index, wakeup] of ordered.entries()) {
    if (wakeup.status !== 'completed') violations.push(`${root}: auditor wake-up ${wakeup.wakeup} ${wakeup.status}`);
    const next = ordered[index + 1];
    if (next !== undefined && (wakeup.finishedAt === undefined || wakeup.finishedAt > next.startedAt)) {
      violations.push(`${root}: auditor wake-ups ${wakeup.wakeup} and ${next.wakeup} overlapped`);
    }
  }
  return wakeups.length;
}

/** The activity types of a turn's model calls (with or without the tool calls before them). */
const MODEL_STEPS = ['callModel', 'runToolsThenCallModel'];
/** The activity type of a batch of a turn's steps (`steps: batched`), besides a turn's first, run by its `beginTurn`. */
const BATCH_OF_STEPS = 'runSteps';

/**
 * Counts the model calls of every turn workflow of the roots' trees and of their threads' workflows (where a root
 * turn with local steps runs them), as their histories show them (local activity markers, or scheduled activities),
 * and reports a tree whose steps ran in the other mode.
 */
async function checkStepModes(
  client: BatonClient,
  roots: readonly string[],
  expected: StepMode,
  violations: string[],
): Promise<Record<StepMode, number>> {
  const counts: Record<StepMode, number> = { local: 0, batched: 0, activity: 0 };
  for (const root of roots) {
    const before = { ...counts };
    for await (const execution of client.temporal.workflow.list({
      query: `BatonRootThreadId="${root}" AND (WorkflowType="agentTurnWorkflow" OR WorkflowType="rootTurnWorkflow" OR WorkflowType="forkTaskTurnWorkflow" OR WorkflowType="threadWorkflow")`,
    })) {
      const history = await client.temporal.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
      // A turn runs its first batch in its `beginTurn`.
      counts.batched += localActivityResults(history.events ?? [], 'beginTurn').filter(
        (begun) => (begun as BegunTurn).firstBatch !== undefined,
      ).length;
      for (const dispatch of turnDispatches(history.events ?? [])) {
        const local = dispatch.startsWith('local:');
        const type = (local ? dispatch.slice('local:'.length) : dispatch).split(' ')[0] ?? '';
        if (local && type === BATCH_OF_STEPS) counts.batched += 1;
        else if (MODEL_STEPS.includes(type)) counts[local ? 'local' : 'activity'] += 1;
      }
    }
    const ran = (mode: StepMode) => counts[mode] - before[mode];
    if (STEP_MODES.some((mode) => (mode === expected ? ran(mode) === 0 : ran(mode) > 0))) {
      violations.push(
        `${root}: steps expected as ${expected}, the histories show ${ran('local')} local model calls, ` +
          `${ran('batched')} batches and ${ran('activity')} model calls as activities`,
      );
    }
  }
  return counts;
}

/**
 * Starts the thread and sends its message once, whatever restarts happen meanwhile: a retried start that finds the
 * thread already started goes on, and the message is one Update with a fixed id, so re-sending it after a lost
 * connection reaches the thread once and returns that Update's outcome.
 */
async function sendOnce(
  client: BatonClient,
  threadId: string,
  agent: string,
  world: string,
  message: string,
  deadline: number,
): Promise<Settled<SendMessageResult>> {
  try {
    await retrying(`start ${threadId}`, deadline, async () => {
      try {
        await client.startThread({ agent, threadId, world });
      } catch (error) {
        if (!/already exists/.test(describe(error))) throw error;
      }
    });
    const value = await retrying(
      `send to ${threadId}`,
      deadline,
      () => client.thread(threadId).send(message, { messageId: `${threadId}-message-1` }),
      (error) => error instanceof WorkflowUpdateFailedError,
    );
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Answers each chief's question once it is open; a retry that finds it answered by our first try is fine. */
async function answerQuestions(client: BatonClient, roots: readonly string[], deadline: number): Promise<number> {
  const pending = new Set(roots);
  let answered = 0;
  while (pending.size > 0 && Date.now() < deadline) {
    for (const root of [...pending]) {
      try {
        const [question] = await client.thread(root).questions();
        if (!question) continue;
        await client.thread(root).answer(question.questionId, answerFor(root));
        pending.delete(root);
        answered += 1;
      } catch (error) {
        const [question] = await client
          .thread(root)
          .questions({ all: true })
          .catch(() => []);
        if (question?.status === 'answered' && question.answer === answerFor(root)) {
          pending.delete(root);
          answered += 1;
        } else if (!isTransient(error) && !/does not exist/.test(describe(error))) {
          throw error;
        }
      }
    }
    await sleep(250);
  }
  return answered;
}

/**
 * Approves each chief's pending call once it has waited `APPROVAL_HOLD_MS`; a retry that finds it approved by our
 * first try (its reply lost to a restart) is fine.
 */
async function approveCalls(client: BatonClient, roots: readonly string[], deadline: number): Promise<number> {
  const pending = new Set(roots);
  let approved = 0;
  while (pending.size > 0 && Date.now() < deadline) {
    for (const root of [...pending]) {
      try {
        const [approval] = await client.thread(root).approvals();
        if (!approval || Date.now() - approval.createdAt.getTime() < APPROVAL_HOLD_MS) continue;
        await client.thread(root).approve(approval.approvalId, { by: APPROVER });
        pending.delete(root);
        approved += 1;
      } catch (error) {
        const [approval] = await client
          .thread(root)
          .approvals({ all: true })
          .catch(() => []);
        if (approval?.status === 'approved' && approval.decidedBy === APPROVER) {
          pending.delete(root);
          approved += 1;
        } else if (!isTransient(error) && !/does not exist/.test(describe(error))) {
          throw error;
        }
      }
    }
    await sleep(250);
  }
  return approved;
}

interface CasResult {
  applied: number;
  conflicts: number;
  error?: string;
}

/**
 * CAS_CLIENTS programs each add 1 to the root's `counter` CAS_INCREMENTS times: read the version, update with
 * `expected_version`, read again on a conflict. An attempt cut off by a restart is retried with the same operation
 * id, so one that had committed is not applied again.
 */
async function incrementCounter(pool: Pool, root: string, deadline: number): Promise<CasResult> {
  const store = new EnvStore(pool);
  const result: CasResult = { applied: 0, conflicts: 0 };
  const scopeOf = async () => {
    const { rows } = await pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [root]);
    const epoch = rows[0]?.epoch;
    return epoch === undefined ? undefined : { rootThreadId: root, threadId: root, agent: 'cas-client', epoch };
  };
  try {
    // The root's thread row exists once its workflow started.
    let scope = await retrying(`${root} thread row`, deadline, async () => {
      const found = await scopeOf();
      if (!found) throw new TransientError('not yet');
      return found;
    });
    await retrying(`${root} counter init`, deadline, () =>
      store.store(scope, `cas-init-${root}`, { key: 'counter', shortDescription: 'Increments so far.', value: 0 }),
    );
    await Promise.all(
      Array.from({ length: CAS_CLIENTS }, async (_, clientIndex) => {
        for (let increment = 0; increment < CAS_INCREMENTS; increment += 1) {
          for (;;) {
            if (Date.now() > deadline) throw new Error('round deadline passed while incrementing');
            const entry = await retrying(`${root} counter read`, deadline, () => store.get(root, 'counter'));
            if (!entry) throw new Error('counter missing');
            const operationId = `cas-${clientIndex}-${increment}-v${entry.version}`;
            try {
              await retrying(`${root} counter update`, deadline, () =>
                store.update(scope, operationId, {
                  key: 'counter',
                  value: (entry.value as number) + 1,
                  expectedVersion: entry.version,
                }),
              );
              result.applied += 1;
              break;
            } catch (error) {
              if (error instanceof EnvDataError && error.type === EnvDataErrorType.VersionConflict) {
                result.conflicts += 1;
                continue;
              }
              if (error instanceof StaleEpochError) {
                scope = (await scopeOf()) ?? scope;
                continue;
              }
              throw error;
            }
          }
        }
      }),
    );
  } catch (error) {
    result.error = describe(error);
  }
  return result;
}

/** Runs the plan's faults at their moments, one after another. @returns what ran, as short labels */
async function runFaults(
  stack: ChaosStack,
  plan: readonly PlannedFault[],
  started: number,
  random: () => number,
  log: (line: string) => void,
): Promise<string[]> {
  const done: string[] = [];
  for (const fault of plan) {
    const wait = started + fault.atMs - Date.now();
    if (wait > 0) await sleep(wait);
    const at = `${((Date.now() - started) / 1000).toFixed(1)}s`;
    switch (fault.kind) {
      case 'kill-worker': {
        const victim = await stack.killWorker((count) => Math.floor(random() * count));
        log(`  ${at} SIGKILL ${victim ?? '(no worker running)'}`);
        done.push('K');
        break;
      }
      case 'restart-temporal':
        log(`  ${at} Temporal down for ${fault.durationMs} ms`);
        await stack.restartTemporal(fault.durationMs);
        done.push('T');
        break;
      case 'restart-postgres':
        log(`  ${at} Postgres down for ${fault.durationMs} ms`);
        await stack.restartPostgres(fault.durationMs);
        done.push('P');
        break;
      case 'model-5xx':
      case 'model-429':
      case 'model-drop': {
        const status = fault.kind === 'model-429' ? 429 : fault.status;
        stack.model.setFault(
          fault.kind === 'model-drop'
            ? { kind: 'drop' }
            : {
                kind: 'status',
                status: status ?? 503,
                ...(fault.retryAfterS ? { retryAfterS: fault.retryAfterS } : {}),
              },
          fault.requests ?? 1,
        );
        const what = fault.kind === 'model-drop' ? 'drops replies' : `answers ${status}`;
        log(`  ${at} model ${what} to the next ${fault.requests} requests`);
        // A burst lasts until it has hit its requests; a workload stalled elsewhere (a dead worker's heartbeat
        // timeout) may make it wait, but never past the window.
        for (const until = Date.now() + MODEL_BURST_MAX_MS; stack.model.faultRemaining() > 0 && Date.now() < until;) {
          await sleep(100);
        }
        stack.model.clearFault();
        done.push(fault.kind === 'model-drop' ? 'D' : String(status));
        break;
      }
    }
  }
  return done;
}

interface TreeCheck {
  merged: number;
  givenUp: number;
}

/** One manager, one researcher, one fork of three tasks; every finished thread holds one reply per step. */
async function checkTree(pool: Pool, root: string, violations: string[]): Promise<TreeCheck> {
  const { rows: threads } = await pool.query<{ threadId: string; agent: string; status: string }>(
    `SELECT thread_id AS "threadId", agent, status FROM threads WHERE root_thread_id = $1 ORDER BY created_at`,
    [root],
  );
  const byAgent = (agent: string) => threads.filter((thread) => thread.agent === agent);
  const counts = Object.fromEntries(
    ['chief', 'manager', 'researcher', 'analyst', 'laggard'].map((a) => [a, byAgent(a).length]),
  );
  const expected = { chief: 1, manager: 1, researcher: 1, analyst: 2, laggard: 1 };
  if (JSON.stringify(counts) !== JSON.stringify(expected)) {
    violations.push(`${root}: threads per agent ${JSON.stringify(counts)}, expected ${JSON.stringify(expected)}`);
  }
  const running = threads.filter((thread) => thread.status === 'running');
  if (running.length > 0) {
    violations.push(`${root}: threads still running: ${running.map((t) => `${t.agent} ${t.threadId}`).join(', ')}`);
  }

  const { rows: forks } = await pool.query<{
    status: string;
    tasks: { agent: string; status: string; threadId: string }[];
  }>(
    `SELECT f.status, json_agg(json_build_object('agent', t.agent, 'status', t.status, 'threadId', t.thread_id)
              ORDER BY t.task_index) AS tasks
       FROM forks f JOIN fork_tasks t ON t.root_thread_id = f.root_thread_id AND t.fork_number = f.number
      WHERE f.root_thread_id = $1 GROUP BY f.root_thread_id, f.number`,
    [root],
  );
  const fork = forks[0];
  if (forks.length !== 1 || !fork) {
    violations.push(`${root}: ${forks.length} forks, expected 1`);
    return { merged: 0, givenUp: 0 };
  }
  const laggard = fork.tasks.find((task) => task.agent === 'laggard');
  if (laggard?.status === 'success') violations.push(`${root}: the laggard succeeded past its deadline`);
  const merged = fork.tasks.filter((task) => task.status === 'success');
  for (const thread of threads) {
    const steps = ASSISTANT_STEPS[thread.agent];
    const finished = thread.agent !== 'analyst' || merged.some((task) => task.threadId === thread.threadId);
    if (steps === undefined || !finished) continue;
    const messages = await listMessages(pool, thread.threadId);
    const assistant = messages.filter((message) => message.role === 'assistant').length;
    const users = messages.filter((message) => message.role === 'user').length;
    if (assistant !== steps || users !== 1) {
      violations.push(
        `${thread.agent} ${thread.threadId}: ${users} user and ${assistant} assistant messages, expected 1 and ${steps}`,
      );
    }
    if (thread.agent === 'manager') {
      // The durable timer ended once, on its own: restarts neither lost it nor fired it twice. (A timer that fired
      // while no worker or server was up is noticed later, so the time waited may exceed the 3 s planned.)
      const waited = messages.filter(
        (m) => m.role === 'tool' && /^Waited [^,]+, until [^,]+, as planned/.test(m.content ?? ''),
      );
      if (waited.length !== 1) violations.push(`${thread.threadId}: ${waited.length} wait results, expected 1`);
    }
    const seqs = messages.map((message) => message.seq);
    if (seqs.some((seq, index) => seq !== index + 1))
      violations.push(`${thread.threadId}: transcript seqs ${seqs.join(',')}`);
  }
  return { merged: merged.length, givenUp: fork.tasks.length - merged.length };
}

async function checkQuestion(pool: Pool, root: string, violations: string[]): Promise<void> {
  const { rows } = await pool.query<{ status: string; answer: string | null }>(
    'SELECT status, answer FROM questions WHERE root_thread_id = $1',
    [root],
  );
  if (rows.length !== 1 || rows[0]?.status !== 'answered' || rows[0]?.answer !== answerFor(root)) {
    violations.push(`${root}: questions ${JSON.stringify(rows)}, expected one answered '${answerFor(root)}'`);
    return;
  }
  const transcript = await listMessages(pool, root);
  const results = transcript.filter(
    (message) => message.role === 'tool' && (message.content ?? '').includes(answerFor(root)),
  );
  if (results.length !== 1) violations.push(`${root}: the answer reached the transcript ${results.length} times`);
}

async function checkApproval(pool: Pool, root: string, violations: string[]): Promise<void> {
  const { rows } = await pool.query<{ tool: string; status: string; decidedBy: string | null }>(
    'SELECT tool, status, decided_by AS "decidedBy" FROM approvals WHERE root_thread_id = $1',
    [root],
  );
  if (
    rows.length !== 1 ||
    rows[0]?.tool !== 'think' ||
    rows[0].status !== 'approved' ||
    rows[0].decidedBy !== APPROVER
  ) {
    violations.push(`${root}: approvals ${JSON.stringify(rows)}, expected one think call approved by ${APPROVER}`);
    return;
  }
  const transcript = await listMessages(pool, root);
  const thought = transcript.flatMap((message) => message.toolCalls ?? []).find((call) => call.name === 'think');
  const results = transcript.filter((message) => message.role === 'tool' && message.toolCallId === thought?.id);
  if (results.length !== 1 || results[0]?.content !== 'Thought recorded.') {
    violations.push(`${root}: the approved call's results: ${JSON.stringify(results.map((r) => r.content))}`);
  }
}

async function checkMcpCall(pool: Pool, root: string, violations: string[]): Promise<boolean> {
  const transcript = await listMessages(pool, root);
  const calls = transcript.flatMap((message) => message.toolCalls ?? []).filter((call) => call.name === MCP_TOOL);
  const results = transcript.filter((message) => message.role === 'tool' && message.toolCallId === calls[0]?.id);
  if (calls.length !== 1 || results.length !== 1 || results[0]?.content !== MCP_RESULT) {
    violations.push(
      `${root}: ${calls.length} ${MCP_TOOL} call(s) with results ${JSON.stringify(results.map((r) => r.content))}, ` +
        `expected one call answered '${MCP_RESULT}'`,
    );
    return false;
  }
  return true;
}

/** The keys the workload writes, each stored once; the counter at exactly its increments. */
async function checkEnv(pool: Pool, root: string, increments: number, violations: string[]): Promise<void> {
  const { rows: stored } = await pool.query<{ scope: string; key: string; n: number }>(
    `SELECT scope, key, COUNT(*)::int AS n FROM env_events
      WHERE root_thread_id = $1 AND action = 'stored' GROUP BY scope, key`,
    [root],
  );
  const twice = stored.filter((row) => row.n !== 1);
  if (twice.length > 0) violations.push(`${root}: stored more than once: ${JSON.stringify(twice)}`);
  const shared = new Set(stored.filter((row) => row.scope === '').map((row) => row.key));
  for (const key of ['chief/summary', 'manager/plan', 'counter']) {
    if (!shared.has(key)) violations.push(`${root}: ${key} missing`);
  }
  const { rows: merged } = await pool.query<{ prefix: string; taskIndex: number }>(
    `SELECT f.prefix, t.task_index AS "taskIndex" FROM forks f JOIN fork_tasks t ON t.root_thread_id = f.root_thread_id AND t.fork_number = f.number
      WHERE f.root_thread_id = $1 AND t.status = 'success'`,
    [root],
  );
  for (const task of merged) {
    const key = `${task.prefix}/${task.taskIndex}/finding`;
    if (!shared.has(key)) violations.push(`${root}: merged finding ${key} missing`);
  }
  const { rows: counter } = await pool.query<{ value: number; version: number; updates: number }>(
    `SELECT (d.value)::int AS value, d.version,
            (SELECT COUNT(*)::int FROM env_events e WHERE e.root_thread_id = d.root_thread_id AND e.scope = ''
                AND e.key = 'counter' AND e.action = 'updated') AS updates
       FROM env_data d WHERE d.root_thread_id = $1 AND d.scope = '' AND d.key = 'counter'`,
    [root],
  );
  const expected = ROOTS > 0 ? CAS_CLIENTS * CAS_INCREMENTS : 0;
  const row = counter[0];
  if (!row || row.value !== increments || row.updates !== increments || increments !== expected) {
    violations.push(`${root}: counter ${JSON.stringify(row)} after ${increments} of ${expected} increments`);
  }
}

/**
 * A root's budget after its round: what its grant says the tree spent is the sum of the tree's stored replies' tokens
 * (each charged once, however often its step ran), and no delegation or fork task still holds a share.
 */
async function checkBudget(pool: Pool, root: string, violations: string[]): Promise<void> {
  const { rows } = await pool.query<{ granted: string; spent: string; stored: string; open: string[] }>(
    `SELECT g.granted_tokens AS granted, g.spent_tokens AS spent,
            (SELECT COALESCE(SUM((m.usage->>'totalTokens')::bigint), 0) FROM transcript_messages m
              WHERE m.root_thread_id = $1 AND m.role = 'assistant') AS stored,
            ARRAY(SELECT o.thread_id FROM budget_grants o WHERE o.root_thread_id = $1 AND o.open AND o.grant_id <> '')
              AS open
       FROM budget_grants g WHERE g.root_thread_id = $1 AND g.grant_id = ''`,
    [root],
  );
  const row = rows[0];
  if (row === undefined) return void violations.push(`${root}: no budget was opened`);
  if (Number(row.granted) !== ROUND_BUDGET_TOKENS) violations.push(`${root}: budget ${row.granted} granted`);
  if (row.spent !== row.stored) violations.push(`${root}: ${row.spent} tokens charged, ${row.stored} stored`);
  if (row.open.length > 0) violations.push(`${root}: budget shares still held by ${row.open.join(', ')}`);
}

async function checkOperationIds(pool: Pool, roots: readonly string[], violations: string[]): Promise<void> {
  for (const table of ['transcript_messages', 'questions', 'delegations', 'env_events', 'tool_runs']) {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT COUNT(*)::int AS n FROM (SELECT root_thread_id, operation_id FROM ${table}
          WHERE root_thread_id = ANY($1) AND operation_id IS NOT NULL
          GROUP BY root_thread_id, operation_id HAVING COUNT(*) > 1) AS twice`,
      [roots],
    );
    if ((rows[0]?.n ?? 0) > 0) violations.push(`${table}: ${rows[0]?.n} operation ids used twice`);
  }
}

/**
 * Each analyst's shell command appends one line; a retried tool run must not append another. Compared with what
 * `tool_runs` recorded, not with the analysts merged: a run its worker was SIGKILLed in (still `running`) may or may
 * not have appended its line, and its analyst reads that and goes on, so it merges with or without one.
 */
async function checkShellRuns(
  pool: Pool,
  dir: string,
  roots: readonly string[],
  violations: string[],
): Promise<number> {
  const file = path.join(dir, SHELL_LOG);
  const lines = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
  const { rows } = await pool.query<{ claimed: number; succeeded: number }>(
    `SELECT COUNT(*)::int AS claimed, (COUNT(*) FILTER (WHERE status = 'done' AND ok))::int AS succeeded
       FROM tool_runs WHERE root_thread_id = ANY($1) AND tool = 'shell'`,
    [roots],
  );
  const claimed = rows[0]?.claimed ?? 0;
  const succeeded = rows[0]?.succeeded ?? 0;
  if (lines > claimed) violations.push(`${lines} shell runs for ${claimed} claimed runs: a command ran twice`);
  if (lines < succeeded) violations.push(`${lines} shell runs but ${succeeded} recorded as run: a run was lost`);
  return lines;
}

/** Processes on this machine carrying a shell tool's run marker, with their command lines. */
export async function markedProcesses(workerPids: readonly number[]): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await shellRunProcesses(workerPids)) {
    try {
      found.push(`${pid} (${fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim()})`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

class TransientError extends Error {}

/** Errors a restart causes: a connection refused or cut, a server unavailable, a pool that lost its server. */
export function isTransient(error: unknown): boolean {
  const text = describe(error);
  return (
    error instanceof TransientError ||
    /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|UNAVAILABLE|Connection terminated|connection (?:error|timeout|refused)|terminating connection|the database system is (?:starting up|shutting down)|Client has encountered a connection error|DEADLINE_EXCEEDED|Deadline exceeded|socket hang up|not connected|Timed out|Failed to connect|transport/.test(
      text,
    )
  );
}

/** Retries `fn` while it fails transiently (or `isFinal` says the failure is the answer), until the deadline. */
async function retrying<T>(
  what: string,
  deadline: number,
  fn: () => Promise<T>,
  isFinal: (error: unknown) => boolean = () => false,
): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      // One attempt may wait long (an Update waits for its turn's end): it too gives up at the deadline.
      return await beforeDeadline(what, deadline, fn());
    } catch (error) {
      if (isFinal(error) || !isTransient(error) || Date.now() > deadline) {
        if (Date.now() > deadline) throw new Error(`${what}: gave up at the round deadline: ${describe(error)}`);
        throw error;
      }
      await sleep(Math.min(250 * attempt, 2_000));
    }
  }
}

/**
 * `promise`, or an error once `deadline` passes while it is pending. The call is left to settle unwatched; when the
 * round's client closes under it, the SDK may still report it as an uncaught error, after the round has failed.
 */
async function beforeDeadline<T>(what: string, deadline: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: still waiting at the round deadline`)),
      Math.max(0, deadline - Date.now()),
    );
  });
  promise.catch(() => undefined);
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The failure types along an error's cause chain (Temporal wraps the activity's failure in the turn's). */
function failureTypes(error: unknown): string[] {
  const types: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 10; depth += 1) {
    const type = (current as { type?: unknown }).type;
    if (typeof type === 'string') types.push(type);
    current = (current as { cause?: unknown }).cause;
  }
  return types;
}

export function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const causes: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 6; depth += 1) {
    causes.push(`${current.name}: ${current.message}`);
    current = current.cause;
  }
  return causes.join(' <- ');
}
