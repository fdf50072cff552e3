/**
 * A conversation as a new user has it (issue 3, README "Using the CLI"): an agent file with a tool and a model
 * script, `baton dev`, `baton run` blocking on the agent's question, `baton questions`, `baton answer`,
 * `baton transcript`, `baton send`; and `baton dev` reloading edited agent files.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import YAML from 'yaml';
import type { ScriptedModelLogEntry } from '../../scripted-model';
import { uniqueTaskQueue, uniqueThreadId } from '../../testing/test-env';
import {
  baton,
  childEnv,
  describeRun,
  env,
  freshDir,
  parseJson,
  parseJsonArray,
  stackEnv,
  startBaton,
  startDev,
  waitFor,
  type DevProcess,
  batonInProcess,
} from './cli-process';

const LIBRARIAN = 'librarian';
const NOTARY = 'notary';
const NOTES = 'The reading room opens at nine and closes at five.';
const QUESTION = 'Which day do you want to visit?';
const ANSWER = 'Tuesday';
const FIRST_REPLY = 'The reading room opens at nine on Tuesday.';
const SECOND_REPLY = 'On Saturday it opens at ten.';
const THIRD_REPLY = 'You are welcome.';
const NOTARY_REPLY = 'Noted.';
/** How long a reload may take to show up in `baton dev`'s output (the watcher debounces for 200 ms). */
const RELOAD_TIMEOUT_MS = 15_000;
const QUESTION_TIMEOUT_MS = 60_000;

const librarianFile = (body: string) =>
  `---\nname: ${LIBRARIAN}\ndescription: Answers questions about the library from its notes.\n` +
  `capabilities: [read_file]\n---\n\n${body}\n`;
const notaryFile = (description: string, body: string) =>
  `---\nname: ${NOTARY}\ndescription: ${description}\n---\n\n${body}\n`;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Model calls per thread: read the notes and ask at once, answer; then answer the follow-up (turn 2). */
const SCRIPT = {
  agents: {
    [LIBRARIAN]: [
      {
        calls: [
          { call: 'read_file', args: { path: 'notes.txt' } },
          { call: 'ask_human', args: { question: QUESTION } },
        ],
      },
      { say: FIRST_REPLY },
      { say: SECOND_REPLY },
      { say: THIRD_REPLY },
    ],
    [NOTARY]: [{ say: NOTARY_REPLY }],
  },
};

describe('a conversation through the CLI, with `baton dev` on the test stack', () => {
  const stateDir = freshDir('conversation-state');
  const agentsDir = freshDir('conversation-agents');
  const filesRoot = freshDir('conversation-files');
  const modelLog = path.join(freshDir('conversation-log'), 'model.jsonl');
  let dev: DevProcess | undefined;
  /** Commands find the stack through stack.json, as a user's do. */
  const cli = (...args: string[]) => batonInProcess(['--state-dir', stateDir, ...args], childEnv());
  const devStderr = () => dev?.output.stderr() ?? '';
  const countOf = (text: string) => devStderr().split(text).length - 1;

  /** The system prompt of each model request of `thread`, in order. */
  function systemPrompts(thread: string): string[] {
    return fs
      .readFileSync(modelLog, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as ScriptedModelLogEntry)
      .filter((entry) => entry.thread === thread)
      .map((entry) => {
        const system = (entry.messages as { role?: string; content?: unknown }[]).find((m) => m.role === 'system');
        return typeof system?.content === 'string' ? system.content : '';
      });
  }

  /** Starts `baton run <agent> --thread <id>` in the background and waits until its agent has asked q1. */
  async function runUntilAsked(agent: string, threadId: string, message: string) {
    const run = startBaton(
      ['--state-dir', stateDir, 'run', agent, message, '--thread', threadId, '--json'],
      childEnv(),
    );
    let last = '';
    await waitFor(
      `question q1 of thread ${threadId}`,
      async () => {
        const listed = await cli('questions', threadId, '--json');
        last = describeRun(listed);
        return listed.code === 0 && parseJsonArray(listed).some((row) => row.questionId === 'q1');
      },
      { timeoutMs: QUESTION_TIMEOUT_MS, child: run.child, describe: () => `${last}\nrun: ${run.output.stderr()}` },
    );
    return run;
  }

  async function rewriteAndWaitFor(file: string, text: string, logLine: string): Promise<void> {
    const before = countOf(logLine);
    fs.writeFileSync(file, text);
    await waitFor(`'${logLine}' in baton dev's output`, () => countOf(logLine) > before, {
      timeoutMs: RELOAD_TIMEOUT_MS,
      describe: devStderr,
    });
  }

  before(async () => {
    fs.writeFileSync(path.join(filesRoot, 'notes.txt'), `${NOTES}\n`);
    fs.writeFileSync(path.join(agentsDir, `${LIBRARIAN}.md`), librarianFile('You answer from the notes. (v1)'));
    fs.writeFileSync(path.join(agentsDir, `${NOTARY}.md`), notaryFile('Takes notes.', 'You take notes. (v1)'));
    fs.writeFileSync(path.join(agentsDir, 'model-script.yaml'), YAML.stringify(SCRIPT));
    dev = await startDev({
      stateDir,
      args: ['--agents', agentsDir, '--task-queue', uniqueTaskQueue('conversation')],
      env: stackEnv({ BATON_FILES_ROOT: filesRoot, BATON_MODEL_LOG: modelLog }),
    });
  });

  after(async () => {
    await dev?.stop();
  });

  test('conversation: run waits on the question, answer resumes it, transcript shows every step, send continues', async () => {
    const threadId = uniqueThreadId('conversation');
    const run = await runUntilAsked(LIBRARIAN, threadId, 'When is the reading room open?');

    const human = await cli('questions', threadId);
    assert.equal(human.code, 0, describeRun(human));
    assert.match(human.stdout, /^ID {2}AGENT {6}AGE +QUESTION\n/);
    assert.match(human.stdout, new RegExp(`^q1 {2}${LIBRARIAN} {2}\\d+[smhd] +${escapeRegExp(QUESTION)}$`, 'm'));
    const [question, ...others] = parseJsonArray(await cli('questions', threadId, '--json'));
    assert.deepEqual(others, []);
    assert.equal(question?.agent, LIBRARIAN);
    assert.equal(question?.question, QUESTION);
    assert.equal(question?.status, 'open');

    const answered = await cli('answer', threadId, 'q1', ANSWER, '--json');
    assert.equal(answered.code, 0, describeRun(answered));
    assert.deepEqual(parseJson(answered), { questionId: 'q1', status: 'answered' });

    const finished = await run.finished();
    assert.equal(finished.code, 0, describeRun(finished));
    const result = parseJson(finished);
    assert.equal(result.threadId, threadId);
    assert.equal(result.reply, FIRST_REPLY);
    assert.equal(result.status, 'completed');
    assert.equal(result.steps, 2);

    const none = await cli('questions', threadId);
    assert.equal(none.stdout, 'No open questions.\n', describeRun(none));
    const all = parseJsonArray(await cli('questions', threadId, '--all', '--json'));
    assert.deepEqual(
      all.map((row) => [row.questionId, row.status, row.answer]),
      [['q1', 'answered', ANSWER]],
    );

    const transcript = await cli('transcript', threadId, '--json');
    assert.equal(transcript.code, 0, describeRun(transcript));
    const messages = parseJsonArray(transcript);
    assert.deepEqual(
      messages.map((m) => [m.seq, m.role, m.agent]),
      [
        [1, 'user', LIBRARIAN],
        [2, 'assistant', LIBRARIAN],
        [3, 'tool', LIBRARIAN],
        [4, 'tool', LIBRARIAN],
        [5, 'assistant', LIBRARIAN],
      ],
    );
    assert.equal(messages[0]?.content, 'When is the reading room open?');
    const calls = messages[1]?.toolCalls as { id: string; name: string; arguments: string }[];
    assert.deepEqual(
      calls.map((call) => [call.name, JSON.parse(call.arguments) as unknown]),
      [
        ['read_file', { path: 'notes.txt' }],
        ['ask_human', { question: QUESTION }],
      ],
    );
    // The two calls ran concurrently: match each result to its call, not to its position.
    const resultOf = (name: string) =>
      messages.find((m) => m.role === 'tool' && m.toolCallId === calls.find((call) => call.name === name)?.id)?.content;
    assert.equal(resultOf('read_file'), `${NOTES}\n`);
    assert.equal(resultOf('ask_human'), `The human answered: ${ANSWER}`);
    assert.equal(messages[4]?.content, FIRST_REPLY);

    const readable = await cli('transcript', threadId);
    assert.equal(readable.code, 0, describeRun(readable));
    const lines = readable.stdout.split('\n');
    assert.equal(lines[0], `[1] user (${LIBRARIAN}): When is the reading room open?`);
    assert.equal(lines[1], `[2] assistant (${LIBRARIAN}): → read_file({"path":"notes.txt"})`);
    assert.equal(lines[2], `    → ask_human({"question":"${QUESTION}"})`);
    const toolLine = (result: string) =>
      new RegExp(`^\\[[34]\\] tool \\(${LIBRARIAN}\\): ← ${escapeRegExp(result)}$`, 'm');
    assert.match(readable.stdout, toolLine(`read_file: ${NOTES}`));
    assert.match(readable.stdout, toolLine(`ask_human: The human answered: ${ANSWER}`));
    assert.equal(lines[5], `[5] assistant (${LIBRARIAN}): ${FIRST_REPLY}`);

    const sent = await cli('send', threadId, 'And on Saturday?', '--json');
    assert.equal(sent.code, 0, describeRun(sent));
    const second = parseJson(sent);
    assert.equal(second.threadId, threadId);
    assert.equal(second.turn, 2);
    assert.equal(second.reply, SECOND_REPLY);
    const after = parseJsonArray(await cli('transcript', threadId, '--json'));
    assert.deepEqual(
      after.slice(5).map((m) => [m.seq, m.role, m.content]),
      [
        [6, 'user', 'And on Saturday?'],
        [7, 'assistant', SECOND_REPLY],
      ],
    );
    const sentText = await cli('send', threadId, 'Thanks!');
    assert.equal(sentText.code, 0, describeRun(sentText));
    assert.equal(sentText.stdout, `${THIRD_REPLY}\n`);
  });

  test('conversation: answering an unknown question or one already answered exits 1 with the reason', async () => {
    const threadId = uniqueThreadId('answers');
    const run = await runUntilAsked(LIBRARIAN, threadId, 'When is the reading room open?');
    const unknown = await cli('answer', threadId, 'q9', 'whatever');
    assert.equal(unknown.code, 1, describeRun(unknown));
    assert.equal(unknown.stdout, '');
    assert.equal(unknown.stderr, `baton: thread '${threadId}' has no question 'q9'\n`);

    const answered = await cli('answer', threadId, 'q1', ANSWER);
    assert.equal(answered.code, 0, describeRun(answered));
    assert.equal(answered.stdout, 'q1 answered.\n');
    assert.equal((await run.finished()).code, 0);

    const again = await cli('answer', threadId, 'q1', 'again');
    assert.equal(again.code, 1, describeRun(again));
    assert.equal(again.stderr, "baton: question 'q1' is already answered\n");
  });

  test('conversation: transcript and send name a thread that does not exist', async () => {
    const transcript = await cli('transcript', 'nosuch');
    assert.equal(transcript.code, 1, describeRun(transcript));
    assert.equal(transcript.stdout, '');
    assert.equal(transcript.stderr, "baton: thread 'nosuch' does not exist\n");

    const sent = await cli('send', 'nosuch', 'hello');
    assert.equal(sent.code, 1, describeRun(sent));
    assert.equal(sent.stdout, '');
    assert.match(sent.stderr, /^baton: thread 'nosuch' does not exist/);
  });

  test('conversation: with TEMPORAL_ADDRESS, commands that read Postgres need DATABASE_URL', async () => {
    const without = await baton(['questions', 'nosuch'], childEnv({ TEMPORAL_ADDRESS: env.temporalAddress }));
    assert.equal(without.code, 1, describeRun(without));
    assert.match(without.stderr, /^baton: .*set DATABASE_URL/);

    const withDatabase = await baton(['questions', 'nosuch', '--json'], stackEnv());
    assert.equal(withDatabase.code, 1, describeRun(withDatabase));
    assert.match(withDatabase.stderr, /^baton: thread 'nosuch' does not exist/, 'it got as far as the database');
  });

  test('conversation: baton dev reloads an edited agent file and new turns use the new version', async () => {
    await rewriteAndWaitFor(
      path.join(agentsDir, `${NOTARY}.md`),
      notaryFile('Takes careful notes.', 'You take careful notes. (v2)'),
      `agents: reloaded (${LIBRARIAN}, ${NOTARY})`,
    );
    const result = await cli('run', NOTARY, 'Note this.', '--json');
    assert.equal(result.code, 0, describeRun(result));
    const { threadId, reply } = parseJson(result);
    assert.equal(reply, NOTARY_REPLY);
    const [prompt] = systemPrompts(String(threadId));
    assert.match(prompt ?? '', /You take careful notes\. \(v2\)/);
    assert.doesNotMatch(prompt ?? '', /\(v1\)/);
  });

  test('conversation: a turn waiting on a question keeps the version it started with across a reload', async () => {
    const threadId = uniqueThreadId('versions');
    const librarian = path.join(agentsDir, `${LIBRARIAN}.md`);
    const run = await runUntilAsked(LIBRARIAN, threadId, 'When is the reading room open?');
    await rewriteAndWaitFor(
      librarian,
      librarianFile('You answer from the notes, briefly. (v2)'),
      `agents: reloaded (${LIBRARIAN}, ${NOTARY})`,
    );
    assert.equal((await cli('answer', threadId, 'q1', ANSWER)).code, 0);
    assert.equal((await run.finished()).code, 0);
    assert.equal((await cli('send', threadId, 'And on Saturday?')).code, 0);

    const prompts = systemPrompts(threadId);
    assert.equal(prompts.length, 3, 'two model calls in turn 1, one in turn 2');
    assert.match(prompts[0] ?? '', /\(v1\)/);
    assert.match(prompts[1] ?? '', /\(v1\)/, 'the running turn keeps its version');
    assert.match(prompts[2] ?? '', /briefly\. \(v2\)/, 'the next turn uses the new one');
  });

  test('conversation: an invalid agent file is not reloaded, and runs keep the previous definitions', async () => {
    const notary = path.join(agentsDir, `${NOTARY}.md`);
    // The definition runs must keep, loaded here rather than left by an earlier test.
    await rewriteAndWaitFor(
      notary,
      notaryFile('Takes notes in ink.', 'You take notes in ink. (v3)'),
      `agents: reloaded (${LIBRARIAN}, ${NOTARY})`,
    );
    await rewriteAndWaitFor(notary, `---\nname: ${NOTARY}\n---\n\nNo description. (v4)\n`, 'agents: not reloaded:');
    assert.match(
      devStderr(),
      new RegExp(`agents: not reloaded: ${escapeRegExp(notary)}(:\\d+)?: missing required field 'description'`),
    );

    const result = await cli('run', NOTARY, 'Note this too.', '--json');
    assert.equal(result.code, 0, describeRun(result));
    const [prompt] = systemPrompts(String(parseJson(result).threadId));
    assert.match(prompt ?? '', /You take notes in ink\. \(v3\)/);
    assert.doesNotMatch(prompt ?? '', /\(v4\)/);
  });
});
