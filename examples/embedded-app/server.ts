/**
 * A web app with Baton inside: one page (page.html) where a visitor asks the museum's guide agent a question, and
 * this server, which starts a Baton thread for each question with the client SDK and streams the run to the page as
 * Server-Sent Events while it happens: the model's text as it is written, each tool call and its result, then the
 * reply. Baton runs the agent (here `baton dev`, found by `connect()`); the app only talks to it.
 *
 *   POST /ask  {"message": "…"}  →  text/event-stream: thread, text, text_dropped, tool_call, tool_result, then
 *                                   reply (or error)
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { connect, type BatonClient, type RunEvent } from 'baton';

const AGENT = 'guide';
/** Loopback only: whoever reaches this server can run the agent. */
const HOST = '127.0.0.1';
const PORT = Number(process.env.PORT ?? 3000);
const MAX_BODY_BYTES = 16 * 1024;
const PAGE = fs.readFileSync(path.join(__dirname, 'page.html'));

/** Writes one Server-Sent Event; a page that went away gets nothing more (its run goes on in Baton). */
function sendEvent(res: http.ServerResponse, name: string, data: unknown): void {
  if (!res.destroyed) res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** The part of a run event the page shows, as the event it is sent as; undefined for the rest. */
function forPage(event: RunEvent): [string, unknown] | undefined {
  switch (event.type) {
    // Text as the model writes it (needs BATON_MODEL_STREAM=on in `baton dev`); `stream` tells its step apart.
    case 'delta':
      return event.text ? ['text', { stream: event.stream, text: event.text }] : undefined;
    // That attempt died and its step is being retried: the page drops what it showed of it.
    case 'stream_abandoned':
      return ['text_dropped', { stream: event.stream }];
    // The stored text of a step: what deltas showed, or the whole text at once when nothing streamed.
    case 'assistant_message':
      return event.content ? ['text_stored', { operationId: event.operationId, text: event.content }] : undefined;
    case 'tool_call':
      return ['tool_call', { id: event.toolCallId, name: event.name, arguments: event.arguments }];
    case 'tool_result':
      return ['tool_result', { id: event.toolCallId, name: event.name, content: event.content, error: event.error }];
    default:
      return undefined;
  }
}

async function readMessage(req: http.IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) {
    body += String(chunk);
    if (body.length > MAX_BODY_BYTES) throw new Error('the message is too long');
  }
  const { message } = JSON.parse(body) as { message?: unknown };
  if (typeof message !== 'string' || message.trim() === '') throw new Error('write a message first');
  return message;
}

/** One question: a new thread, its events streamed as they happen, then the reply. */
async function ask(client: BatonClient, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  let message: string;
  try {
    message = await readMessage(req);
  } catch (error) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end(String(error));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  // Our own thread id, so the page can show it before the first event: `npx baton transcript <id>` reads it back.
  const threadId = `web-${randomUUID().slice(0, 8)}`;
  sendEvent(res, 'thread', { threadId });
  try {
    const { result } = await client.run({
      agent: AGENT,
      threadId,
      message,
      // Called with every event of the run, in order, each once, until the reply.
      onEvent: (event) => {
        const shown = forPage(event);
        if (shown) sendEvent(res, ...shown);
      },
    });
    sendEvent(res, 'reply', { status: result.status, reply: result.reply });
  } catch (error) {
    sendEvent(res, 'error', { message: error instanceof Error ? error.message : String(error) });
  }
  res.end();
}

async function main(): Promise<void> {
  // No options: the `baton dev` running from this directory (.baton/stack.json).
  const client = await connect();
  const server = http.createServer((req, res) => {
    // A page of another site may not post here: a JSON body needs a CORS preflight, which this server never allows.
    if (req.method === 'POST' && req.url === '/ask' && req.headers['content-type'] === 'application/json') {
      void ask(client, req, res);
    } else if (req.method === 'GET' && req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    } else {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found');
    }
  });
  server.listen(PORT, HOST, () => {
    const { port } = server.address() as { port: number };
    console.log(`Baton: ${client.connectedVia}`);
    console.log(`Open http://${HOST}:${port}/`);
  });
  // Ctrl-C: stop taking questions and close the client. Runs in progress go on in Baton.
  process.once('SIGINT', () => {
    server.close();
    server.closeAllConnections();
    void client.close();
  });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
