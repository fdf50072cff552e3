/**
 * The thread explorer in a real browser: `playwright-core` drives Debian's Chromium against `baton dev`, which starts
 * a Temporal dev server of its own (so its Web UI runs) on the test database. The browser opens the address with the
 * stack's token that `baton dev` printed (a browser without it is refused). The ARC team answers the demo message,
 * then the tests look at the tree and the env panel, watch a value stored from the SDK appear without a reload, step
 * the env state back, answer a question from the page, approve a tool call next to it in the transcript and reject one
 * with a reason from the tree (a user tool with `needsApproval`, loaded with `--tools`), open a fork (its rows are a
 * fixture: fork_join's tables filled directly) and find the run's workflows in the Temporal Web UI. Screenshots go to
 * test-artifacts/ (gitignored).
 *
 * Without Chromium the tests are skipped with a notice saying so; under CI (`isCi`: CI=1, true or yes) they fail
 * instead.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import YAML from 'yaml';
import { EnvStore } from '../../db/env-data';
import { createPool } from '../../db/pool';
import { readStackFile } from '../../stack/stack-file';
import { isCi } from '../../testing/ci';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import {
  ROOT,
  baton,
  childEnv,
  describeRun,
  env,
  freshDir,
  parseJson,
  startBaton,
  startDev,
  waitFor,
  type DevProcess,
} from './cli-process';
import { CHROMIUM_FLAGS, chromiumPath, missingChromium } from '../../testing/chromium';

const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const ARC_MESSAGE = 'Solve ARC task 007bbfb7';
const QUESTION = 'Which colour should the <b>border</b> be?';
const ANSWER = 'Blue, please.';
const ASKER_REPLY = 'Thanks: the border will be blue.';
const UI_TIMEOUT_MS = 60_000;
const SERVICE = 'api <b>v2</b>';
const DEPLOYER_REPLY = 'The deploy is settled.';
const REJECTION = 'not before the <i>release notes</i> are out';
const FORK_DEADLINE_SECONDS = 4;

if (missingChromium) process.stderr.write(`\n*** explorer browser tests: ${missingChromium} ***\n\n`);
// Counted as skipped in the run's summary (a skipped suite alone counts no test); under CI the suite fails instead.
if (missingChromium && !isCi()) {
  test('browser: the explorer browser tests need Chromium', { skip: missingChromium }, () => undefined);
}

/** The attribute `name` of every element `locator` matches, in order. */
async function attributes(locator: Locator, name: string): Promise<(string | null)[]> {
  return Promise.all((await locator.all()).map((element) => element.getAttribute(name)));
}

/**
 * A user's tool module, as `baton dev --tools` loads it: `deploy` needs a person's approval before it runs. It finds
 * zod by its absolute path, as a user project finds its own.
 */
function writeTools(dir: string): string {
  const file = path.join(dir, 'deploy-tools.mjs');
  fs.writeFileSync(
    file,
    `import { z } from ${JSON.stringify(require.resolve('zod'))};
export default [
  {
    name: 'deploy',
    description: 'Deploys a service.',
    parameters: z.object({ service: z.string() }),
    sideEffects: true,
    needsApproval: true,
    run: ({ service }) => 'deployed ' + service,
  },
];
`,
  );
  return file;
}

/** The example agents plus an agent that asks a human, with the example script extended for it. */
function writeAgents(dir: string): void {
  const examples = path.join(ROOT, 'examples', 'arc-team', 'agents');
  for (const file of fs.readdirSync(examples).filter((name) => name.endsWith('.md'))) {
    fs.copyFileSync(path.join(examples, file), path.join(dir, file));
  }
  const agent = (name: string, description: string, capabilities: string[] = []) =>
    fs.writeFileSync(
      path.join(dir, `${name}.md`),
      `---\nname: ${name}\ndescription: ${description}\ncapabilities: [${capabilities.join(', ')}]\n---\n\n${description}\n`,
    );
  agent('asker', 'Asks a human before it answers.');
  agent('fork_lead', 'Fans work out to scouts in parallel.', ['fork_join', 'scout', 'proposer', 'laggard']);
  agent('scout', 'Looks at one part of the task.');
  agent('proposer', 'Suggests a better plan.');
  agent('laggard', 'Takes too long.');
  agent('deployer', 'Deploys services when a person agrees.', ['deploy']);
  const script = YAML.parse(fs.readFileSync(path.join(examples, 'model-script.yaml'), 'utf8')) as {
    agents: Record<string, unknown[]>;
  };
  script.agents.asker = [{ call: 'ask_human', args: { question: QUESTION } }, { say: ASKER_REPLY }];
  script.agents.deployer = [{ call: 'deploy', args: { service: SERVICE } }, { say: DEPLOYER_REPLY }];
  // A real fork: one task stores a finding, one proposes a change to its caller's entry, one outlives the deadline.
  script.agents.fork_lead = [
    { call: 'store_env_data', args: { key: 'plan', short_description: 'The plan.', value: { step: 1 } } },
    {
      call: 'fork_join',
      args: {
        deadline_seconds: FORK_DEADLINE_SECONDS,
        tasks: [
          { agent: 'scout', message: 'Look at the rows.' },
          { agent: 'proposer', message: 'Improve the plan.' },
          { agent: 'laggard', message: 'Take your time.' },
        ],
      },
    },
    { say: 'The scouts are back.' },
  ];
  script.agents.scout = [
    { call: 'store_env_data', args: { key: 'rows', short_description: 'What the rows show.', value: [1, 2, 3] } },
    { say: 'Rows done.' },
  ];
  script.agents.proposer = [
    { call: 'update_env_data', args: { key: 'plan', value: { step: 2 } } },
    { say: 'Proposed a better plan.' },
  ];
  script.agents.laggard = [
    { call: 'think', args: { thought: 'starting' } },
    { say: 'Too late.', delay_ms: (FORK_DEADLINE_SECONDS + 6) * 1000 },
  ];
  fs.writeFileSync(path.join(dir, 'model-script.yaml'), YAML.stringify(script));
}

describe('the thread explorer in Chromium', { skip: isCi() ? false : missingChromium }, () => {
  const stateDir = freshDir('explorer-state');
  const agentsDir = freshDir('explorer-agents');
  const toolsFile = writeTools(freshDir('explorer-tools'));
  const pool = createPool({ connectionString: env.databaseUrl, max: 2 });
  let dev: DevProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let explorerUrl = '';
  let uiUrl: string | undefined;
  let threadId = '';
  let token = '';
  const cli = (...args: string[]) => baton(['--state-dir', stateDir, ...args], childEnv());

  const shot = async (name: string) => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  };

  /** Starts `baton run deployer` in the background and waits until its deploy call waits for approval. */
  const startDeploy = async () => {
    const root = uniqueThreadId('deploy');
    const run = startBaton(
      ['--state-dir', stateDir, 'run', 'deployer', 'Deploy the api', '--thread', root, '--json'],
      childEnv(),
    );
    await waitFor(
      'the deploy call to wait for approval',
      async () => {
        const { rows } = await pool.query(`SELECT 1 FROM approvals WHERE root_thread_id = $1 AND status = 'pending'`, [
          root,
        ]);
        return rows.length === 1;
      },
      { timeoutMs: 60_000, child: run.child, describe: run.output.stderr },
    );
    return { root, run };
  };

  before(async () => {
    assert.ok(chromiumPath, `under CI the browser tests must run. ${missingChromium ?? ''}`);
    writeAgents(agentsDir);
    // The dev server of our own (not the test stack's headless one), so its Web UI runs; the test database.
    const devEnv = env.temporalCli
      ? childEnv({ DATABASE_URL: env.databaseUrl, TEMPORAL_CLI_PATH: env.temporalCli })
      : childEnv({ DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress });
    dev = await startDev({
      stateDir,
      args: ['--agents', agentsDir, '--tools', toolsFile, '--task-queue', uniqueTaskQueue('explorer')],
      env: devEnv,
    });
    const stack = readStackFile(stateDir);
    assert.ok(stack?.explorerUrl, `stack.json records explorerUrl:\n${dev.output.stderr()}`);
    explorerUrl = stack.explorerUrl;
    uiUrl = stack.uiUrl;
    // The stack's token, in its state directory, and the address `baton dev` printed with it.
    token = fs.readFileSync(path.join(stateDir, 'token'), 'utf8').trim();
    assert.ok(
      dev.output.stderr().includes(`explorer: ${explorerUrl}/?token=${token}`),
      `baton dev prints the address with the token:\n${dev.output.stderr()}`,
    );

    const run = await cli('run', 'coordinator', ARC_MESSAGE, '--json');
    assert.equal(run.code, 0, `${describeRun(run)}\nbaton dev:\n${dev.output.stderr()}`);
    threadId = String(parseJson(run).threadId);

    browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
    page = await browser.newPage({ viewport: { width: 1366, height: 860 } });
    // As a person opens it: the printed address, which leaves the cookie and comes back without the token.
    await page.goto(`${explorerUrl}/?token=${token}`);
    assert.equal(page.url(), `${explorerUrl}/`);
  });

  after(async () => {
    await browser?.close();
    await dev?.stop();
    await pool.end();
  });

  test('browser: without its token the explorer shows nothing; the address with it leaves an HttpOnly SameSite=Strict cookie and no token in the address', async () => {
    assert.ok(browser);
    const stranger = await browser.newContext();
    try {
      const other = await stranger.newPage();
      const refused = await other.goto(`${explorerUrl}/threads/${threadId}`);
      assert.equal(refused?.status(), 401);
      assert.match(await other.locator('h1').innerText(), /This explorer needs its token/);
      assert.doesNotMatch(await other.content(), new RegExp(threadId), 'nothing of the thread');
      const api = await other.goto(`${explorerUrl}/api/threads`);
      assert.equal(api?.status(), 401);
      assert.equal((await other.goto(`${explorerUrl}/?token=${'w'.repeat(43)}`))?.status(), 401, 'a wrong token');
      assert.deepEqual(await stranger.cookies(), [], 'and no cookie for it');

      const opened = await other.goto(`${explorerUrl}/threads/${threadId}?token=${token}`);
      assert.equal(opened?.status(), 200);
      assert.equal(other.url(), `${explorerUrl}/threads/${threadId}`, 'the token is gone from the address');
      const [cookie] = await stranger.cookies();
      assert.deepEqual(
        [cookie?.name, cookie?.value, cookie?.httpOnly, cookie?.sameSite, cookie?.path],
        [`baton-explorer-${new URL(explorerUrl).port}`, token, true, 'Strict', '/'],
      );
      assert.equal(await other.evaluate('document.cookie'), '', "the page's script cannot read it");
      // The page's own requests carry it: its fetch of the API answers.
      const listed = await other.evaluate<number>(
        "fetch('/api/threads', { headers: { accept: 'application/json' } }).then((r) => r.status)",
      );
      assert.equal(listed, 200);
    } finally {
      await stranger.close();
    }
  });

  test('browser: the front page lists the ARC run; its tree shows coordinator → solver → observer with preambles and Web UI links', async () => {
    await page.goto(explorerUrl);
    const row = page.locator(`tr[data-thread="${threadId}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /coordinator\s+completed\s+1\s+3/);
    await row.getByRole('link', { name: threadId }).click();
    await page.waitForURL(`${explorerUrl}/threads/${threadId}`);
    for (const agent of ['coordinator', 'solver', 'observer']) {
      const node = page.locator('.node', { has: page.locator('strong.agent', { hasText: agent }) });
      assert.equal(await node.getAttribute('data-status'), 'completed', agent);
    }
    const observer = page.locator(`.node[data-thread="${threadId}/observer-1"]`);
    await observer.locator('details.preamble summary').click();
    assert.match(
      await observer.locator('details.preamble pre').innerText(),
      /\[Delegation Context\]\nCalled by: solver/,
    );
    if (uiUrl) {
      assert.equal(
        await observer.locator('a.webui').getAttribute('href'),
        `${uiUrl}/namespaces/default/workflows/${encodeURIComponent(`baton/${threadId}/observer-1`)}`,
      );
    }
    await shot('explorer-tree');
  });

  test('browser: the env panel shows the run’s data, a value on demand, and a value stored from the SDK without a reload', async () => {
    await page.goto(`${explorerUrl}/threads/${threadId}/env`);
    await page.locator('#live-status.connected').waitFor();
    const keys = await attributes(page.locator('#manifest tbody tr'), 'data-key');
    assert.deepEqual(keys, ['arc_task', 'observed_patterns']);
    const arcTask = page.locator('tr[data-key="arc_task"]');
    assert.match(await arcTask.innerText(), /solver \(.*solver-1\)/);
    await arcTask.locator('details.value summary').click();
    await arcTask.locator('details.value pre', { hasText: '007bbfb7' }).waitFor();
    assert.match(await arcTask.locator('details.value pre').innerText(), /"task_id": "007bbfb7"/);

    await page.evaluate('window.explorerTestMarker = 1');
    const { rows } = await pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [threadId]);
    await new EnvStore(pool).store(
      { rootThreadId: threadId, threadId, agent: 'human', epoch: rows[0]?.epoch ?? 0 },
      `browser-test:${threadId}:note`,
      {
        key: 'human_note',
        shortDescription: 'A note <script>alert(1)</script> from the browser test',
        value: { note: 'hi' },
      },
    );
    const note = page.locator('tr[data-key="human_note"]');
    await note.waitFor({ timeout: 15_000 });
    assert.equal(await page.evaluate('window.explorerTestMarker'), 1, 'no reload');
    assert.match(await note.innerText(), /A note <script>alert\(1\)<\/script> from the browser test/);
    assert.match(await page.locator('#events tbody tr').last().innerText(), /stored\s+human_note/);
    await shot('explorer-env-live');
  });

  test('browser: stepping the env state back to the first event shows the data as it was then', async () => {
    await page.goto(`${explorerUrl}/threads/${threadId}/env`);
    const first = page.locator('#events tbody tr').first();
    const seq = await first.getAttribute('data-seq');
    await first.getByRole('link', { name: 'as of' }).click();
    await page.locator('#asof-banner').waitFor();
    assert.match(await page.locator('#asof-banner').innerText(), new RegExp(`State as of event #${seq}`));
    const keys = await attributes(page.locator('#manifest tbody tr'), 'data-key');
    assert.deepEqual(keys, ['arc_task']);
    assert.equal(
      await page.locator(`#events tbody tr.later`).count(),
      (await page.locator('#events tbody tr').count()) - 1,
    );
    await page.getByRole('link', { name: /#\d+ ▶/ }).click();
    await page.locator('#asof-banner').waitFor();
    await shot('explorer-env-as-of');
  });

  test('browser: a question answered from the page lets the turn finish', async () => {
    const asker = startBaton(['--state-dir', stateDir, 'run', 'asker', 'Draw me a square', '--json'], childEnv());
    let askerThread = '';
    await waitFor(
      'the asker to ask',
      async () => {
        const { rows } = await pool.query<{ root: string }>(
          `SELECT root_thread_id AS root FROM questions WHERE agent = 'asker' AND status = 'open' AND question = $1`,
          [QUESTION],
        );
        askerThread = rows[0]?.root ?? '';
        return askerThread !== '';
      },
      { timeoutMs: 60_000, child: asker.child, describe: asker.output.stderr },
    );
    await page.goto(`${explorerUrl}/threads/${askerThread}`);
    const form = page.locator('form.question[data-question="q1"]');
    assert.match(await form.locator('blockquote').innerText(), /Which colour should the <b>border<\/b> be\?/);
    await form.locator('textarea').fill(ANSWER);
    await form.getByRole('button', { name: 'Send answer' }).click();
    await page.waitForURL(`${explorerUrl}/threads/${askerThread}`);
    const result = await asker.finished();
    assert.equal(result.code, 0, describeRun(result));
    assert.equal(parseJson(result).reply, ASKER_REPLY);
    // The page reloads itself when the tree moves on.
    await page.locator(`.node[data-thread="${askerThread}"][data-status="completed"]`).waitFor({ timeout: 20_000 });
    assert.equal(await page.locator('form.question').count(), 0);
    await page.goto(`${explorerUrl}/threads/${askerThread}/transcript`);
    assert.match(
      await page.locator('.tool-result').first().innerText(),
      /ask_human[\s\S]*The human answered: Blue, please\./,
    );
  });

  test('browser: a call waiting for approval is approved next to it in the transcript, and the turn completes', async () => {
    const { root, run } = await startDeploy();
    await page.goto(`${explorerUrl}/threads/${root}`);
    const waiting = page.locator('#approvals .approval[data-approval="a1"]');
    assert.match(await waiting.innerText(), /a1: deployer \(.*\) wants to call deploy, requested .* ago\)/);
    assert.match(await waiting.locator('pre.arguments').innerText(), /"service": "api <b>v2<\/b>"/);

    await page.goto(`${explorerUrl}/threads/${root}/transcript`);
    const call = page.locator('.tool-call', { has: page.locator('strong', { hasText: 'deploy' }) });
    assert.match(await call.locator('details.json pre').innerText(), /"service": "api <b>v2<\/b>"/, 'shown open');
    await call.locator('input[name="by"]').fill('alice');
    await shot('explorer-approval-in-transcript');
    await call.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(new RegExp(`/threads/${root}/transcript#m\\d+$`));
    const result = await run.finished();
    assert.equal(result.code, 0, describeRun(result));
    assert.equal(parseJson(result).reply, DEPLOYER_REPLY);
    await page.reload();
    assert.match(await page.locator('.tool-result').first().innerText(), /deploy[\s\S]*deployed api <b>v2<\/b>/);
    assert.match(
      await call.locator('.approval-note').innerText(),
      /approved\s+a1: approved by alice \(in the explorer\)/,
    );
    assert.equal(await page.locator('form.decide').count(), 0);
    assert.equal(await page.evaluate("localStorage.getItem('baton-explorer-decider')"), 'alice', 'the name is kept');
    await shot('explorer-approved');
  });

  test('browser: a call rejected with a reason from the tree tells the agent why; Enter alone decides nothing', async () => {
    const { root, run } = await startDeploy();
    await page.goto(explorerUrl);
    await page.evaluate("localStorage.setItem('baton-explorer-decider', 'bob')");
    await page.goto(`${explorerUrl}/threads/${root}`);
    const waiting = page.locator('#approvals .approval[data-approval="a1"]');
    const reason = waiting.locator('input[name="reason"]');
    await reason.fill(REJECTION);
    // The name this browser decided under last is filled in.
    assert.equal(await waiting.locator('input[name="by"]').inputValue(), 'bob');
    await page.evaluate('window.explorerTestMarker = 2');
    await reason.press('Enter');
    await page.waitForTimeout(1_000);
    assert.equal(await page.evaluate('window.explorerTestMarker'), 2, 'no form was sent');
    const { rows } = await pool.query<{ status: string }>(
      `SELECT status FROM approvals WHERE root_thread_id = $1 AND approval_id = 'a1'`,
      [root],
    );
    assert.equal(rows[0]?.status, 'pending', 'Enter in a field is neither an approval nor a rejection');
    await shot('explorer-approval-waiting');
    await waiting.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(`${explorerUrl}/threads/${root}#approvals`);
    const result = await run.finished();
    assert.equal(result.code, 0, describeRun(result));
    await page.goto(`${explorerUrl}/threads/${root}/transcript`);
    assert.equal(
      await page.locator('.tool-result pre').first().innerText(),
      `Error: bob (in the explorer) rejected this call of 'deploy', so it did not run. Reason: ${REJECTION}`,
    );
    await page.goto(`${explorerUrl}/threads/${root}`);
    await page.locator('#approvals details.approval-history summary').click();
    assert.match(
      await page.locator('#approvals tr[data-approval="a1"]').innerText(),
      new RegExp(`deploy[\\s\\S]*rejected\\s+bob \\(in the explorer\\)\\s+not before the <i>release notes</i> are out`),
    );
    assert.equal(await page.locator('#no-approvals').count(), 1);
  });

  test('browser: a real fork_join run shows its tasks, the deadline reclaiming the slow one, and the proposal', async () => {
    const run = await cli('run', 'fork_lead', 'Split the work', '--json');
    assert.equal(run.code, 0, `${describeRun(run)}\nbaton dev:\n${dev?.output.stderr() ?? ''}`);
    const root = String(parseJson(run).threadId);
    await page.goto(`${explorerUrl}/threads/${root}`);
    const fork = page.locator('.fork[data-fork="1"]');
    await fork.waitFor();
    assert.match(
      await fork.locator('.fork-head').innerText(),
      /fork 1\s+(timeout|partial)\s+· 3 tasks · store isolated/,
    );
    assert.deepEqual(await fork.locator('table.fork-tasks tbody tr .status').allInnerTexts(), [
      'success',
      'success',
      'timeout',
    ]);
    assert.equal(await fork.locator('.timeline .bar').count(), 3);
    assert.equal(await fork.locator('.timeline .reclaimed').count(), 1, 'the deadline reclaimed the laggard');
    assert.equal(await fork.locator('.node').count(), 3, 'each task with its thread');
    await shot('explorer-fork-run');

    await page.goto(`${explorerUrl}/threads/${root}/env`);
    const proposal = page.locator('table.proposals tbody tr');
    assert.equal(await proposal.count(), 1, await page.locator('main').innerText());
    assert.match(await proposal.innerText(), /plan[\s\S]*proposer[\s\S]*fork 1 task 2/);
    const events = await page.locator('#events tbody').innerText();
    assert.match(events, /proposed\s+plan/);
    await shot('explorer-fork-run-env');
  });

  test('browser: a fork is drawn as a group with each task’s status and a timeline (fork rows are a fixture)', async () => {
    const solver = `${threadId}/solver-1`;
    const tasks = [1, 2, 3].map((n) => `${threadId}/scout-${n}`);
    for (const [index, task] of tasks.entries()) {
      await pool.query(
        `INSERT INTO threads (thread_id, root_thread_id, parent_thread_id, agent, caller, fork_task, started_at, status, finished_at)
         VALUES ($1, $2, $3, 'scout', 'solver', $4, now() - make_interval(secs => $5), $6, $7)`,
        [
          task,
          threadId,
          solver,
          `fork 1 task ${index + 1}`,
          30 - index * 4,
          index === 2 ? 'running' : 'completed',
          index === 2 ? null : new Date(Date.now() - (18 - index * 6) * 1000),
        ],
      );
    }
    await pool.query(
      `INSERT INTO forks (root_thread_id, number, operation_id, parent_thread_id, caller, store_mode, prefix, fail_fast, deadline_seconds, max_parallel, status, created_at, deadline_at, finished_at)
       VALUES ($1, 1, 'browser-test:fork-1', $2, 'solver', 'isolated', 'scouts', false, 20, 3, 'partial', now() - interval '31 seconds', now() - interval '11 seconds', now() - interval '10 seconds')`,
      [threadId, solver],
    );
    await pool.query(
      `INSERT INTO fork_tasks (root_thread_id, fork_number, task_index, agent, thread_id, workflow_id, status, error, reclaimed_at, finished_at)
       VALUES ($1, 1, 1, 'scout', $2, $3, 'success', NULL, NULL, now() - interval '18 seconds'),
              ($1, 1, 2, 'scout', $4, $5, 'success', NULL, NULL, now() - interval '12 seconds'),
              ($1, 1, 3, 'scout', $6, $7, 'timeout', 'past the 20 s deadline', now() - interval '11 seconds', now() - interval '11 seconds')`,
      [threadId, tasks[0], `baton/${tasks[0]}`, tasks[1], `baton/${tasks[1]}`, tasks[2], `baton/${tasks[2]}`],
    );
    await page.goto(`${explorerUrl}/threads/${threadId}`);
    const fork = page.locator(`.node[data-thread="${solver}"] ~ ul .fork[data-fork="1"]`);
    await fork.waitFor();
    assert.match(await fork.locator('.fork-head').innerText(), /fork 1\s+partial\s+· 3 tasks · store isolated/);
    const statuses = await fork.locator('table.fork-tasks tbody tr .status').allInnerTexts();
    assert.deepEqual(statuses, ['success', 'success', 'timeout']);
    assert.equal(await fork.locator('.timeline .bar').count(), 3);
    assert.equal(await fork.locator('.timeline .reclaimed').count(), 1);
    await fork.scrollIntoViewIfNeeded();
    await shot('explorer-fork');
  });

  test(
    'browser: the Temporal Web UI of the dev server lists the run’s workflows by BatonRootThreadId',
    { skip: env.temporalCli ? false : 'the test stack runs on TEMPORAL_ADDRESS: no dev server of ours, so no Web UI' },
    async () => {
      assert.ok(uiUrl, 'the dev server runs the Web UI');
      const query = encodeURIComponent(`BatonRootThreadId="${threadId}"`);
      const expected = [
        `baton/${threadId}`,
        `baton/${threadId}/turn-1`,
        `baton/${threadId}/solver-1`,
        `baton/${threadId}/observer-1`,
      ];
      const deadline = Date.now() + UI_TIMEOUT_MS;
      for (;;) {
        await page.goto(`${uiUrl}/namespaces/default/workflows?query=${query}`);
        const found = await Promise.all(
          expected.map((id) =>
            page
              .getByText(id, { exact: true })
              .first()
              .waitFor({ timeout: 5_000 })
              .then(
                () => true,
                () => false,
              ),
          ),
        );
        if (found.every(Boolean)) break;
        assert.ok(Date.now() < deadline, `the Web UI lists ${expected.join(', ')}: found ${JSON.stringify(found)}`);
      }
      await shot('temporal-web-ui');
    },
  );
});
