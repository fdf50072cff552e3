/**
 * The explorer's HTTP server (Node's `http`, no framework): server-rendered pages, the same data as JSON under
 * `/api/`, live env-data changes as Server-Sent Events fed by the client SDK's `watchEnv` (Postgres LISTEN), and a
 * root's run feed (every durable step of its tree, and streamed model text) as Server-Sent Events fed by
 * `thread.events()`.
 * It reads through the SDK and `db/explorer.ts`; the only things it changes are answering a question and deciding
 * an approval, through the same SDK calls `baton answer`, `baton approve` and `baton reject` make. Every request
 * carries its secret token (access.ts), or gets 401.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { accessTokenProblem, AccessTokenError, generateAccessToken, requestHasToken, tokenMatches } from './access';
import { BatonClientError, type BatonClient, type EnvWatch, type RunEvent } from '../client';
import { THREAD_ID_PATTERN } from '../common/ids';
import { envKeyProblem } from '../common/env-data';
import { MAX_APPROVAL_REASON_CHARS, type DecideApprovalResult } from '../common/types';
import type { ApprovalRow } from '../db/approvals';
import type { ThreadRow } from '../db/threads';
import { explorerApiRoutesAt, type ExplorerApiRoute } from './api-routes';
import { EXPLORER_CSS, EXPLORER_JS } from './assets';
import { crossSiteRequest, loopbackHostHeaders } from './http-guards';
import { ExplorerData } from './data';
import { comparisonPage, experimentListPage, experimentPage } from './experiment-pages';
import { compareExperiments, summarize } from '../evals';
import type { Html } from './html';
import {
  envPage,
  errorPage,
  outcomeText,
  overviewPage,
  overviewSignature,
  rootListPage,
  threadPath,
  traceUrlProblem,
  transcriptPage,
  EXPLORER_CHANNEL,
  MAX_EXPLORER_NAME_CHARS,
  type DecisionOrigin,
  type PageContext,
} from './pages';

/** The explorer's port unless told otherwise (the Temporal Web UI's is 8233). */
export const DEFAULT_EXPLORER_PORT = 8234;
/** Loopback: reachable from this machine only unless told otherwise (every request needs the token even so). */
export const DEFAULT_EXPLORER_HOST = '127.0.0.1';
/** How long a live stream's reader may take nothing that was sent before it is disconnected. */
export const DEFAULT_STREAM_STALL_MS = 30_000;

export interface ExplorerOptions {
  /** A connected client with a database URL; the caller owns it and closes it after the explorer. */
  client: BatonClient;
  /** @default DEFAULT_EXPLORER_HOST */
  host?: string;
  /** 0 picks a free port. @default DEFAULT_EXPLORER_PORT */
  port?: number;
  /** Take a free port when `port` is taken instead of failing. @default false */
  portFallback?: boolean;
  /** The Temporal Web UI, for links to each workflow. */
  uiUrl?: string | undefined;
  /**
   * A trace UI's search for one root's traces, with `{rootThreadId}` where the id goes (`BATON_TRACE_URL`), for a
   * link on each thread's page; checked at start.
   */
  traceUrl?: string | undefined;
  /** @default 'default' */
  namespace?: string;
  /**
   * Live streams (env changes and run feeds) served at once; more are refused with 503 (each holds a database
   * connection). @default 32
   */
  maxStreams?: number;
  /**
   * The secret every request carries: `Authorization: Bearer <token>`, or the cookie a browser gets by opening any
   * page with `?token=<token>` (see explorer/access.ts). At least `MIN_ACCESS_TOKEN_CHARS` characters.
   * @default a fresh random token, read back from `ExplorerServer.token`
   * @throws AccessTokenError (from `startExplorer`) for a token too short or with characters a header cannot carry
   */
  token?: string;
  /**
   * A live stream whose reader takes none of what was sent for this long (the server's send buffer stays full) is
   * disconnected, instead of buffering without bound; a browser reconnects and resumes after the last event it got.
   * @default DEFAULT_STREAM_STALL_MS
   */
  streamStallMs?: number;
}

export interface ExplorerServer {
  /** `http://host:port`. */
  readonly url: string;
  /** The token every request must carry. */
  readonly token: string;
  /**
   * The address a person opens: `path` (default `/`) with `?token=<token>`. The explorer answers it with the cookie
   * and a redirect to the same address without the token.
   */
  link(path?: string): string;
  /** Ends the live streams and stops listening. */
  close(): Promise<void>;
}

/** A request the explorer refuses, with its HTTP status. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** How a refused request learns what to send: a program the header, a person the address with the token. */
const NEEDS_TOKEN =
  "this explorer needs its token: open the address with '?token=…' that started it printed (a local stack's token " +
  "is in its state directory's 'token' file), or send 'Authorization: Bearer <token>'";
const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer realm="Baton explorer"' } as const;

/** Most thread-id segments: `root/agent-n` today, a little room for deeper ids. */
const MAX_THREAD_ID_PARTS = 4;
const QUESTION_ID_PATTERN = /^q[0-9]{1,9}$/;
const APPROVAL_ID_PATTERN = /^a[0-9]{1,9}$/;
/** Who decided, for the record, when the person left the name field empty. */
const EXPLORER_DECIDER = 'a person in the explorer';
const SEQ_PATTERN = /^[0-9]{1,15}$/;
/** A run event's id: its feed number, and `.n` for the n-th further event of the same write. */
const EVENT_ID_PATTERN = /^([0-9]{1,15})(?:\.([0-9]{1,6}))?$/;
const MAX_BODY_BYTES = 64 * 1024;
const MAX_SEARCH_CHARS = 200;
const HEARTBEAT_MS = 15_000;
const EVENTS_SHOWN = 10_000;

/** Whether `id` is a thread id a URL may name: segments of `THREAD_ID_PATTERN` joined by `/`. */
export function validThreadId(id: string): boolean {
  const parts = id.split('/');
  return parts.length <= MAX_THREAD_ID_PARTS && parts.every((part) => THREAD_ID_PATTERN.test(part));
}

function parseSeqParam(value: string | null, name: string): number | undefined {
  if (value === null || value === '') return undefined;
  if (!SEQ_PATTERN.test(value)) throw new HttpError(400, `${name} must be a sequence number (0, 1, 2, …)`);
  return Number(value);
}

/** Where a run feed stream starts: after feed number `since`, leaving out the first parts of write `skip.seq`. */
export interface FeedResume {
  since: number;
  /** The events of write `seq` up to part `part` (0 is the event whose id is `seq`) were delivered already. */
  skip?: { seq: number; part: number };
}

/**
 * Where a run feed stream resumes after the event `id` (`Last-Event-ID`): the write `seq` is read again and its
 * parts up to `n` left out, so a reconnecting page gets exactly the rest, even when its connection dropped between
 * two events of one write (they are written together, so that is rare, but it costs one row to be exact).
 */
export function resumeAfterEventId(id: string): FeedResume {
  const match = EVENT_ID_PATTERN.exec(id);
  if (!match) throw new HttpError(400, `Last-Event-ID must be an event id (12, or 12.1 for a further event of 12)`);
  const seq = Number(match[1]);
  const part = Number(match[2] ?? 0);
  return seq === 0 ? { since: 0 } : { since: seq - 1, skip: { seq, part } };
}

/** The part number of a stored event: 0 for id `12`, n for `12.n`. */
function eventPart(id: string): number {
  const dot = id.indexOf('.');
  return dot < 0 ? 0 : Number(id.slice(dot + 1));
}

/** One Server-Sent Event: stored events carry their id (resumable); streamed output does not. */
export function runEventFrame(event: RunEvent): string {
  const id = 'id' in event ? `id: ${event.id}\n` : '';
  return `${id}data: ${JSON.stringify(event)}\n\n`;
}

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  // 'no-referrer' would make Chromium send `Origin: null` with our own forms, which the same-origin check refuses.
  'referrer-policy': 'same-origin',
} as const;

/** Starts the explorer; resolves once it listens. */
export async function startExplorer(options: ExplorerOptions): Promise<ExplorerServer> {
  const host = options.host ?? DEFAULT_EXPLORER_HOST;
  const data = new ExplorerData(options.client);
  const namespace = options.namespace ?? 'default';
  const maxStreams = options.maxStreams ?? 32;
  const stallMs = options.streamStallMs ?? DEFAULT_STREAM_STALL_MS;
  const token = options.token ?? generateAccessToken();
  const tokenProblem = accessTokenProblem(token);
  if (tokenProblem) throw new AccessTokenError(`the explorer's token ${tokenProblem}`);
  const traceProblem = options.traceUrl === undefined ? undefined : traceUrlProblem(options.traceUrl);
  if (traceProblem) throw new Error(traceProblem);
  // Streams being opened count too: a slot is taken before the first await, so concurrent requests cannot overfill.
  const streams = new Set<{ stop: () => Promise<void> }>();
  // Named by port: cookies do not tell ports apart, and two explorers of two stacks may run on one machine.
  let cookieName = 'baton-explorer';
  // On loopback, its own names, set once it listens (they carry the port); elsewhere any name is served.
  let allowedHosts: ReadonlySet<string> | undefined = undefined;

  const context = (feedSince?: number): PageContext => ({
    uiUrl: options.uiUrl,
    traceUrl: options.traceUrl,
    namespace,
    now: new Date(),
    feedSince,
  });

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      if (res.headersSent) {
        res.end();
        return;
      }
      const api = (req.url ?? '').startsWith('/api/');
      const headers = error instanceof HttpError ? error.headers : {};
      if (api) sendJson(res, status, { error: message }, headers);
      else sendHtml(res, status, errorPage(errorTitle(status), message), headers);
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // A page on another site could reach a loopback server through DNS rebinding; only our own names are served.
    if (allowedHosts && !allowedHosts.has((req.headers.host ?? '').toLowerCase())) {
      throw new HttpError(421, `this explorer answers to ${[...allowedHosts].join(', ')} only`);
    }
    const url = new URL(req.url ?? '/', 'http://explorer.invalid');
    let parts: string[];
    try {
      parts = url.pathname.split('/').slice(1).map(decodeURIComponent);
    } catch {
      throw new HttpError(400, 'the address is not valid URL encoding');
    }
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') throw new HttpError(405, `${method} is not served`);
    const api = parts[0] === 'api';
    // A page of another site may link to a page here (it gets no cookie: SameSite=Strict), never read the API or a
    // stream, nor post.
    if (method === 'POST' || api) checkSameOrigin(req, method);
    const offered = url.searchParams.get('token');
    if (!api && offered !== null && method !== 'POST') {
      if (!tokenMatches(token, offered)) throw new HttpError(401, "that is not this explorer's token");
      // The cookie for the token, and the same address without it: it stays out of the address bar and history.
      url.searchParams.delete('token');
      res.writeHead(302, {
        location: `${url.pathname}${url.search}`,
        'set-cookie': `${cookieName}=${token}; HttpOnly; SameSite=Strict; Path=/`,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      });
      res.end();
      return;
    }
    if (!requestHasToken(req, token, cookieName)) throw new HttpError(401, NEEDS_TOKEN, BEARER_CHALLENGE);
    const route = api ? parts.slice(1) : parts;
    if (api) checkApiRoute(route, method, url.pathname);

    if (!api && route.length === 2 && route[0] === 'assets') {
      if (route[1] === 'explorer.css') return sendAsset(res, 'text/css; charset=utf-8', EXPLORER_CSS);
      if (route[1] === 'explorer.js') return sendAsset(res, 'text/javascript; charset=utf-8', EXPLORER_JS);
      throw new HttpError(404, 'no such asset');
    }
    if (!api && route.length === 1 && route[0] === '') {
      const search = searchParam(url);
      return sendHtml(res, 200, rootListPage(await data.rootThreads(search), search ?? ''));
    }
    if (!api && route.length === 1 && route[0] === 'favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (!api && route[0] === 'experiments')
      return sendHtml(res, 200, await experimentsRoute(data, route.slice(1), url));
    if (route[0] !== 'threads') throw new HttpError(404, `nothing at ${url.pathname}`);
    if (api && route.length === 1) return sendJson(res, 200, await data.rootThreads(searchParam(url)));

    const threadId = route[1] ?? '';
    if (!validThreadId(threadId)) {
      throw new HttpError(
        400,
        `'${threadId}' is not a thread id (letters, digits, '_', '-', '.', and '/' between parts)`,
      );
    }
    const thread = await data.thread(threadId);
    if (!thread) throw new HttpError(404, `thread '${threadId}' does not exist`);
    const rest = route.slice(2);
    const isRoot = thread.rootThreadId === thread.threadId;
    const view = rest[0] ?? '';

    if (view === '' && rest.length <= 1) {
      if (!isRoot) {
        if (api) return sendJson(res, 200, thread);
        return redirect(res, threadPath(threadId, '/transcript'));
      }
      // The feed's position is read before the page's data, so the page's stream misses nothing committed after.
      const feedSince = api ? undefined : await data.lastEventSeq(threadId);
      const overview = await data.overview(thread);
      if (api) return sendJson(res, 200, { ...overview, signature: overviewSignature(overview) });
      return sendHtml(res, 200, overviewPage(overview, context(feedSince)));
    }
    if (view === 'transcript' && rest.length === 1) {
      const feedSince = api ? undefined : await data.lastEventSeq(thread.rootThreadId);
      const messages = await data.transcript(threadId);
      if (api) return sendJson(res, 200, messages);
      const [approvals, wakeup] = await Promise.all([
        data.threadApprovals(thread),
        thread.parentThreadId === null || thread.caller !== null ? undefined : data.wakeupOf(threadId),
      ]);
      return sendHtml(res, 200, transcriptPage(thread, messages, approvals, context(feedSince), wakeup));
    }
    if (view === 'questions') {
      requireRoot(thread);
      if (rest.length === 1) {
        if (!api) return redirect(res, threadPath(threadId));
        return sendJson(res, 200, await data.questions(threadId));
      }
      const questionId = rest[1] ?? '';
      if (rest.length === 3 && rest[2] === 'answer') {
        if (!QUESTION_ID_PATTERN.test(questionId))
          throw new HttpError(400, `'${questionId}' is not a question id (q1, q2, …)`);
        if (method !== 'POST') throw new HttpError(405, 'send the answer with POST');
        const answer = await readAnswer(req);
        const result = await answerQuestion(threadId, questionId, answer);
        if (api) return sendJson(res, 200, result);
        return redirect(res, threadPath(threadId), 303);
      }
      throw new HttpError(404, `nothing at ${url.pathname}`);
    }
    if (view === 'approvals') {
      requireRoot(thread);
      if (rest.length === 1) {
        if (!api) return redirect(res, threadPath(threadId, '#approvals'));
        return sendJson(res, 200, await data.approvals(threadId, allParam(url)));
      }
      const approvalId = rest[1] ?? '';
      if (!APPROVAL_ID_PATTERN.test(approvalId)) {
        throw new HttpError(400, `'${approvalId}' is not an approval id (a1, a2, …)`);
      }
      if (rest.length === 2 && api) {
        const approval = await data.approval(threadId, approvalId);
        if (!approval) throw new HttpError(404, noApproval(threadId, approvalId));
        return sendJson(res, 200, approval);
      }
      const decision = rest[2];
      if (rest.length === 3 && (decision === 'approve' || decision === 'reject')) {
        if (method !== 'POST') throw new HttpError(405, `send the decision with POST`);
        const fields = decisionFields(await readFields(req, 'the decision', '{"by": "…", "reason": "…"}'));
        const { approval, result } = await decide(threadId, approvalId, decision, fields);
        if (api) return sendJson(res, 200, result);
        const back =
          fields.from === 'transcript'
            ? threadPath(approval.threadId, `/transcript#m${approval.messageSeq}`)
            : threadPath(threadId, '#approvals');
        return redirect(res, back, 303);
      }
      throw new HttpError(404, `nothing at ${url.pathname}`);
    }
    if (view === 'watchers' && rest.length === 1) {
      requireRoot(thread);
      if (!api) return redirect(res, threadPath(threadId, '#watchers'));
      return sendJson(res, 200, await data.watchers(threadId));
    }
    if (view === 'env') {
      if (!isRoot) {
        if (api) requireRoot(thread);
        return redirect(res, threadPath(thread.rootThreadId, '/env'));
      }
      const sub = rest[1] ?? '';
      if (rest.length === 1) {
        const asOf = parseSeqParam(url.searchParams.get('asOf'), 'asOf');
        const [entries, log, proposals] = await Promise.all([
          data.envEntries(threadId, asOf),
          data.envLog(threadId, { limit: EVENTS_SHOWN }),
          data.proposals(threadId),
        ]);
        const lastSeq = log.at(-1)?.seq ?? 0;
        if (api) return sendJson(res, 200, { rootThreadId: threadId, asOf: asOf ?? null, lastSeq, entries });
        return sendHtml(res, 200, envPage({ thread, entries, log, proposals, lastSeq, asOf }, context()));
      }
      if (!api || rest.length !== 2) throw new HttpError(404, `nothing at ${url.pathname}`);
      if (sub === 'value') {
        const key = url.searchParams.get('key') ?? '';
        const problem = envKeyProblem(key);
        if (problem) throw new HttpError(400, problem);
        const entry = await data.envEntry(threadId, key);
        if (!entry) throw new HttpError(404, `no entry '${key}' in the root scope of '${threadId}'`);
        return sendJson(res, 200, entry);
      }
      if (sub === 'events') {
        const since = parseSeqParam(url.searchParams.get('since'), 'since') ?? 0;
        const limit = Math.min(parseSeqParam(url.searchParams.get('limit'), 'limit') ?? 1000, EVENTS_SHOWN);
        return sendJson(res, 200, await data.envLog(threadId, { since, limit }));
      }
      if (sub === 'proposals') return sendJson(res, 200, await data.proposals(threadId));
      if (sub === 'stream') return stream(req, res, threadId, url);
    }
    if (view === 'events' && rest.length === 1 && api) {
      requireRoot(thread);
      return runFeed(req, res, threadId, url);
    }
    throw new HttpError(404, `nothing at ${url.pathname}`);
  }

  /**
   * Approves or rejects through the SDK. An unknown approval is a 404; one already decided, expired or cancelled (by
   * now, or while this request ran: the CLI or another page got there first) is a 409 saying how it ended.
   */
  async function decide(
    rootThreadId: string,
    approvalId: string,
    decision: 'approve' | 'reject',
    fields: DecisionFields,
  ): Promise<{ approval: ApprovalRow; result: DecideApprovalResult }> {
    const approval = await data.approval(rootThreadId, approvalId);
    if (!approval) throw new HttpError(404, noApproval(rootThreadId, approvalId));
    if (approval.status !== 'pending') throw new HttpError(409, alreadyClosed(approval));
    const handle = options.client.thread(rootThreadId);
    try {
      const result =
        decision === 'approve'
          ? await handle.approve(approvalId, { by: fields.by })
          : await handle.reject(approvalId, {
              by: fields.by,
              ...(fields.reason === undefined ? {} : { reason: fields.reason }),
            });
      return { approval, result };
    } catch (error) {
      const now = await data.approval(rootThreadId, approvalId);
      if (now && now.status !== 'pending') throw new HttpError(409, alreadyClosed(now));
      if (error instanceof BatonClientError) throw new HttpError(409, error.message);
      throw error;
    }
  }

  async function answerQuestion(rootThreadId: string, questionId: string, answer: string) {
    try {
      return await options.client.thread(rootThreadId).answer(questionId, answer);
    } catch (error) {
      if (error instanceof BatonClientError) throw new HttpError(409, error.message);
      throw error;
    }
  }

  /**
   * Takes a place among the live streams, at once (before any await, so concurrent requests cannot all pass the
   * check), or refuses with 503. `stop()` gives it back, ends the feed (`stopFeed`) and the response, once.
   */
  function reserveStream(res: http.ServerResponse) {
    if (streams.size >= maxStreams) throw new HttpError(503, `already serving ${maxStreams} live streams`);
    let stopFeed: () => Promise<unknown> | undefined = () => undefined;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    const entry = {
      closed: false,
      /** A write is waiting for the reader to take what was sent. */
      blocked: false,
      stop: async () => {
        if (entry.closed) return;
        entry.closed = true;
        streams.delete(entry);
        clearInterval(heartbeat);
        await stopFeed();
        if (!res.writableEnded) res.end();
      },
      /** What ends the feed (and the heartbeat, once the response has started). */
      started(stop: () => Promise<unknown> | undefined, timer: ReturnType<typeof setInterval> | undefined) {
        stopFeed = stop;
        heartbeat = timer;
      },
    };
    streams.add(entry);
    return entry;
  }

  type StreamEntry = ReturnType<typeof reserveStream>;

  /**
   * Starts the Server-Sent Events response of a reserved stream: kept open by a comment every `HEARTBEAT_MS`, and
   * ended (with `stopFeed`) when the request closes or `stop()` is called. `send` respects backpressure: when the
   * socket's buffer is full it waits for the reader (so the feed is read no further meanwhile); a reader that takes
   * nothing for `stallMs` is disconnected, and a browser's EventSource reconnects with `Last-Event-ID`.
   */
  function openEventStream(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    entry: StreamEntry,
    stopFeed: () => Promise<unknown> | undefined,
  ) {
    const heartbeat = setInterval(() => {
      if (!entry.blocked && !entry.closed) res.write(': ping\n\n');
    }, HEARTBEAT_MS);
    entry.started(stopFeed, heartbeat);
    req.on('close', () => void entry.stop());
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    res.write('retry: 2000\n\n');
    const send = async (frame: string): Promise<void> => {
      if (entry.closed || res.write(frame)) return;
      entry.blocked = true;
      const drained = await drainedWithin(res, stallMs);
      entry.blocked = false;
      if (drained || entry.closed) return;
      // Everything it missed is stored and numbered: a reconnecting reader resumes after the last event it got.
      res.destroy();
      await entry.stop();
    };
    return send;
  }

  async function stream(req: http.IncomingMessage, res: http.ServerResponse, root: string, url: URL): Promise<void> {
    const lastEventId = req.headers['last-event-id'];
    const since =
      parseSeqParam(typeof lastEventId === 'string' ? lastEventId : null, 'Last-Event-ID') ??
      parseSeqParam(url.searchParams.get('since'), 'since') ??
      0;
    let watch: EnvWatch | undefined;
    const reserved = reserveStream(res);
    const send = openEventStream(req, res, reserved, () => watch?.stop());
    const closed = () => reserved.closed;
    try {
      watch = await options.client.thread(root).watchEnv(
        async (event) => {
          // The log row carries the scope and fork attribution; the entry is the key's root-scope state after it.
          const [logged, current] = await Promise.all([
            data.envLog(root, { since: event.seq - 1, limit: 1 }),
            data.envEntry(root, event.key),
          ]);
          if (closed()) return;
          const { value: _value, ...manifestEntry } = current ?? { value: undefined };
          const logEvent = logged[0] ?? { ...event, scope: '', actor: { ...event.actor, task: null } };
          // `entry` is the key's root-scope state after the event; a write in a fork task's own scope leaves it as is.
          const change = { event: logEvent, rootScope: logEvent.scope === '', entry: current ? manifestEntry : null };
          // The watch delivers its next event once this one is sent: a slow reader slows the reading, nothing piles up.
          await send(`id: ${event.seq}\nevent: env\ndata: ${JSON.stringify(change)}\n\n`);
        },
        { since },
      );
    } catch (error) {
      await reserved.stop();
      throw error;
    }
    if (closed()) await watch.stop();
    watch.done.catch(() => undefined).finally(() => void reserved.stop());
  }

  /**
   * A root's run feed as Server-Sent Events: each stored event with its id (`seq` or `seq.n`), resumable with
   * `Last-Event-ID` (or `?since=<seq>`); streamed text (`delta`) and `stream_abandoned` without an id, since they are
   * not stored. Every frame's data is the event's JSON, its `type` saying which.
   */
  async function runFeed(req: http.IncomingMessage, res: http.ServerResponse, root: string, url: URL) {
    const lastEventId = req.headers['last-event-id'];
    // A browser reconnecting sends the id of the last event it got, beside the `since` of the address it opened.
    const resume: FeedResume =
      typeof lastEventId === 'string' && lastEventId !== ''
        ? resumeAfterEventId(lastEventId)
        : { since: parseSeqParam(url.searchParams.get('since'), 'since') ?? 0 };
    const reserved = reserveStream(res);
    const events = options.client.thread(root).events({ since: resume.since });
    reserved.started(() => events.return(), undefined);
    try {
      // The page shows itself live once its stream opens, so the stream opens only once the feed listens: streamed
      // text is announced and never stored, and what was announced before the LISTEN took effect is lost to this
      // reader. A feed that cannot be read fails the loop below, which ends the stream.
      await events.catchUp().catch(() => undefined);
      if (req.socket.destroyed || reserved.closed) return;
      const send = openEventStream(req, res, reserved, () => events.return());
      for await (const event of events) {
        if (reserved.closed) break;
        const { skip } = resume;
        if (skip && 'id' in event && event.seq === skip.seq && eventPart(event.id) <= skip.part) continue;
        await send(runEventFrame(event));
      }
    } catch {
      // The feed could not be read on (its database connection stayed lost): the stream ends, and a browser opens
      // it again after `retry`, resuming after the last event it got.
    } finally {
      await reserved.stop();
    }
  }

  const port = options.port ?? DEFAULT_EXPLORER_PORT;
  await listen(server, port, host).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EADDRINUSE' || !options.portFallback || port === 0) throw error;
    await listen(server, 0, host);
  });
  const address = server.address() as AddressInfo;
  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  const url = `http://${hostForUrl}:${address.port}`;
  allowedHosts = loopbackHostHeaders(host, address.port);
  cookieName = `baton-explorer-${address.port}`;
  return {
    url,
    token,
    link(path = '/') {
      const target = new URL(path, url);
      target.searchParams.set('token', token);
      return target.href;
    },
    async close() {
      await Promise.all([...streams].map((s) => s.stop()));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function requireRoot(thread: ThreadRow): void {
  if (thread.rootThreadId !== thread.threadId) {
    throw new HttpError(
      400,
      `'${thread.threadId}' is a delegation thread; its questions, approvals and environment data are those of root thread '${thread.rootThreadId}'`,
    );
  }
}

function searchParam(url: URL): string | undefined {
  const q = (url.searchParams.get('q') ?? '').trim();
  if (q.length > MAX_SEARCH_CHARS) throw new HttpError(400, `the search is longer than ${MAX_SEARCH_CHARS} characters`);
  return q === '' ? undefined : q;
}

/**
 * Refuses a POST, an API read or a live stream another site's page made (a form, a fetch or an EventSource aimed at
 * this server from the user's browser).
 */
function checkSameOrigin(req: http.IncomingMessage, method: string): void {
  const crossSite = crossSiteRequest(req);
  const what = method === 'POST' ? 'post here' : "read this explorer's data";
  if (crossSite === 'origin') throw new HttpError(403, `a page from another site cannot ${what}`);
  if (crossSite === 'fetch-site') throw new HttpError(403, `a cross-site request cannot ${what}`);
}

/**
 * Resolves `true` once `res` has sent what it buffered, `false` when `ms` pass first or the response closes.
 */
function drainedWithin(res: http.ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (drained: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(drained);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

function errorTitle(status: number): string {
  if (status === 404) return 'Not found';
  if (status === 401) return 'This explorer needs its token';
  return `Error ${status}`;
}

/**
 * The fields of a posted form or JSON object (`what` names it in errors, `example` shows the JSON form). An empty
 * body has no fields.
 */
async function readFields(req: http.IncomingMessage, what: string, example: string): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `${what} is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks).toString('utf8');
  if (body.trim() === '') return {};
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
  if (type === 'application/x-www-form-urlencoded') return Object.fromEntries(new URLSearchParams(body));
  if (type !== 'application/json') throw new HttpError(415, `send ${what} as a form or as JSON ${example}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new HttpError(400, 'the body is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new HttpError(400, `the body must be a JSON object: ${example}`);
  }
  return parsed as Record<string, unknown>;
}

async function readAnswer(req: http.IncomingMessage): Promise<string> {
  const { answer } = await readFields(req, 'the answer', '{"answer": "…"}');
  if (typeof answer !== 'string' || answer.trim() === '') throw new HttpError(400, 'the answer must not be empty');
  return answer;
}

interface DecisionFields {
  by: string;
  reason?: string;
  from?: DecisionOrigin;
}

/** Optional text no longer than `max` characters; blank is none. */
function optionalText(fields: Record<string, unknown>, name: string, max: number): string | undefined {
  const value = fields[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new HttpError(400, `'${name}' must be text`);
  const text = value.trim();
  if (text.length > max) throw new HttpError(400, `'${name}' is longer than ${max} characters`);
  return text === '' ? undefined : text;
}

/** Who decided, for the record: the name given (a claim) and that it came through the explorer. */
function withChannel(name: string | undefined): string {
  return name === undefined ? EXPLORER_DECIDER : `${name}${EXPLORER_CHANNEL}`;
}

/** Who decides (blank: the explorer's default), the reason of a rejection, and the page the form came from. */
function decisionFields(fields: Record<string, unknown>): DecisionFields {
  const from = fields.from;
  if (from !== undefined && from !== 'tree' && from !== 'transcript') {
    throw new HttpError(400, `'from' must be 'tree' or 'transcript'`);
  }
  const reason = optionalText(fields, 'reason', MAX_APPROVAL_REASON_CHARS);
  return {
    by: withChannel(optionalText(fields, 'by', MAX_EXPLORER_NAME_CHARS)),
    ...(reason === undefined ? {} : { reason }),
    ...(from === undefined ? {} : { from }),
  };
}

function noApproval(rootThreadId: string, approvalId: string): string {
  return `thread '${rootThreadId}' has no approval '${approvalId}'`;
}

function alreadyClosed(approval: ApprovalRow): string {
  return `approval '${approval.approvalId}' is already ${outcomeText(approval)}`;
}

/**
 * Refuses an address under `/api/` that the route list (api-routes.ts) does not list (404), or a method its routes do
 * not take (405), before anything is read: the list is the API.
 */
function checkApiRoute(segments: readonly string[], method: string, pathname: string): void {
  const routes = explorerApiRoutesAt(segments);
  if (routes.length === 0) throw new HttpError(404, `nothing at ${pathname}`);
  const takes = (route: ExplorerApiRoute) => route.method === method || (route.method === 'GET' && method === 'HEAD');
  if (routes.some(takes)) return;
  const post = routes.find((route) => route.body !== undefined);
  throw new HttpError(405, post?.body ? `send ${post.body.what} with POST` : `${method} is not served at ${pathname}`);
}

/** `?all=1` (or `true`): decided, expired and cancelled approvals too. */
function allParam(url: URL): boolean {
  const value = url.searchParams.get('all');
  if (value === null || value === '' || value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return true;
  throw new HttpError(400, `all must be 1 or 0, not '${value}'`);
}

function sendHtml(res: http.ServerResponse, status: number, page: Html, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    ...headers,
    ...SECURITY_HEADERS,
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
  });
  res.end(page.text);
}

function sendJson(
  res: http.ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...headers,
    ...SECURITY_HEADERS,
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
  });
  res.end(`${JSON.stringify(value, null, 2)}\n`);
}

function sendAsset(res: http.ServerResponse, type: string, text: string): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': type, 'cache-control': 'no-cache' });
  res.end(text);
}

function redirect(res: http.ServerResponse, location: string, status = 302): void {
  res.writeHead(status, { location });
  res.end();
}

/**
 * The pages under `/experiments`: the list (`/experiments`), one experiment (`/experiments/<id>`), and two side by side
 * (`/experiments/compare?a=<id>&b=<id>`).
 * @throws HttpError 404 for an unknown experiment or path, 400 for a comparison without both ids
 */
async function experimentsRoute(data: ExplorerData, rest: readonly string[], url: URL): Promise<Html> {
  if (rest.length === 0 || (rest.length === 1 && rest[0] === '')) return experimentListPage(await data.experiments());
  const found = async (id: string) => {
    const experiment = await data.experiment(id);
    if (experiment === undefined) throw new HttpError(404, `no experiment '${id}'`);
    return experiment;
  };
  if (rest.length === 1 && rest[0] === 'compare') {
    const a = url.searchParams.get('a');
    const b = url.searchParams.get('b');
    if (!a || !b) throw new HttpError(400, 'a comparison needs two experiments: ?a=<id>&b=<id>');
    return comparisonPage(compareExperiments(await found(a), await found(b)));
  }
  if (rest.length === 1) {
    const { experiment, cases } = await found(rest[0] ?? '');
    return experimentPage(experiment, cases, summarize(cases));
  }
  throw new HttpError(404, `nothing at ${url.pathname}`);
}
