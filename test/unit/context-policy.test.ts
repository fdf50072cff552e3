/**
 * The context policy's trimming (common/context-policy.ts): what one model request carries of a thread.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  contextNote,
  estimateMessageTokens,
  estimateTokens,
  trimContext,
  trimWindow,
  type ContextLimits,
  type ContextMessage,
} from '../../common/context-policy';

interface Message extends ContextMessage {
  content: string | null;
}

const system = (content: string): Message => ({ role: 'system', content });
const user = (content: string): Message => ({ role: 'user', content });
const say = (content: string): Message => ({ role: 'assistant', content });
const call = (...ids: string[]): Message => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({ id })),
});
const result = (id: string): Message => ({ role: 'tool', content: `result ${id}`, tool_call_id: id });
const note = (text: string): Message => ({ role: 'system', content: text });

/** A message as a short label, so expectations read as the request's shape. */
function label(message: Message): string {
  if (message.role === 'system') return message.content?.startsWith('[Baton]') ? 'NOTE' : `system:${message.content}`;
  if (message.role === 'tool') return `result:${message.tool_call_id}`;
  if (message.tool_calls) return `call:${message.tool_calls.map((c) => c.id).join(',')}`;
  return `${message.role}:${message.content}`;
}

const conversation = [system('S'), user('u1'), say('a1'), user('u2'), say('a2'), user('u3')];
const withTools = [
  system('S'),
  user('u1'),
  call('x'),
  result('x'),
  say('a1'),
  user('u2'),
  call('y', 'z'),
  result('y'),
  result('z'),
];

const cases: {
  name: string;
  messages: Message[];
  limits: ContextLimits;
  sent: string[];
  omitted: number;
  omittedAssistant: number;
  overLimit: boolean;
}[] = [
  {
    name: 'no limits: unchanged',
    messages: withTools,
    limits: {},
    sent: withTools.map(label),
    omitted: 0,
    omittedAssistant: 0,
    overLimit: false,
  },
  {
    name: 'everything fits: unchanged, no note',
    messages: conversation,
    limits: { maxMessages: 5, maxTokens: 10_000 },
    sent: conversation.map(label),
    omitted: 0,
    omittedAssistant: 0,
    overLimit: false,
  },
  {
    name: 'max_messages: the system prompt, the first human message, a note, the newest',
    messages: conversation,
    limits: { maxMessages: 3 },
    sent: ['system:S', 'user:u1', 'NOTE', 'assistant:a2', 'user:u3'],
    omitted: 2,
    omittedAssistant: 1,
    overLimit: false,
  },
  {
    name: 'a tool call is kept with all of its results',
    messages: withTools,
    limits: { maxMessages: 4 },
    sent: ['system:S', 'user:u1', 'NOTE', 'call:y,z', 'result:y', 'result:z'],
    omitted: 4,
    omittedAssistant: 2,
    overLimit: false,
  },
  {
    name: 'a limit that falls inside a tool-call group leaves the whole group out',
    messages: withTools,
    limits: { maxMessages: 7 },
    sent: ['system:S', 'user:u1', 'NOTE', 'assistant:a1', 'user:u2', 'call:y,z', 'result:y', 'result:z'],
    omitted: 2,
    omittedAssistant: 1,
    overLimit: false,
  },
  {
    name: 'the newest message is a result: its call comes with it even over max_messages, and the note says so',
    messages: withTools,
    limits: { maxMessages: 1 },
    sent: ['system:S', 'user:u1', 'NOTE', 'call:y,z', 'result:y', 'result:z'],
    omitted: 4,
    omittedAssistant: 2,
    overLimit: true,
  },
  {
    name: 'results separated from their call by another message are never cut from it',
    messages: [system('S'), user('u1'), say('a0'), call('x', 'y'), result('x'), user('u2'), result('y'), say('a1')],
    limits: { maxMessages: 4 },
    sent: ['system:S', 'user:u1', 'NOTE', 'assistant:a1'],
    omitted: 5,
    omittedAssistant: 2,
    overLimit: false,
  },
  {
    name: 'max_tokens 1: the newest message alone is over the limit and still sent',
    messages: conversation,
    limits: { maxTokens: 1 },
    sent: ['system:S', 'user:u1', 'NOTE', 'user:u3'],
    omitted: 3,
    omittedAssistant: 2,
    overLimit: true,
  },
  {
    name: 'only the first human message: nothing to leave out, sent whole although over the limit',
    messages: [system('S'), user('u1')],
    limits: { maxTokens: 1, maxMessages: 1 },
    sent: ['system:S', 'user:u1'],
    omitted: 0,
    omittedAssistant: 0,
    overLimit: true,
  },
  {
    name: 'every leading system message is kept',
    messages: [system('S1'), system('S2'), user('u1'), say('a1'), user('u2')],
    limits: { maxMessages: 2 },
    sent: ['system:S1', 'system:S2', 'user:u1', 'NOTE', 'user:u2'],
    omitted: 1,
    omittedAssistant: 1,
    overLimit: false,
  },
];

for (const c of cases) {
  test(`context policy: ${c.name}`, () => {
    const trimmed = trimContext(c.messages, c.limits, note);
    assert.deepEqual(trimmed.messages.map(label), c.sent);
    assert.deepEqual(
      { omitted: trimmed.omitted, omittedAssistant: trimmed.omittedAssistant, overLimit: trimmed.overLimit },
      { omitted: c.omitted, omittedAssistant: c.omittedAssistant, overLimit: c.overLimit },
    );
    const notes = trimmed.messages.filter((m) => label(m) === 'NOTE');
    assert.equal(notes.length, c.omitted > 0 ? 1 : 0);
    for (const n of notes) {
      assert.equal(n.content, contextNote(c.omitted, c.limits, c.overLimit));
      assert.ok(!n.content?.includes('\n'), 'the note is one line');
    }
    // No tool result is sent without the call it answers.
    const calls = new Set(trimmed.messages.flatMap((m) => (m.tool_calls ?? []).map((t) => t.id)));
    for (const m of trimmed.messages) if (m.role === 'tool') assert.ok(calls.has(m.tool_call_id ?? ''), label(m));
    // Nothing is reordered: the kept transcript messages keep their order.
    const kept = trimmed.messages.filter((m) => label(m) !== 'NOTE');
    assert.deepEqual(
      kept.map((m) => c.messages.indexOf(m)),
      kept.map((m) => c.messages.indexOf(m)).sort((x, y) => x - y),
    );
  });
}

test('context policy: max_tokens keeps exactly the newest messages whose estimate fits', () => {
  const messages = [system('S'), user('u1'), say('a'.repeat(400)), user('u2'), say('a3'), user('u3')];
  // The limit at which the newest three fit exactly, sized with the real note (whose text names the limit).
  const fitThree = (limit: number) =>
    [system('S'), user('u1'), note(contextNote(1, { maxTokens: limit }, false)), user('u2'), say('a3'), user('u3')]
      .map(estimateMessageTokens)
      .reduce((a, b) => a + b, 0);
  let limit = 100;
  while (fitThree(limit) !== limit) limit = fitThree(limit);
  const exact = trimContext(messages, { maxTokens: limit }, note);
  assert.deepEqual(exact.messages.map(label), ['system:S', 'user:u1', 'NOTE', 'user:u2', 'assistant:a3', 'user:u3']);
  assert.equal(exact.overLimit, false);
  const total = exact.messages.map(estimateMessageTokens).reduce((a, b) => a + b, 0);
  assert.equal(total, limit, 'what is sent is exactly at the limit');

  const tighter = trimContext(messages, { maxTokens: limit - 1 }, note);
  assert.deepEqual(tighter.messages.map(label), ['system:S', 'user:u1', 'NOTE', 'assistant:a3', 'user:u3']);
  assert.ok(tighter.messages.map(estimateMessageTokens).reduce((a, b) => a + b, 0) <= limit - 1);
});

test('context policy: tokens are estimated as characters / 4, rounded up, of the message as sent', () => {
  assert.equal(estimateTokens(''), 0);
  assert.equal(estimateTokens('abcd'), 1);
  assert.equal(estimateTokens('abcde'), 2);
  assert.equal(estimateMessageTokens(user('hi')), Math.ceil('{"role":"user","content":"hi"}'.length / 4));
});

test('context policy: the note names the count and the limits set, in one line', () => {
  assert.equal(
    contextNote(12, { maxMessages: 20, maxTokens: 4000 }, false),
    "[Baton] 12 earlier messages were left out here to fit this agent's context limit (at most 20 messages, about 4000 tokens); the full transcript is kept.",
  );
  assert.equal(
    contextNote(1, { maxTokens: 50 }, true),
    "[Baton] 1 earlier message was left out here to fit this agent's context limit (about 50 tokens); the newest message is always sent, so this request is still over the limit.",
  );
});

/** A thread as a model call reads it: human messages, replies, and tool calls with all their results after them. */
function randomThread(random: () => number, length: number): Message[] {
  const thread: Message[] = [user('u0')];
  let n = 0;
  while (thread.length < length) {
    const pick = random();
    n += 1;
    if (pick < 0.2) thread.push(user(`u${n}`));
    else if (pick < 0.4) thread.push(say(`a${n}`.repeat(1 + Math.floor(random() * 30))));
    else {
      const ids = Array.from({ length: 1 + Math.floor(random() * (random() < 0.1 ? 12 : 3)) }, (_, i) => `c${n}.${i}`);
      thread.push(call(...ids), ...ids.map(result));
    }
  }
  return thread;
}

/** A small deterministic generator (mulberry32), so a failure names a seed that reproduces it. */
function seeded(seed: number): () => number {
  let t = seed;
  return () => {
    t = (t + 0x6d2b79f5) | 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

test('context policy: a thread read in part (first human message, newest N) trims as the whole thread does', () => {
  let answered = 0;
  let declined = 0;
  for (let seed = 1; seed <= 400; seed++) {
    const random = seeded(seed);
    const thread = randomThread(random, 5 + Math.floor(random() * 60));
    const maxMessages = 1 + Math.floor(random() * 20);
    const limits: ContextLimits = {
      maxMessages,
      ...(random() < 0.5 ? { maxTokens: 40 + Math.floor(random() * 400) } : {}),
    };
    // The window a model call reads: at least the limit, sometimes more (a limit remembered from before).
    const window = maxMessages + (random() < 0.5 ? 0 : Math.floor(random() * 5));
    if (thread.length - 1 <= window) continue;
    const newest = thread.slice(-window);
    const unreadPart = thread.slice(1, thread.length - window);
    const unread = { count: unreadPart.length, assistants: unreadPart.filter((m) => m.role === 'assistant').length };
    const whole = trimContext([system('S'), ...thread], limits, note);
    const part = trimWindow([system('S'), thread[0] as Message, ...newest], limits, note, unread);
    if (part === undefined) {
      declined += 1;
      // It declines only when the whole request reaches back past what was read.
      const sent = whole.messages.filter((m) => m.role !== 'system');
      assert.ok(
        sent.some((m) => m !== thread[0] && !newest.includes(m)),
        `seed ${seed}: declined, though the whole thread's request lies in what was read`,
      );
      continue;
    }
    answered += 1;
    assert.deepEqual(part, whole, `seed ${seed}`);
  }
  assert.ok(answered > 200 && declined > 0, `answered ${answered}, declined ${declined}: both paths were exercised`);
});

test('context policy: a part read with a window smaller than the message limit, or without one, is refused', () => {
  const thread = [user('u0'), say('a1'), user('u2'), say('a3'), user('u4')];
  const unread = { count: 2, assistants: 1 };
  const part = [system('S'), user('u0'), say('a3'), user('u4')];
  assert.equal(trimWindow(part, { maxMessages: 3 }, note, unread), undefined);
  assert.equal(trimWindow(part, { maxTokens: 1000 }, note, unread), undefined);
  assert.deepEqual(
    trimWindow(part, { maxMessages: 2 }, note, unread),
    trimContext([system('S'), ...thread], { maxMessages: 2 }, note),
  );
});
