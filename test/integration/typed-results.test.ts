/**
 * Typed results on the real stack (a Temporal dev server, Postgres, a worker, scripted models over HTTP): an agent with
 * an `output` schema ends its turn with a validated object, asked for through the `final_output` tool on one endpoint
 * and through `response_format: json_schema` on a provider listed for structured output; an answer that does not
 * match is repaired (the model told why), in each step mode; the repairs run out with `Output.Invalid`; a delegating
 * agent receives the object as JSON, a fork's join gives each typed task's object; `send` checks it with a zod
 * schema, a message sent again under its id gets it back, and `baton run --json` prints it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { ErrorType } from '../../common/errors';
import { FINAL_OUTPUT_TOOL } from '../../activities/output';
import { runCli } from '../../cli/program';
import { parseScript, startScriptedModelServer, type ScriptedModelServer } from '../../scripted-model';
import { readModelLog, startTestHarness, type AgentHarness, type ModelLogEntry } from '../../testing/harness';
import { readTestEnv, uniqueThreadId } from '../../testing/test-env';
import { parseAgentFile, type AgentRegistry } from '../../worker/agents';
import { createModelClient } from '../../worker/model-client';
import { directActivities } from './direct-activities';
import { causes } from './failures';

const env = readTestEnv();
const workDir = fs.mkdtempSync(path.join(env.stateDir, 'typed-results-'));
const modelLog = path.join(workDir, 'model.jsonl');
const structuredLog = path.join(workDir, 'structured.jsonl');

/** The schema every typed agent here answers with, as its file writes it. */
const COUNT_SCHEMA =
  'output:\n  type: object\n  properties:\n    total: { type: integer }\n    items: { type: array, items: { type: string } }\n' +
  '  required: [total, items]\n  additionalProperties: false\n';
/** The same schema in zod, as a program that sends to a typed agent checks what comes back. */
const Count = z.object({ total: z.number().int(), items: z.array(z.string()) });

function agent(name: string, extra = '') {
  const text = `---\nname: ${name}\ndescription: The ${name} agent.\n${extra}---\nYou are ${name}.\n`;
  return parseAgentFile(text, `${name}.md`);
}

const agents: AgentRegistry = new Map(
  [
    agent('counter', COUNT_SCHEMA),
    agent('counter_local', `${COUNT_SCHEMA}steps: local\n`),
    agent('counter_batched', `${COUNT_SCHEMA}steps: batched\n`),
    agent('structured', `${COUNT_SCHEMA}model: structured/json-model\n`),
    agent('stubborn', `${COUNT_SCHEMA}output_repairs: 1\n`),
    agent('delegator', 'capabilities: [counter]\n'),
    agent('forker', 'capabilities: [fork_join, counter, counter_local]\n'),
    agent('plain'),
  ].map((a) => [a.name, a]),
);

/** A typed agent's script: one answer in text that is no JSON, then the object through `final_output`. */
const repairedCount = (name: string, total: number) => `  ${name}:
    - say: "There are ${total} of them."
    - call: ${FINAL_OUTPUT_TOOL}
      args: { total: ${total}, items: [${Array.from({ length: total }, (_, i) => `"i${i}"`).join(', ')}] }
`;

const script = parseScript(
  `
agents:
${repairedCount('counter', 3)}${repairedCount('counter_local', 2)}${repairedCount('counter_batched', 4)}  stubborn:
    - say: "Lots."
    - call: ${FINAL_OUTPUT_TOOL}
      args: { total: "many", items: [] }
    - say: "never asked: the repairs ran out"
  delegator:
    - call: counter
      args: { message: "Count the things." }
    - say: "The counter answered."
  forker:
    - call: fork_join
      args:
        tasks:
          - { agent: counter, message: "Count here." }
          - { agent: counter_local, message: "Count there." }
    - say: "Both counted."
  plain:
    - say: "Just text."
`,
  'typed-results',
);

/** The structured-output provider's script: an answer of the wrong type, then one fenced as Markdown. */
const structuredScript = parseScript(
  `
agents:
  structured:
    - say: '{"total": "five", "items": []}'
    - say: "\`\`\`json\\n{\\"total\\": 1, \\"items\\": [\\"only\\"]}\\n\`\`\`"
`,
  'typed-results-structured',
);

let harness: AgentHarness;
let structuredModel: ScriptedModelServer;

/** The scripted model's requests for `threadId`, in order. */
const requestsOf = (threadId: string, file = modelLog): ModelLogEntry[] =>
  readModelLog(file).filter((entry) => entry.thread === threadId);

/** The names of the tools a logged request offered. */
const offeredTools = (request: ModelLogEntry | undefined): string[] =>
  ((request?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);

/** A thread's transcript as role and content, in order. */
async function transcriptOf(
  threadId: string,
): Promise<{ role: string; content: string | null; operationId: string }[]> {
  const { rows } = await harness.pool.query<{ role: string; content: string | null; operationId: string }>(
    `SELECT role, content, operation_id AS "operationId" FROM transcript_messages WHERE thread_id = $1 ORDER BY seq`,
    [threadId],
  );
  return rows;
}

before(async () => {
  structuredModel = await startScriptedModelServer({ script: structuredScript, logFile: structuredLog });
  harness = await startTestHarness('typed-results', {
    agents,
    script,
    modelLogFile: modelLog,
    providers: { structured: createModelClient({ baseURL: structuredModel.baseURL, apiKey: 'unused' }) },
    structuredOutput: ['structured'],
  });
});

after(async () => {
  await harness?.close();
  await structuredModel?.close();
});

test('typed results: an answer that is no JSON is repaired, and the turn ends with the object, in every step mode', async () => {
  const roots = new Map<string, string>();
  for (const [name, total] of [
    ['counter', 3],
    ['counter_local', 2],
    ['counter_batched', 4],
  ] as const) {
    const root = uniqueThreadId(name.replace('_', '-'));
    const thread = await harness.client.startThread({ agent: name, threadId: root });
    const turn = await thread.send('Count them.', { output: Count });
    const items = Array.from({ length: total }, (_, i) => `i${i}`);
    assert.deepEqual(turn.output, { total, items }, name);
    // Typed by the zod schema: a field read without a cast.
    assert.equal(turn.output?.items.length, total, name);
    assert.deepEqual(JSON.parse(turn.reply), turn.output, `${name}: the reply is the object's JSON`);
    assert.equal(turn.steps, 2, `${name}: the refused answer took a step`);

    const requests = requestsOf(root);
    assert.equal(requests.length, 2, `${name}: the model was asked twice`);
    assert.ok(offeredTools(requests[0]).includes(FINAL_OUTPUT_TOOL), `${name}: offered the final_output tool`);
    assert.equal(requests[0]?.response_format, undefined, `${name}: no response_format on this endpoint`);
    const told = requests[1]?.messages.at(-1);
    assert.equal(told?.role, 'user', name);
    assert.match(told?.content ?? '', /^\[Output check\] Your answer was not accepted: the answer is not JSON/, name);
    assert.match(told?.content ?? '', new RegExp(`Call ${FINAL_OUTPUT_TOOL} once`), name);

    // The transcript keeps the refused answer, the repair (once, by its operation id) and the answer as JSON.
    const transcript = await transcriptOf(root);
    assert.deepEqual(
      transcript.map((message) => message.role),
      ['user', 'assistant', 'user', 'assistant'],
      name,
    );
    assert.match(transcript[2]?.operationId ?? '', /:output-repair$/, name);
    assert.deepEqual(JSON.parse(transcript[3]?.content ?? ''), { total, items }, name);
    roots.set(name, root);
  }

  // Each step run again (as after a crash) decides from its stored reply as the first run did: the refused answer is
  // refused again without a second repair message, the answer gives the same object, and no model is asked.
  const root = roots.get('counter') ?? '';
  const direct = directActivities(harness, { agents, workDir, tools: [], source: 'typed-results' });
  const { version } = await direct.run(direct.activities.resolveAgent, { name: 'counter' });
  const { rows } = await harness.pool.query<{ epoch: number }>('SELECT epoch FROM threads WHERE thread_id = $1', [
    root,
  ]);
  const scope = { rootThreadId: root, threadId: root, agent: 'counter', epoch: Number(rows[0]?.epoch) };
  const replies = (await transcriptOf(root)).filter((message) => message.role === 'assistant');
  const rerun = (step: number) =>
    direct.run(direct.activities.callModel, {
      scope,
      world: 'default',
      agentVersion: version,
      operationId: replies[step]?.operationId ?? '',
      step,
    });
  const refused = await rerun(0);
  assert.equal(refused.reused, true);
  assert.equal(refused.outputRepair, true);
  assert.equal(refused.output, undefined);
  const answered = await rerun(1);
  assert.equal(answered.reused, true);
  assert.deepEqual(answered.output, { total: 3, items: ['i0', 'i1', 'i2'] });
  assert.equal((await transcriptOf(root)).length, 4, 'nothing stored again');
  assert.equal(requestsOf(root).length, 2, 'no model asked again');
});

test('typed results: a provider with structured output gets the schema as response_format, and its answer is checked too', async () => {
  const root = uniqueThreadId('structured');
  const thread = await harness.client.startThread({ agent: 'structured', threadId: root });
  const turn = await thread.send<{ total: number; items: string[] }>('Count.');
  assert.deepEqual(turn.output, { total: 1, items: ['only'] }, 'a fenced JSON answer is read without its fence');
  const requests = requestsOf(root, structuredLog);
  assert.equal(requests.length, 2);
  assert.deepEqual(requests[0]?.response_format, {
    type: 'json_schema',
    json_schema: { name: 'output', schema: agents.get('structured')?.output },
  });
  assert.ok(!offeredTools(requests[0]).includes(FINAL_OUTPUT_TOOL), 'no final_output tool where the schema is sent');
  const told = requests[1]?.messages.at(-1)?.content ?? '';
  assert.match(told, /does not match the schema: data\/total must be integer/);
  assert.match(told, /Answer with only the JSON object/);
});

test('typed results: when the repairs run out the turn fails with Output.Invalid, saying what was wrong', async () => {
  const root = uniqueThreadId('stubborn');
  const thread = await harness.client.startThread({ agent: 'stubborn', threadId: root });
  await assert.rejects(thread.send('Count.'), (error: Error) => {
    const failure = causes(error).find((cause) => cause instanceof ApplicationFailure);
    assert.ok(failure instanceof ApplicationFailure, String(error));
    assert.equal(failure.type, ErrorType.OutputInvalid);
    assert.match(failure.message, /the answer of stubborn does not match its output schema after 1 repair/);
    assert.match(failure.message, /data\/total must be integer/);
    return true;
  });
  assert.equal(requestsOf(root).length, 2, 'one repair, then no further model call');
  const repairs = (await transcriptOf(root)).filter((message) => message.operationId.endsWith(':output-repair'));
  assert.equal(repairs.length, 1);
  const { rows } = await harness.pool.query<{ status: string }>('SELECT status FROM threads WHERE thread_id = $1', [
    root,
  ]);
  assert.equal(rows[0]?.status, 'failed');
});

test('typed results: a delegating agent receives the object as JSON, and a fork gives each typed task its object', async () => {
  const lead = uniqueThreadId('delegator');
  await (await harness.client.startThread({ agent: 'delegator', threadId: lead })).send('Ask the counter.');
  const toolResult = (await transcriptOf(lead)).find((message) => message.role === 'tool');
  assert.deepEqual(JSON.parse(toolResult?.content ?? ''), { total: 3, items: ['i0', 'i1', 'i2'] });

  const fork = uniqueThreadId('forker');
  await (await harness.client.startThread({ agent: 'forker', threadId: fork })).send('Count in two places.');
  const joined = (await transcriptOf(fork)).find((message) => message.role === 'tool');
  const result = JSON.parse(joined?.content ?? '') as {
    status: string;
    tasks: { agent: string; output?: unknown; reply?: string }[];
  };
  assert.equal(result.status, 'success');
  assert.deepEqual(
    result.tasks.map((task) => [task.agent, task.output, task.reply]),
    [
      ['counter', { total: 3, items: ['i0', 'i1', 'i2'] }, undefined],
      ['counter_local', { total: 2, items: ['i0', 'i1'] }, undefined],
    ],
  );
});

test('typed results: a message sent again under its id gets the object back; an untyped turn has none to check', async () => {
  const root = uniqueThreadId('redeliver');
  // The thread continues as new after each turn: the repeat is answered from what the thread carried (the turn
  // answered in the thread's workflow, its steps being local) and the answer stored in Postgres.
  const thread = await harness.client.startThread({
    agent: 'counter_local',
    threadId: root,
    continueAsNewAfterTurns: 1,
  });
  const first = await thread.send('Count.', { messageId: 'count-once' });
  const again = await thread.send('Count.', { messageId: 'count-once', output: Count });
  assert.deepEqual(again.output, first.output);
  assert.deepEqual(again.output, { total: 2, items: ['i0', 'i1'] });
  assert.equal(requestsOf(root).length, 2, 'the second delivery ran nothing');

  const plain = await harness.client.startThread({ agent: 'plain', threadId: uniqueThreadId('plain') });
  await assert.rejects(plain.send('Hi.', { output: Count }), /gave no output to check: its agent sets no 'output'/);
});

test('typed results: baton run --json prints the object as output', async () => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(['run', 'counter', 'Count them.', '--json'], {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {
      TEMPORAL_ADDRESS: env.temporalAddress,
      DATABASE_URL: env.databaseUrl,
      BATON_TASK_QUEUE: harness.taskQueue,
    },
    cwd: workDir,
  });
  assert.equal(code, 0, stderr);
  const printed = JSON.parse(stdout) as { output?: unknown; reply: string };
  assert.deepEqual(printed.output, { total: 3, items: ['i0', 'i1', 'i2'] });
});
