/**
 * `npm run record-histories`: runs the replay scenarios on a fresh test stack and writes their workflow histories
 * to `test/replay/histories/`. Re-record when a workflow changes on purpose (behind `patched()`), and commit the
 * new files with the change; `test/replay` then proves old histories still replay.
 */
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { parseAgentFile } from '../worker/agents';
import { startAgentHarness } from './harness';
import { parseScript } from './scripted-model';
import { installRuntime } from '../worker/runtime';
import { startTestStack } from './test-stack';
import { uniqueTaskQueue } from './test-env';

const ROOT = path.resolve(__dirname, '..');
const HISTORIES_DIR = path.join(ROOT, 'test', 'replay', 'histories');
const log = (line: string) => process.stderr.write(`[record] ${line}\n`);

/** Agents and script of the recorded scenarios: a two-turn conversation, a tool error, a retried model call. */
const agents = new Map(
  [
    parseAgentFile('---\nname: greeter\ndescription: Greets people.\n---\nYou greet people.\n', 'greeter.md'),
    parseAgentFile('---\nname: caller\ndescription: Calls a tool it lacks.\n---\nYou call tools.\n', 'caller.md'),
    parseAgentFile('---\nname: flaky\ndescription: Its model fails once.\n---\nYou are flaky.\n', 'flaky.md'),
  ].map((agent) => [agent.name, agent]),
);
const script = parseScript(
  `
agents:
  greeter:
    - say: "Hello, human."
    - say: "Hello again."
  caller:
    - calls:
        - { call: load_arc_task, args: { task_id: "007bbfb7" } }
        - { call: think, args: { thought: "two calls at once" } }
    - say: "Answered without tools."
  flaky:
    - fail: 503
    - say: "Recovered."
`,
  'record-histories',
);

async function main(): Promise<void> {
  installRuntime();
  const stack = await startTestStack(ROOT, process.env, log);
  try {
    const harness = await startAgentHarness({
      temporalAddress: stack.temporalAddress,
      databaseUrl: stack.databaseUrl,
      taskQueue: uniqueTaskQueue('record'),
      agents,
      script,
      workflowBundle: { codePath: stack.workflowBundlePath },
    });
    try {
      const scenarios: { name: string; agent: string; messages: string[] }[] = [
        { name: 'greeter-two-turns', agent: 'greeter', messages: ['Hi', 'Hi again'] },
        { name: 'caller-tool-errors', agent: 'caller', messages: ['Load the task'] },
        { name: 'flaky-model-retry', agent: 'flaky', messages: ['Try'] },
      ];
      fs.mkdirSync(HISTORIES_DIR, { recursive: true });
      for (const scenario of scenarios) {
        const thread = await harness.client.startThread({ agent: scenario.agent, threadId: `replay-${scenario.name}` });
        for (const message of scenario.messages) await thread.send(message);
        await thread.end();
        await thread.workflow.result();
        const workflowIds = [
          thread.workflowId,
          ...scenario.messages.map((_, i) => `${thread.workflowId}/turn-${i + 1}`),
        ];
        for (const [index, workflowId] of workflowIds.entries()) {
          const history = await harness.client.temporal.workflow.getHandle(workflowId).fetchHistory();
          const file = path.join(HISTORIES_DIR, `${scenario.name}.${index === 0 ? 'thread' : `turn-${index}`}.json`);
          fs.writeFileSync(file, `${historyToJSON(history)}\n`);
          log(`wrote ${path.relative(ROOT, file)}`);
        }
      }
    } finally {
      await harness.close();
    }
  } finally {
    await stack.stop();
  }
}

main().catch((error: unknown) => {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
