/**
 * The context policy: which of a thread's messages one model request carries. The transcript in Postgres always
 * keeps every message; only the request is trimmed, inside the model-call activity, so workflows never see it.
 */

/**
 * Request header carrying how many assistant messages a trimmed request left out. Endpoints ignore it; the scripted
 * model adds it to the replies it counts, so a script's steps go on as if the whole transcript had been sent.
 */
export const OMITTED_ASSISTANT_HEADER = 'x-baton-omitted-assistant-messages';

/** Limits on one model request (agent frontmatter `context`, else the world's `BATON_CONTEXT_*` variables). */
export interface ContextLimits {
  /** Transcript messages sent, the first human message included (the system prompt and the note are not counted). */
  maxMessages?: number | undefined;
  /** Estimated tokens of every message sent, system prompt and note included ({@link estimateTokens}). */
  maxTokens?: number | undefined;
}

/** What trimming needs of a chat message; the Chat Completions message params have this shape. */
export interface ContextMessage {
  role: string;
  tool_calls?: readonly { id: string }[] | undefined;
  tool_call_id?: string | undefined;
}

/** What {@link trimContext} sends, and what it left out. */
export interface TrimmedContext<M> {
  messages: M[];
  /** Transcript messages left out of the request (0: the request is the whole transcript). */
  omitted: number;
  /** Assistant messages among those left out. */
  omittedAssistant: number;
  /** What is sent is still over a limit, because the newest messages are always sent. */
  overLimit: boolean;
}

/**
 * Estimated tokens of a text: its length in UTF-16 code units divided by 4, rounded up. About right for English
 * prose; code, JSON and non-Latin scripts take more tokens per character, so leave headroom below the model's
 * window. The scripted model reports usage with the same estimate.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Estimated tokens of one message as sent: its JSON (content, role, tool calls and ids). */
export function estimateMessageTokens(message: unknown): number {
  return estimateTokens(JSON.stringify(message));
}

const plural = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? '' : 's'}`;

/** The one line put where messages were left out. */
export function contextNote(omitted: number, limits: ContextLimits, overLimit: boolean): string {
  const set = [
    ...(limits.maxMessages === undefined ? [] : [`at most ${plural(limits.maxMessages, 'message')}`]),
    ...(limits.maxTokens === undefined ? [] : [`about ${plural(limits.maxTokens, 'token')}`]),
  ].join(', ');
  const earlier = omitted === 1 ? '1 earlier message was' : `${omitted} earlier messages were`;
  const tail = overLimit
    ? 'the newest message is always sent, so this request is still over the limit'
    : 'the full transcript is kept';
  return `[Baton] ${earlier} left out here to fit this agent's context limit (${set}); ${tail}.`;
}

/**
 * Keeps the leading system messages, the first human (`user`) message and the newest messages that fit `limits`,
 * and puts a one-line note (made by `makeNote`) where the others were left out. A tool call (an assistant message
 * with `tool_calls`) and all of its results are kept or left out together. The newest message, with the tool call
 * it answers, is always kept, even alone over the limits; the note then says so. Without limits, or when
 * everything fits, `messages` come back unchanged.
 */
export function trimContext<M extends ContextMessage>(
  messages: readonly M[],
  limits: ContextLimits,
  makeNote: (text: string) => M,
): TrimmedContext<M> {
  return trim(messages, limits, makeNote, undefined) as TrimmedContext<M>;
}

/** The messages of a thread that were not read: they lie between its first human message and the newest ones. */
export interface UnreadMessages {
  /** How many. */
  count: number;
  /** Assistant messages among them. */
  assistants: number;
}

/**
 * {@link trimContext} of a thread read in part: `messages` are the leading system messages, the thread's first human
 * message and its newest messages, and `unread` the messages between those two that were not read (at least one).
 * Returns what `trimContext` would of the whole thread, or `undefined` when the part read cannot tell (the request
 * must reach further back than what was read, or `limits.maxMessages` is missing or larger than the newest messages
 * read): then read the whole thread. A part of at least `maxMessages` newest messages always tells, unless the
 * newest tool call and its results do not fit in it. A tool result whose call was not read counts its call as
 * unread, so no cut falls between the two.
 */
export function trimWindow<M extends ContextMessage>(
  messages: readonly M[],
  limits: ContextLimits,
  makeNote: (text: string) => M,
  unread: UnreadMessages,
): TrimmedContext<M> | undefined {
  return trim(messages, limits, makeNote, unread);
}

function trim<M extends ContextMessage>(
  messages: readonly M[],
  limits: ContextLimits,
  makeNote: (text: string) => M,
  unread: UnreadMessages | undefined,
): TrimmedContext<M> | undefined {
  const unchanged = (overLimit: boolean): TrimmedContext<M> => ({
    messages: [...messages],
    omitted: 0,
    omittedAssistant: 0,
    overLimit,
  });
  if (limits.maxMessages === undefined && limits.maxTokens === undefined) return unchanged(false);

  let head = 0;
  while (head < messages.length && messages[head]?.role === 'system') head++;
  const system = messages.slice(0, head);
  const body = messages.slice(head);
  if (body.length === 0) return unchanged(false);
  const first = body.findIndex((message) => message.role === 'user');
  // Read in part: the unread messages lie right after the first human message (body[0]), so every request leaves
  // them out; only a count limit no larger than the newest messages read keeps every fitting cut among those.
  if (
    unread !== undefined &&
    (first !== 0 || limits.maxMessages === undefined || limits.maxMessages > body.length - 1 || unread.count < 1)
  ) {
    return undefined;
  }
  const unreadCount = unread?.count ?? 0;
  const unreadAssistants = unread?.assistants ?? 0;
  const tokens = body.map(estimateMessageTokens);
  const systemTokens = system.reduce((sum, message) => sum + estimateMessageTokens(message), 0);

  // Suffix sums of tokens and prefix counts of assistant messages, so each candidate request is sized in O(1).
  const tokensFrom = new Array<number>(body.length + 1).fill(0);
  for (let i = body.length - 1; i >= 0; i--) tokensFrom[i] = (tokensFrom[i + 1] ?? 0) + (tokens[i] ?? 0);
  const assistantsBefore = [0];
  body.forEach((message, i) =>
    assistantsBefore.push((assistantsBefore[i] ?? 0) + (message.role === 'assistant' ? 1 : 0)),
  );

  /** The request that sends `body[c..]`, with the first human message pinned and the note when c > 0. */
  const requestAt = (c: number, overLimit: boolean) => {
    const pinned = first >= 0 && first < c;
    const omitted = c - (pinned ? 1 : 0) + unreadCount;
    const note = omitted > 0 ? makeNote(contextNote(omitted, limits, overLimit)) : undefined;
    const count = body.length - c + (pinned ? 1 : 0);
    const size =
      systemTokens +
      (pinned ? (tokens[first] ?? 0) : 0) +
      (note === undefined ? 0 : estimateMessageTokens(note)) +
      (tokensFrom[c] ?? 0);
    return {
      fits:
        (limits.maxMessages === undefined || count <= limits.maxMessages) &&
        (limits.maxTokens === undefined || size <= limits.maxTokens),
      build: (): TrimmedContext<M> => ({
        messages: [
          ...system,
          ...(pinned ? [body[first] as M] : []),
          ...(note === undefined ? [] : [note]),
          ...body.slice(c),
        ],
        omitted,
        omittedAssistant: (assistantsBefore[c] ?? 0) + unreadAssistants,
        overLimit,
      }),
    };
  };

  if (unread === undefined && requestAt(0, false).fits) return unchanged(false);
  // A cut at c never falls on a tool result, nor between a tool call and any of its results. The newest cut is
  // always taken; older ones (each reaching further back) while the request still fits.
  const [newest, ...older] = cutPoints(body, unread !== undefined)
    .filter((c) => c > 0)
    .reverse();
  // Read in part, no cut among the messages read: the newest tool call began among the unread ones.
  if (newest === undefined) return unread === undefined ? unchanged(true) : undefined;
  if (!requestAt(newest, false).fits) return requestAt(newest, true).build();
  let chosen = newest;
  for (const c of older) {
    if (!requestAt(c, false).fits) break;
    chosen = c;
  }
  return requestAt(chosen, false).build();
}

/**
 * Indexes c (0 ≤ c < length) where `body[c..]` can start without separating a tool call from its results. With
 * `unreadAfterFirst`, messages were left unread after body[0], and a result whose call is not in `body` has its call
 * among them.
 */
function cutPoints(body: readonly ContextMessage[], unreadAfterFirst: boolean): number[] {
  const callAt = new Map<string, number>();
  // blocked[c]: a cut at c would send a result (at c or later) without the call made before c.
  const blocked = new Array<boolean>(body.length).fill(false);
  body.forEach((message, index) => {
    for (const call of message.tool_calls ?? []) callAt.set(call.id, index);
    if (message.role !== 'tool') return;
    // A result whose call is unknown still belongs to the message before it (or, read in part, to the unread ones).
    const known = message.tool_call_id === undefined ? undefined : callAt.get(message.tool_call_id);
    const callIndex = known ?? (unreadAfterFirst ? 0 : undefined);
    for (let c = (callIndex ?? index - 1) + 1; c <= index; c++) blocked[c] = true;
  });
  return body.flatMap((_, c) => (blocked[c] ? [] : [c]));
}
