/**
 * The example ARC team (examples/arc-team) as a new user runs it (docs/guides/teams.md): `baton dev --agents agents`
 * with the scripted model, `baton run coordinator …`, then `baton tree` and `baton transcript`, and the Web UI's
 * one query (`BatonRootThreadId="<thread>"`) through the Temporal client.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import YAML from 'yaml';
import { BatonSearchAttributes } from '../../common/search-attributes';
import { DEFAULT_ARC_DATA_DIR } from '../../worker/config';
import { uniqueTaskQueue } from '../../testing/test-env';
import {
  ROOT,
  childEnv,
  describeRun,
  env,
  freshDir,
  parseJson,
  parseJsonArray,
  stackEnv,
  startDev,
  type CommandResult,
  type DevProcess,
  problemsInTree,
  batonInProcess,
} from './cli-process';
import type { TreeNode as ClientTreeNode } from '../../client';

const AGENTS_DIR = path.join(ROOT, 'examples', 'arc-team', 'agents');
const MESSAGE = 'Solve ARC task 007bbfb7';
/** Visibility is eventually consistent: how long the workflow list may take to show the whole tree. */
const VISIBILITY_TIMEOUT_MS = 30_000;

/** One step of `agents/model-script.yaml`, as far as this test reads it. */
interface ScriptStep {
  say?: string;
  call?: string;
  args?: Record<string, unknown>;
  calls?: unknown[];
}
const script = YAML.parse(fs.readFileSync(path.join(AGENTS_DIR, 'model-script.yaml'), 'utf8')) as {
  agents: Record<string, ScriptStep[]>;
};

function stepsOf(agent: string): ScriptStep[] {
  const steps = script.agents[agent];
  assert.ok(steps && steps.length > 0, `agents/model-script.yaml scripts the ${agent}`);
  return steps;
}

/** The agent's last scripted step: its final answer. */
function finalSay(agent: string): string {
  const say = stepsOf(agent).at(-1)?.say;
  assert.ok(say, `the ${agent}'s last scripted step is a 'say'`);
  return say;
}

/** The YAML frontmatter of `agents/<agent>.md`. */
function frontmatter(agent: string): Record<string, unknown> {
  const text = fs.readFileSync(path.join(AGENTS_DIR, `${agent}.md`), 'utf8');
  const block = /^---\n([\s\S]*?)\n---\n/.exec(text)?.[1];
  assert.ok(block, `agents/${agent}.md starts with frontmatter`);
  return YAML.parse(block) as Record<string, unknown>;
}

interface TreeNode {
  threadId: string;
  parentThreadId: string | null;
  agent: string;
  caller: string | null;
  status: string;
  lastError: string | null;
  modelCalls: number;
  totalTokens: number;
  children: TreeNode[];
}

interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

describe('the ARC team through the CLI, with `baton dev --agents agents` on the test stack', () => {
  const stateDir = freshDir('team-state');
  let dev: DevProcess | undefined;
  /** Commands find the stack through stack.json, as a user's do. */
  const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());
  let run: CommandResult;
  let threadId = '';

  before(async () => {
    assert.ok(
      fs.existsSync(path.join(DEFAULT_ARC_DATA_DIR, '007bbfb7.json')),
      `the ARC training data is at ${DEFAULT_ARC_DATA_DIR} (load_arc_task's default, BATON_ARC_DIR unset)`,
    );
    // No OPENAI_API_KEY (childEnv drops it): the scripted model answers from agents/model-script.yaml.
    dev = await startDev({
      stateDir,
      args: ['--agents', AGENTS_DIR, '--task-queue', uniqueTaskQueue('team')],
      env: stackEnv(),
    });
    run = await cli('run', 'coordinator', MESSAGE, '--json');
    const output = run.code === 0 ? parseJson(run) : {};
    threadId = typeof output.threadId === 'string' ? output.threadId : '';
  });

  after(async () => {
    await dev?.stop();
  });

  test('team: run coordinator answers with the coordinator’s final scripted reply', () => {
    assert.equal(run.code, 0, `${describeRun(run)}\nbaton dev:\n${dev?.output.stderr() ?? ''}`);
    const output = parseJson(run);
    assert.ok(threadId !== '', `a thread id, not ${String(output.threadId)}`);
    assert.equal(output.workflowId, `baton/${threadId}`);
    assert.equal(output.status, 'completed');
    assert.equal(output.reply, finalSay('coordinator'));
    assert.equal(output.steps, stepsOf('coordinator').length);
  });

  test('team: tree --json shows coordinator → solver → observer, each completed with its model calls and tokens', async () => {
    const result = await cli('tree', threadId, '--json');
    assert.equal(result.code, 0, describeRun(result));
    const coordinator = parseJson(result) as unknown as TreeNode;

    const expectNode = (node: TreeNode | undefined, expected: Partial<TreeNode>) => {
      assert.ok(node, `a ${expected.agent} node`);
      assert.deepEqual(
        {
          threadId: node.threadId,
          parentThreadId: node.parentThreadId,
          agent: node.agent,
          caller: node.caller,
          status: node.status,
          lastError: node.lastError,
          modelCalls: node.modelCalls,
        },
        { ...expected, status: 'completed', lastError: null, modelCalls: stepsOf(node.agent).length },
      );
      assert.ok(node.totalTokens > 0, `${node.agent} used tokens: ${node.totalTokens}`);
    };
    expectNode(coordinator, { threadId, parentThreadId: null, agent: 'coordinator', caller: null });
    assert.equal(coordinator.children.length, 1, JSON.stringify(coordinator, null, 2));
    const solver = coordinator.children[0];
    expectNode(solver, {
      threadId: `${threadId}/solver-1`,
      parentThreadId: threadId,
      agent: 'solver',
      caller: 'coordinator',
    });
    assert.equal(solver?.children.length, 1, JSON.stringify(solver, null, 2));
    const observer = solver?.children[0];
    expectNode(observer, {
      threadId: `${threadId}/observer-1`,
      parentThreadId: `${threadId}/solver-1`,
      agent: 'observer',
      caller: 'solver',
    });
    assert.deepEqual(observer?.children, []);
  });

  test('team: no turn of the tree failed and no tool call returned an Error: result', async () => {
    const result = await cli('tree', threadId, '--json');
    assert.deepEqual(await problemsInTree(parseJson(result) as unknown as ClientTreeNode), []);
  });

  test('team: tree prints one line a thread with its branch, and the total', async () => {
    const json = await cli('tree', threadId, '--json');
    assert.equal(json.code, 0, describeRun(json));
    const coordinator = parseJson(json) as unknown as TreeNode;
    const solver = coordinator.children[0];
    const observer = solver?.children[0];
    assert.ok(solver && observer, 'a three-level tree');

    const result = await cli('tree', threadId);
    assert.equal(result.code, 0, describeRun(result));
    const line = (prefix: string, node: TreeNode) =>
      `${prefix}${node.agent}  completed  ${node.modelCalls} model calls  ${node.totalTokens} tokens  (${node.threadId})`;
    const total = coordinator.totalTokens + solver.totalTokens + observer.totalTokens;
    assert.equal(
      result.stdout,
      [line('', coordinator), line('└─ ', solver), line('   └─ ', observer), `total: ${total} tokens`, ''].join('\n'),
    );
  });

  test('team: transcript --json of the root: the human message, the call to the solver, its answer, the reply', async () => {
    const result = await cli('transcript', threadId, '--json');
    assert.equal(result.code, 0, describeRun(result));
    const messages = parseJsonArray(result);
    assert.deepEqual(
      messages.map((m) => [m.seq, m.role, m.agent]),
      [
        [1, 'user', 'coordinator'],
        [2, 'assistant', 'coordinator'],
        [3, 'tool', 'coordinator'],
        [4, 'assistant', 'coordinator'],
      ],
    );
    // A human message gets no delegation preamble.
    assert.equal(messages[0]?.content, MESSAGE);
    const [first] = stepsOf('coordinator');
    const calls = messages[1]?.toolCalls as ToolCall[];
    assert.deepEqual(
      calls.map((call) => [call.name, JSON.parse(call.arguments) as unknown]),
      [[first?.call, first?.args]],
    );
    assert.equal(messages[2]?.toolCallId, calls[0]?.id);
    assert.equal(messages[2]?.content, finalSay('solver'));
    assert.equal(messages[3]?.content, finalSay('coordinator'));
    assert.equal(messages[3]?.toolCalls ?? null, null);
  });

  test('team: the observer’s message starts with the delegation preamble naming its caller and the chain', async () => {
    const result = await cli('transcript', `${threadId}/observer-1`, '--json');
    assert.equal(result.code, 0, describeRun(result));
    const [received] = parseJsonArray(result);
    const solverCall = stepsOf('solver').find((step) => step.call === 'observer');
    const solverDescription = frontmatter('solver').description;
    // The solver stored the task before delegating, and pointed the observer to it with context_keys.
    const arcTaskStore = stepsOf('solver').find((step) => step.call === 'store_env_data');
    assert.ok(
      solverCall && typeof solverDescription === 'string',
      'the solver calls the observer and has a description',
    );
    assert.equal(
      received?.content,
      [
        '---',
        '[Delegation Context]',
        'Called by: solver',
        `solver is: "${solverDescription}"`,
        'Delegation chain: human → coordinator → solver → you (observer)',
        `Task context: ${MESSAGE}`,
        'Shared environment data is available — call list_env_data() to see what has been stored.',
        'solver points you to these entries (read them with get_env_data):',
        `- arc_task: ${String(arcTaskStore?.args?.short_description)}`,
        '---',
        '',
        String(solverCall.args?.message),
      ].join('\n'),
    );
  });

  test('team: BatonRootThreadId="<thread>" lists the thread, its turn and both delegations', async () => {
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const client = new Client({ connection, namespace: 'default' });
      const expected = [
        {
          workflowId: `baton/${threadId}`,
          type: 'threadWorkflow',
          thread: threadId,
          parent: undefined,
          agent: 'coordinator',
        },
        {
          workflowId: `baton/${threadId}/turn-1`,
          type: 'rootTurnWorkflow',
          thread: threadId,
          parent: undefined,
          agent: 'coordinator',
        },
        {
          workflowId: `baton/${threadId}/solver-1`,
          type: 'agentTurnWorkflow',
          thread: `${threadId}/solver-1`,
          parent: threadId,
          agent: 'solver',
        },
        {
          workflowId: `baton/${threadId}/observer-1`,
          type: 'agentTurnWorkflow',
          thread: `${threadId}/observer-1`,
          parent: `${threadId}/solver-1`,
          agent: 'observer',
        },
      ].sort((a, b) => a.workflowId.localeCompare(b.workflowId));

      const list = async () => {
        const rows = [];
        for await (const info of client.workflow.list({ query: `BatonRootThreadId="${threadId}"` })) {
          const attributes = info.typedSearchAttributes;
          assert.equal(attributes.get(BatonSearchAttributes.rootThreadId), threadId);
          rows.push({
            workflowId: info.workflowId,
            type: info.type,
            thread: attributes.get(BatonSearchAttributes.threadId),
            parent: attributes.get(BatonSearchAttributes.parentThreadId),
            agent: attributes.get(BatonSearchAttributes.agent),
          });
        }
        return rows.sort((a, b) => a.workflowId.localeCompare(b.workflowId));
      };

      const deadline = Date.now() + VISIBILITY_TIMEOUT_MS;
      let listed = await list();
      while (JSON.stringify(listed) !== JSON.stringify(expected) && Date.now() < deadline) {
        await sleep(250);
        listed = await list();
      }
      assert.deepEqual(listed, expected);
    } finally {
      await connection.close();
    }
  });
});
