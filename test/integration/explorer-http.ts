/** Plain HTTP requests to an explorer, for the explorer's integration tests (no browser, every header under control). */
import assert from 'node:assert/strict';
import http from 'node:http';

export interface Fetched {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Send this token as `Authorization: Bearer`, or none with `null`. @default the explorer's own */
  token?: string | null;
}

/** Markup without the whitespace around tags (the templates are formatted by Prettier), `<pre>` text kept. */
export function flat(markup: string): string {
  return markup.replace(/\s*(<[^>]+>)\s*/g, '$1');
}

/** The text a reader sees: tags dropped, entities of the escaped characters decoded, whitespace collapsed. */
export function textOf(markup: string): string {
  const entities: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };
  return markup
    .replace(/<[^>]+>/g, '')
    .replace(/&(?:amp|lt|gt|quot|#39);/g, (entity) => entities[entity] ?? entity)
    .replace(/\s+/g, ' ')
    .trim();
}

/** What `explorerHttp` asks for: where the explorer listens, and its token. */
export interface ExplorerAddress {
  url: string;
  token: string;
}

/** `Authorization: Bearer <token>` as a header object, none for `null`. */
export function bearer(token: string | null): Record<string, string> {
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

/**
 * Requests to the explorer `explorer()` (read when each request is made, so it may start after this is set up), each
 * with its token as a bearer header unless told otherwise.
 */
export function explorerHttp(explorer: () => ExplorerAddress) {
  /** One request; resolves with whatever status comes back. */
  function request(path: string, options: RequestOptions = {}): Promise<Fetched> {
    const { url, token } = explorer();
    return new Promise((resolve, reject) => {
      const req = http.request(
        `${url}${path}`,
        {
          method: options.method ?? 'GET',
          headers: { ...bearer(options.token === undefined ? token : options.token), ...options.headers },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end(options.body);
    });
  }

  /** A 200 JSON response, parsed. */
  async function json(path: string): Promise<unknown> {
    const response = await request(path);
    assert.equal(response.status, 200, `${path}: ${response.body}`);
    assert.match(response.headers['content-type'] ?? '', /^application\/json/);
    return JSON.parse(response.body) as unknown;
  }

  /** A 200 HTML page as served. */
  async function markup(path: string): Promise<string> {
    const response = await request(path);
    assert.equal(response.status, 200, `${path}: ${response.body}`);
    assert.match(response.headers['content-type'] ?? '', /^text\/html/);
    return response.body;
  }

  /** A 200 HTML page, `flat`. */
  async function page(path: string): Promise<string> {
    return flat(await markup(path));
  }

  return { request, json, markup, page };
}
