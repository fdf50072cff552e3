/**
 * Token budgets on the real stack (a Temporal dev server, Postgres, a worker, the scripted model over HTTP): a root's
 * budget escrowed down a tree of three levels, a grandchild that spends its share stopping before its next model call
 * while its sibling's and its parent's unspent shares return to the root, the ledger equal to the stored replies, a
 * world's default budget, a root that spends its own budget, and the SDK's and the CLI's views of it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ErrorType } from '../../common/errors';
import { formatTree, formatUsage } from '../../client/format';
import { budgetOf, openRootBudget, reserveGrants } from '../../db/budgets';
import { inTransaction } from '../../db/transaction';
import { openChildThread, openRootThread } from '../../testing/thread-fixtures';
import { ExplorerData } from '../../explorer/data';
import { overviewPage } from '../../explorer/pages';
import { parseScript } from '../../scripted-model';
import { EXTEND_BUDGET_REQUEST } from '../../common/budgets';
import { waitFor } from '../chaos/waiting';
import { rejectsWith } from './failures';
import { readModelLog, startTestHarness, type AgentHarness } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'budgets-'));
const modelLog = path.join(workDir, 'model.jsonl');

function agent(name: string, capabilities: string[] = [], extra = '') {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\ncapabilities: [${capabilities.join(', ')}]\n${extra}---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

/** The share the spending grandchild's file asks for: less than any one reply of the scripted model costs. */
const SPENDER_TOKENS = 40;
const THRIFTY_TOKENS = 5_000;
const ROOT_TOKENS = 200_000;
/** The delegated asker's share and extension: about two and a half of its replies. */
const CHILD_ASKER_TOKENS = 5_000;
/** The one model with a price (`BATON_MODEL_PRICES`); every other agent runs on the worker's default, unpriced. */
const PRICED_MODEL = 'priced-model';
const PRICE = { input_per_million: 3, output_per_million: 15 };

const agents: AgentRegistry = new Map(
  [
    agent('budget_root', ['budget_mid']),
    agent('budget_mid', ['fork_join', 'budget_spender', 'budget_thrifty']),
    agent('budget_spender', [], `budget: { tokens: ${SPENDER_TOKENS} }\n`),
    agent('budget_thrifty', [], `budget: { tokens: ${THRIFTY_TOKENS} }\n`),
    agent('budget_solo'),
    agent('budget_solo_local', [], 'steps: local\n'),
    agent('budget_asker', [], 'on_budget: ask\nbudget: { tokens: 100000 }\n'),
    agent('budget_asker_local', [], 'on_budget: ask\nbudget: { tokens: 100000 }\nsteps: local\n'),
    agent('budget_asker_batched', [], 'on_budget: ask\nbudget: { tokens: 100000 }\nsteps: batched\n'),
    agent('budget_ask_root', ['budget_child_asker']),
    agent('budget_child_asker', [], `on_budget: ask\nbudget: { tokens: ${CHILD_ASKER_TOKENS} }\n`),
    agent('budget_priced_root', ['budget_priced_child'], `model: ${PRICED_MODEL}\n`),
    agent('budget_priced_child', [], `model: ${PRICED_MODEL}\n`),
    agent('budget_solo_batched', [], 'steps: batched\n'),
  ].map((a) => [a.name, a]),
);

/** The agents' suffixes in each step mode: activities, local steps, batched steps. */
const MODES = ['', '_local', '_batched'] as const;

/** The script of an agent that stores a note, then says `reply`. */
function noteThenSay(agentName: string, reply: string): string {
  return `  ${agentName}:
    - call: store_env_data
      args: { key: ${agentName}, short_description: "A note.", value: { n: 1 } }
    - say: "${reply}"
`;
}

const script = parseScript(
  `
agents:
  budget_root:
    - call: budget_mid
      args: { message: "Look into it." }
    - say: "root done"
  budget_mid:
    - call: fork_join
      args:
        tasks:
          - { agent: budget_spender, message: "Spend." }
          - { agent: budget_thrifty, message: "Save." }
    - say: "mid done"
  budget_spender:
    - call: store_env_data
      args: { key: spent, short_description: "What the spender found.", value: { found: true } }
    - say: "never said: the budget stops this call"
  budget_thrifty:
    - say: "thrifty done"
${MODES.map((suffix) => noteThenSay(`budget_solo${suffix}`, 'never said either')).join('')}
${MODES.map((suffix) => noteThenSay(`budget_asker${suffix}`, 'asker done')).join('')}
  budget_priced_root:
    - call: budget_priced_child
      args: { message: "Price the part." }
    - say: "priced done"
  budget_priced_child:
    - say: "child priced"
  budget_ask_root:
    - call: budget_child_asker
      args: { message: "Take notes." }
    - say: "ask root done"
  budget_child_asker:
    - call: store_env_data
      args: { key: child_one, short_description: "A note.", value: { n: 1 } }
    - call: store_env_data
      args: { key: child_two, short_description: "A note.", value: { n: 2 } }
    - call: store_env_data
      args: { key: child_three, short_description: "A note.", value: { n: 3 } }
    - say: "child done"
`,
  'budgets',
);

let harness: AgentHarness;

before(async () => {
  harness = await startTestHarness('budgets', {
    agents,
    script,
    modelLogFile: modelLog,
    modelPrices: {
      [`default/${PRICED_MODEL}`]: {
        inputPerMillion: PRICE.input_per_million,
        outputPerMillion: PRICE.output_per_million,
      },
    },
  });
});

after(async () => {
  await harness?.close();
});

interface GrantRow {
  grantId: string;
  threadId: string;
  agent: string;
  parentGrantId: string | null;
  granted: number;
  spent: number;
  open: boolean;
}

async function grantsOf(root: string): Promise<GrantRow[]> {
  const { rows } = await harness.pool.query<GrantRow & { granted: string; spent: string }>(
    `SELECT g.grant_id AS "grantId", g.thread_id AS "threadId", t.agent, g.parent_grant_id AS "parentGrantId",
            g.granted_tokens AS granted, g.spent_tokens AS spent, g.open
       FROM budget_grants g JOIN threads t ON t.thread_id = g.thread_id
      WHERE g.root_thread_id = $1 ORDER BY g.position`,
    [root],
  );
  return rows.map((row) => ({ ...row, granted: Number(row.granted), spent: Number(row.spent) }));
}

/** The tokens of every stored reply of `threadIds`, from their transcripts. */
async function storedTokens(threadIds: readonly string[]): Promise<number> {
  const { rows } = await harness.pool.query<{ total: string }>(
    `SELECT COALESCE(SUM((usage->>'totalTokens')::bigint), 0) AS total FROM transcript_messages
      WHERE thread_id = ANY($1) AND role = 'assistant'`,
    [threadIds],
  );
  return Number(rows[0]?.total ?? 0);
}

test('budgets: escrow down three levels; a grandchild that spends its share stops, and what is unspent returns', async () => {
  const root = uniqueThreadId('budget');
  const thread = await harness.client.startThread({
    agent: 'budget_root',
    threadId: root,
    limits: { budget: { tokens: ROOT_TOKENS } },
  });
  const turn = await thread.send('Study the budget.');
  assert.equal(turn.reply, 'root done');

  const grants = await grantsOf(root);
  const byAgent = new Map(grants.map((grant) => [grant.agent, grant]));
  const rootGrant = byAgent.get('budget_root');
  const mid = byAgent.get('budget_mid');
  const spender = byAgent.get('budget_spender');
  const thrifty = byAgent.get('budget_thrifty');
  assert.ok(rootGrant && mid && spender && thrifty, `a grant at each level: ${JSON.stringify(grants)}`);
  assert.equal(grants.length, 4);

  // The escrow: the delegation took half of what the root had left after its first reply; each fork task what its
  // file asks, from the delegated agent's share.
  const rootFirstReply = await harness.pool.query<{ total: string }>(
    `SELECT (usage->>'totalTokens')::bigint AS total FROM transcript_messages
      WHERE thread_id = $1 AND role = 'assistant' ORDER BY seq LIMIT 1`,
    [root],
  );
  const firstReply = Number(rootFirstReply.rows[0]?.total);
  assert.ok(firstReply > SPENDER_TOKENS, `a reply costs more than the spender's share: ${firstReply}`);
  assert.equal(rootGrant.granted, ROOT_TOKENS);
  assert.equal(mid.granted, Math.floor((ROOT_TOKENS - firstReply) / 2));
  assert.equal(mid.parentGrantId, '');
  assert.deepEqual([spender.granted, thrifty.granted], [SPENDER_TOKENS, THRIFTY_TOKENS]);
  assert.deepEqual([spender.parentGrantId, thrifty.parentGrantId], [mid.grantId, mid.grantId]);

  // The spender's first call was allowed (its share was untouched) and spent past it; its second was never made.
  const spenderCalls = readModelLog(modelLog).filter((entry) => entry.thread === spender.threadId);
  assert.equal(spenderCalls.length, 1, 'the spender asked the model once');
  const spenderThread = await harness.pool.query<{ status: string; lastError: string }>(
    'SELECT status, last_error AS "lastError" FROM threads WHERE thread_id = $1',
    [spender.threadId],
  );
  assert.equal(spenderThread.rows[0]?.status, 'failed');
  assert.match(spenderThread.rows[0]?.lastError ?? '', /token budget of this turn is spent \(40 granted, \d+ spent\)/);
  const forkResult = await harness.pool.query<{ status: string; error: string | null }>(
    `SELECT f.status, f.error FROM fork_tasks f WHERE f.thread_id = $1`,
    [spender.threadId],
  );
  assert.equal(forkResult.rows[0]?.status, 'failed', 'its fork task failed, and its caller went on');
  assert.match(forkResult.rows[0]?.error ?? '', /token budget of this turn is spent/);

  // Every grant is charged its subtree's stored replies, once each; every share closed when its turn ended.
  const threadsOf = async (grant: GrantRow) => {
    const { rows } = await harness.pool.query<{ threadId: string }>(
      `SELECT thread_id AS "threadId" FROM threads WHERE thread_id = $1 OR thread_id LIKE $1 || '/%'
          OR thread_id IN (SELECT thread_id FROM budget_grants WHERE root_thread_id = $2 AND $3 = ANY(path))`,
      [grant.threadId, root, grant.grantId],
    );
    return rows.map((row) => row.threadId);
  };
  assert.equal(spender.spent, await storedTokens([spender.threadId]));
  assert.equal(thrifty.spent, await storedTokens([thrifty.threadId]));
  assert.equal(mid.spent, await storedTokens([mid.threadId, spender.threadId, thrifty.threadId]));
  assert.equal(rootGrant.spent, await storedTokens(await threadsOf(rootGrant)));
  assert.ok(spender.spent > SPENDER_TOKENS, 'the one reply that crossed the line is charged in full');
  assert.deepEqual(
    grants.filter((grant) => grant.open).map((grant) => grant.agent),
    ['budget_root'],
    'only the root grant stays open',
  );

  // What the root has left is all its grant did not spend: nothing is held by the closed shares.
  const usage = await thread.usage();
  assert.deepEqual(usage.budget, {
    tokens: { granted: ROOT_TOKENS, spent: usage.totalTokens, left: ROOT_TOKENS - usage.totalTokens },
  });
  assert.equal(rootGrant.spent, usage.totalTokens);
  assert.match(
    formatUsage(usage),
    new RegExp(`budget: ${usage.totalTokens} of ${ROOT_TOKENS} tokens spent, ${ROOT_TOKENS - usage.totalTokens} left`),
  );
  const tree = await thread.tree();
  assert.deepEqual(tree.budget, usage.budget);
  const midNode = tree.children.find((child) => child.agent === 'budget_mid');
  assert.deepEqual(midNode?.budget, {
    tokens: { granted: mid.granted, spent: mid.spent, left: mid.granted - mid.spent },
  });
  // The explorer's page of the root says the same, on the root and on each share.
  const data = new ExplorerData(harness.client);
  const rootRow = await data.thread(root);
  assert.ok(rootRow);
  const page = overviewPage(await data.overview(rootRow), { namespace: 'default', now: new Date() }).toString();
  assert.ok(page.includes(`budget ${usage.totalTokens} of ${ROOT_TOKENS} tokens spent`), 'the root line');
  assert.ok(page.includes(`budget ${mid.spent} of ${mid.granted} tokens spent`), "the delegated agent's share");
  const text = formatTree(tree, await thread.forks());
  assert.match(
    text,
    new RegExp(`budget_spender {2}failed .* budget ${spender.spent} of ${SPENDER_TOKENS} tokens spent, 0 left`),
  );
});

test("budgets: a world's BATON_BUDGET_TOKENS opens every new root's budget; a root that spends it stops clearly", async () => {
  const world = uniqueThreadId('budget-world').replace(/[^a-z0-9-]/gi, '-');
  await harness.client.world(world).set({ BATON_BUDGET_TOKENS: '30' });
  // In each step mode: a step run inside the thread's workflow or a batch stops as one run by a turn workflow does.
  for (const agentName of MODES.map((suffix) => `budget_solo${suffix}`)) {
    const root = uniqueThreadId(agentName.replace(/_/g, '-'));
    const thread = await harness.client.startThread({ agent: agentName, threadId: root, world });
    await rejectsWith(
      thread.send('Go.'),
      ErrorType.BudgetExhausted,
      /^the token budget of this turn is spent \(30 granted, \d+ spent\)/,
      `${agentName}: `,
    );
    const calls = readModelLog(modelLog).filter((entry) => entry.thread === root);
    assert.equal(calls.length, 1, `${agentName}: the second model call was not made`);
    const usage = await thread.usage();
    assert.deepEqual(usage.budget, { tokens: { granted: 30, spent: usage.totalTokens, left: 30 - usage.totalTokens } });
  }

  // A conversation's own budget wins over its world's.
  const own = uniqueThreadId('budget-own');
  await harness.client.startThread({
    agent: 'budget_thrifty',
    threadId: own,
    world,
    limits: { budget: { tokens: 1_000 } },
  });
  assert.equal((await harness.client.thread(own).send('Save.')).reply, 'thrifty done');
  assert.equal((await harness.client.thread(own).usage()).budget?.tokens?.granted, 1_000);

  await assert.rejects(
    harness.client.startThread({ agent: 'budget_thrifty', limits: { budget: { tokens: 0 } } }),
    /limits\.budget\.tokens must be a whole number from 1 to 999999999, not 0/,
  );
  await assert.rejects(
    harness.client.startThread({ agent: 'budget_thrifty', limits: { budget: {} } }),
    /limits\.budget must set tokens, usd or both/,
  );
});

test('budgets: in dollars, each reply is priced once by the model that served it; an unpriced model is not called', async () => {
  const root = uniqueThreadId('budget-usd');
  const thread = await harness.client.startThread({
    agent: 'budget_priced_root',
    threadId: root,
    limits: { budget: { usd: 10, tokens: ROOT_TOKENS } },
  });
  assert.equal((await thread.send('Price it.')).reply, 'priced done');
  const messages = await thread.transcript();
  const replies = (
    await harness.pool.query<{ usage: { promptTokens: number; completionTokens: number; costUsd: number } }>(
      `SELECT usage FROM transcript_messages WHERE root_thread_id = $1 AND role = 'assistant' ORDER BY created_at`,
      [root],
    )
  ).rows;
  assert.ok(replies.length >= 3 && messages.length > 0);
  let cost = 0;
  for (const { usage } of replies) {
    const expected =
      Math.ceil(
        Math.round(
          (usage.promptTokens * PRICE.input_per_million + usage.completionTokens * PRICE.output_per_million) * 1e3,
        ) / 1e3,
      ) / 1e6;
    assert.equal(usage.costUsd, expected, "priced at the served model's price, to the millionth rounded up");
    cost = Math.round((cost + usage.costUsd) * 1e6) / 1e6;
  }
  const usage = await thread.usage();
  assert.equal(usage.costUsd, cost);
  assert.deepEqual(usage.budget?.usd, { granted: 10, spent: cost, left: Math.round((10 - cost) * 1e6) / 1e6 });
  const grants = await harness.pool.query<{ agent: string; usd: string; spent: string; open: boolean }>(
    `SELECT t.agent, g.granted_usd AS usd, g.spent_usd AS spent, g.open FROM budget_grants g
       JOIN threads t ON t.thread_id = g.thread_id WHERE g.root_thread_id = $1 AND g.grant_id <> ''`,
    [root],
  );
  assert.equal(grants.rows.length, 1);
  assert.equal(Number(grants.rows[0]?.usd), Math.floor(((10 - Number(replies[0]?.usage.costUsd)) / 2) * 1e6) / 1e6);
  assert.match(
    formatUsage(usage),
    /budget: \d+ of \d+ tokens spent, \d+ left; \$[0-9.]+ of \$10 spent, \$[0-9.]+ left/,
  );

  // A dollar budget so small the first reply spends it: the next call is not made.
  const poor = uniqueThreadId('budget-poor');
  const poorThread = await harness.client.startThread({
    agent: 'budget_priced_root',
    threadId: poor,
    limits: { budget: { usd: 0.000001 } },
  });
  await rejectsWith(
    poorThread.send('Price it.'),
    ErrorType.BudgetExhausted,
    /^the dollar budget of this turn is spent \(\$0\.000001 granted, \$[0-9.]+ spent\)/,
  );

  // An agent whose model has no price is not called under a dollar budget.
  const unpriced = uniqueThreadId('budget-unpriced');
  const unpricedThread = await harness.client.startThread({
    agent: 'budget_thrifty',
    threadId: unpriced,
    limits: { budget: { usd: 1 } },
  });
  await rejectsWith(
    unpricedThread.send('Save.'),
    ErrorType.BudgetUnpriced,
    /no price for default\/[^ ]+ \(nor for its provider\)/,
  );
  assert.equal(readModelLog(modelLog).filter((entry) => entry.thread === unpriced).length, 0, 'no model was asked');
});

/** The one pending approval of `root` once it is there. */
async function pendingApproval(root: string) {
  return waitFor(`an approval in ${root}`, 60_000, async () => {
    const [pending] = await harness.client.thread(root).approvals();
    return pending;
  });
}

test('budgets: on_budget: ask waits for a person, and the turn goes on once more is approved, in every step mode', async () => {
  for (const agentName of MODES.map((suffix) => `budget_asker${suffix}`)) {
    const root = uniqueThreadId(agentName.replace(/_/g, '-'));
    const thread = await harness.client.startThread({
      agent: agentName,
      threadId: root,
      limits: { budget: { tokens: 30 } },
    });
    const sending = thread.send('Go.');
    sending.catch(() => undefined);
    const approval = await pendingApproval(root);
    assert.equal(approval.tool, EXTEND_BUDGET_REQUEST, agentName);
    assert.deepEqual(JSON.parse(approval.arguments), { tokens: 100_000 });
    // The model was asked once: the second call waits for the person, not the model.
    assert.equal(readModelLog(modelLog).filter((entry) => entry.thread === root).length, 1);
    assert.deepEqual(await thread.approve(approval.approvalId, { by: 'alice' }), {
      approvalId: approval.approvalId,
      status: 'approved',
    });
    const result = await sending;
    assert.equal(result.reply, 'asker done', agentName);
    const usage = await thread.usage();
    assert.deepEqual(usage.budget?.tokens, {
      granted: 100_030,
      spent: usage.totalTokens,
      left: 100_030 - usage.totalTokens,
    });
    assert.equal(readModelLog(modelLog).filter((entry) => entry.thread === root).length, 2, 'each step asked once');
  }

  // Declined, the turn fails saying so.
  const declined = uniqueThreadId('budget-declined');
  const thread = await harness.client.startThread({
    agent: 'budget_asker',
    threadId: declined,
    limits: { budget: { tokens: 30 } },
  });
  const sending = thread.send('Go.');
  sending.catch(() => undefined);
  const approval = await pendingApproval(declined);
  await thread.reject(approval.approvalId, { by: 'bob', reason: 'enough for today' });
  await rejectsWith(sending, ErrorType.BudgetExhausted, /spent .*; bob declined to extend it: enough for today$/);
  assert.equal((await thread.usage()).budget?.tokens?.granted, 30, 'nothing was added');
});

test('budgets: a delegated turn that asks gets more for itself and every budget above it, its callers untouched', async () => {
  const root = uniqueThreadId('budget-ask-tree');
  const thread = await harness.client.startThread({
    agent: 'budget_ask_root',
    threadId: root,
    limits: { budget: { tokens: ROOT_TOKENS } },
  });
  const sending = thread.send('Delegate.');
  sending.catch(() => undefined);
  const approval = await pendingApproval(root);
  assert.deepEqual(JSON.parse(approval.arguments), { tokens: CHILD_ASKER_TOKENS });
  const before = await grantsOf(root);
  const child = before.find((grant) => grant.agent === 'budget_child_asker');
  assert.ok(child && child.spent >= CHILD_ASKER_TOKENS, `the child spent its share: ${JSON.stringify(child)}`);
  const rootBefore = (await thread.usage()).budget?.tokens;
  await thread.approve(approval.approvalId, { by: 'alice' });
  assert.equal((await sending).reply, 'ask root done');
  const after = await grantsOf(root);
  assert.equal(after.find((grant) => grant.agent === 'budget_child_asker')?.granted, CHILD_ASKER_TOKENS * 2);
  assert.equal(after.find((grant) => grant.agent === 'budget_ask_root')?.granted, ROOT_TOKENS + CHILD_ASKER_TOKENS);
  // What the root had left before the approval is what it has left now, less what was spent since: the extension
  // was new money, not a draw on the root's own.
  const usage = await thread.usage();
  assert.ok(rootBefore);
  assert.equal(usage.budget?.tokens?.left, ROOT_TOKENS + CHILD_ASKER_TOKENS - usage.totalTokens);
  const { rows } = await harness.pool.query<{ tokens: string; grantId: string }>(
    'SELECT tokens, grant_id AS "grantId" FROM budget_extensions WHERE root_thread_id = $1',
    [root],
  );
  assert.deepEqual(
    rows.map((row) => [Number(row.tokens), row.grantId]),
    [[CHILD_ASKER_TOKENS, child.grantId]],
  );
});

test("budgets: default shares are half of what is left for a delegation and an even split for a fork's tasks", async () => {
  const pool = harness.pool;
  const root = await openRootThread(pool, 'budget_share_root');
  await openRootBudget(pool, root.rootThreadId, { tokens: 1_000, usd: 1 });
  const children = await Promise.all(
    ['one', 'two', 'three', 'four'].map((name) => openChildThread(pool, root, `budget_share_${name}`)),
  );
  const [one, two, three, four] = children.map((child) => child.threadId);
  assert.ok(one && two && three && four);
  const reserve = (grants: Parameters<typeof reserveGrants>[3], split: 'half' | 'even') =>
    inTransaction(pool, (client) => reserveGrants(client, root.rootThreadId, root.threadId, grants, split));

  // A delegation: half of the 1000 tokens and $1 left.
  await reserve([{ operationId: 'share-op-1', threadId: one, asked: undefined }], 'half');
  assert.deepEqual(await budgetOf(pool, root.rootThreadId, one), {
    tokens: { granted: 500, spent: 0, left: 500 },
    usd: { granted: 0.5, spent: 0, left: 0.5 },
  });
  // A fork of three from the 500 and $0.5 left: one asks 400 tokens (and no dollars), two split evenly what their
  // caller had left, floored, never more than is left.
  await reserve(
    [
      { operationId: 'share-op-2', threadId: two, asked: { tokens: 400 } },
      { operationId: 'share-op-3', threadId: three, asked: undefined },
      { operationId: 'share-op-4', threadId: four, asked: undefined },
    ],
    'even',
  );
  const granted = async (threadId: string) => {
    const budget = await budgetOf(pool, root.rootThreadId, threadId);
    return [budget?.tokens?.granted, budget?.usd?.granted];
  };
  assert.deepEqual(await granted(two), [400, 0.166666]);
  assert.deepEqual(await granted(three), [100, 0.166666]);
  assert.deepEqual(await granted(four), [0, 0.166666]);
  // The root holds every open share: 1000 − 500 − 400 − 100 − 0 = 0 tokens left, and $0.000002 (the floors).
  assert.deepEqual(await budgetOf(pool, root.rootThreadId, root.threadId), {
    tokens: { granted: 1_000, spent: 0, left: 0 },
    usd: { granted: 1, spent: 0, left: 0.000002 },
  });
  // A share closes with its thread's turn, and what it did not spend returns to its caller.
  await pool.query(`UPDATE threads SET status = 'completed' WHERE thread_id = $1`, [one]);
  assert.equal((await budgetOf(pool, root.rootThreadId, root.threadId))?.tokens?.left, 500);
});
