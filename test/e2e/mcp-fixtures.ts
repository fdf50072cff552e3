/**
 * What the tests of `baton mcp serve` share: a worker on the test stack (its own task queue) running agents that
 * answer, take their time, ask a person, store env data, wait for an approval or fail, on the scripted model.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { defineTool } from '../../activities/tools/types';
import { parseScript } from '../../scripted-model';
import { startTestHarness, type AgentHarness } from '../../testing/harness';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { ROOT } from './cli-process';

export const BATON = path.join(ROOT, 'bin', 'baton.js');

export const GREETER = 'mcp_greeter';
export const SLOW = 'mcp_slow';
export const ASKER = 'mcp_asker';
export const KEEPER = 'mcp_keeper';
export const SHIPPER = 'mcp_shipper';
/** The tools `baton mcp serve` lists, in its order. */
export const TOOL_NAMES = [
  'list_agents',
  'start_thread',
  'send_message',
  'get_thread',
  'get_transcript',
  'list_questions',
  'answer_question',
  'list_approvals',
  'decide_approval',
  'list_env_data',
  'get_env_data',
];

/** Has no script: its first model call is refused (`script_exhausted`), and its turn fails. */
export const BROKEN = 'mcp_broken';

export const GREETING = 'Hello from Baton.';
export const SECOND_GREETING = 'Hello again.';
export const SLOW_REPLY = 'Done at last.';
/** The hold the slow agent's reply waits for: `harness.model.release(SLOW_GATE)`. */
export const SLOW_GATE = 'mcp-slow';
export const QUESTION = 'Which colour do you want?';
export const ASKER_REPLY = 'Blue it is.';
export const KEEPER_REPLY = 'Stored the colour.';
export const SHIPPER_REPLY = 'Shipped.';
export const COLOUR = { name: 'blue', hex: '#0000ff' };

const script = parseScript(
  `
agents:
  ${GREETER}:
    - say: ${JSON.stringify(GREETING)}
    - say: ${JSON.stringify(SECOND_GREETING)}
  ${SLOW}:
    - { say: ${JSON.stringify(SLOW_REPLY)}, hold: ${SLOW_GATE} }
  ${ASKER}:
    - { call: ask_human, args: { question: ${JSON.stringify(QUESTION)} } }
    - say: ${JSON.stringify(ASKER_REPLY)}
  ${KEEPER}:
    - call: store_env_data
      args: { key: palette/colour, short_description: "The colour chosen", value: ${JSON.stringify(COLOUR)} }
    - say: ${JSON.stringify(KEEPER_REPLY)}
  ${SHIPPER}:
    - { call: deploy, args: { service: billing } }
    - say: ${JSON.stringify(SHIPPER_REPLY)}
`,
  'mcp-server',
);

/** The services `deploy` really deployed, in this test process. */
export const deployed: string[] = [];
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service.',
  parameters: z.object({ service: z.string() }),
  sideEffects: true,
  needsApproval: true,
  run: ({ service }) => {
    deployed.push(service);
    return `deployed ${service}`;
  },
});

export const GREETER_FILE = `---\nname: ${GREETER}\ndescription: Greets whoever writes.\n---\n\nYou greet warmly.\n`;

function agent(name: string, frontmatter: string): [string, ReturnType<typeof parseAgentFile>] {
  return [name, parseAgentFile(`---\nname: ${name}\n${frontmatter}\n---\n\nYou do your job.\n`, `${name}.md`)];
}

const agents: AgentRegistry = new Map([
  [GREETER, parseAgentFile(GREETER_FILE, `${GREETER}.md`)],
  agent(SLOW, 'description: Takes its time.'),
  agent(ASKER, 'description: Asks a person first.'),
  agent(KEEPER, 'description: Keeps what it learns in the shared data.'),
  agent(SHIPPER, 'description: Ships services.\ncapabilities: [deploy]'),
  agent(BROKEN, 'description: Fails every turn.'),
]);

export function startMcpHarness(name: string): Promise<AgentHarness> {
  return startTestHarness(name, { agents, script, tools: [deploy] });
}

/** The text of a tool result's one content item. */
export function resultText(result: CallToolResult): string {
  assert.equal(result.content.length, 1, JSON.stringify(result));
  const [item] = result.content;
  assert.equal(item?.type, 'text');
  return item.type === 'text' ? item.text : '';
}

/** A successful tool result's structured content, checked against its text (the same JSON). */
export function structured(result: CallToolResult): Record<string, unknown> {
  assert.notEqual(result.isError, true, `a tool error: ${resultText(result)}`);
  const content = result.structuredContent;
  assert.ok(content, 'structured content');
  assert.deepEqual(JSON.parse(resultText(result)), content);
  return content;
}

/** A tool error's one line. */
export function toolError(result: CallToolResult): string {
  assert.equal(result.isError, true, `expected a tool error, got ${JSON.stringify(result)}`);
  const text = resultText(result);
  assert.ok(!text.includes('\n'), `one line: ${text}`);
  return text;
}
