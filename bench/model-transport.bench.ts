/**
 * What a model request costs the worker's process: the `openai` client over Node's global `fetch` (undici), as a
 * client built with no options sends, against the same client over `modelFetch` (`worker/model-fetch.ts`, `node:http`
 * over keep-alive connections), as Baton's worker sends. Both ask the scripted model server, in this process, for the
 * same one-message chat completion, one request at a time, in interleaved rounds; the server's share of the CPU is
 * the same on both sides. Prints the median wall time and process CPU time per request, and their ratios. No stack.
 * Flags (and those of bench/common.ts): `--requests N` per side and round (default 2,000; 500 with `--quick`).
 */
import OpenAI from 'openai';
import { startScriptedModelServer, validateScript } from '../scripted-model';
import { modelFetch } from '../worker/model-fetch';
import { compare, log, median, parseBenchArgs, printReport, round2, wholeNumber } from './common';

const { common, values } = parseBenchArgs(process.argv.slice(2), [7, 3], { requests: { type: 'string' } });
const requests =
  typeof values.requests === 'string' ? wholeNumber('requests', values.requests) : common.quick ? 500 : 2_000;
const AGENT = 'solver';

interface Round {
  usPerRequest: number;
  cpuUsPerRequest: number;
}

async function main(): Promise<void> {
  const script = validateScript({ agents: { [AGENT]: [{ say: 'done' }] } }, 'model-transport-bench');
  const server = await startScriptedModelServer({ script });
  try {
    const options = {
      baseURL: server.baseURL,
      apiKey: 'scripted',
      maxRetries: 0,
      defaultHeaders: { 'x-baton-agent': AGENT, 'x-baton-thread': 'bench' },
    };
    const clients = {
      'openai over global fetch': new OpenAI(options),
      'openai over modelFetch': new OpenAI({ ...options, fetch: modelFetch }),
    } as const;
    type Side = keyof typeof clients;
    const messages = [
      { role: 'system' as const, content: 'You solve ARC tasks. '.repeat(40) },
      { role: 'user' as const, content: 'Check every part of the task.' },
    ];
    const measure = async (side: Side, count: number): Promise<Round> => {
      const cpu = process.cpuUsage();
      const started = process.hrtime.bigint();
      for (let i = 0; i < count; i++) {
        const reply = await clients[side].chat.completions.create({ model: 'scripted', messages });
        if (reply.choices[0]?.message.content !== 'done') throw new Error(`${side}: an unexpected reply`);
      }
      const elapsedUs = Number(process.hrtime.bigint() - started) / 1000;
      const used = process.cpuUsage(cpu);
      return { usPerRequest: elapsedUs / count, cpuUsPerRequest: (used.user + used.system) / count };
    };
    const rounds: Record<Side, Round[]> = { 'openai over global fetch': [], 'openai over modelFetch': [] };
    const sides = Object.keys(clients) as Side[];
    for (const side of sides) await measure(side, Math.ceil(requests / 4));
    for (let round = 0; round < common.rounds; round++) {
      log(`round ${round + 1} of ${common.rounds}`);
      for (const side of round % 2 === 0 ? sides : [...sides].reverse())
        rounds[side].push(await measure(side, requests));
    }
    const summary = (side: Side) => ({
      wallUsPerRequest: round2(median(rounds[side].map((r) => r.usPerRequest))),
      cpuUsPerRequest: round2(median(rounds[side].map((r) => r.cpuUsPerRequest))),
    });
    const fetchSide = summary('openai over global fetch');
    const modelFetchSide = summary('openai over modelFetch');
    const perRound = (metric: keyof Round) =>
      median(
        rounds['openai over modelFetch'].map(
          (r, i) => r[metric] / (rounds['openai over global fetch'][i]?.[metric] ?? Number.NaN),
        ),
      );
    printReport(
      {
        bench: 'model-transport',
        description:
          'one chat completion request from the openai client to the scripted model server in this process, over ' +
          "Node's global fetch and over Baton's modelFetch (node:http, keep-alive)",
        settings: { requests, rounds: common.rounds },
        dynamicConfig: [],
        cases: [
          { name: 'openai over global fetch', ...fetchSide },
          { name: 'openai over modelFetch', ...modelFetchSide },
        ],
        comparisons: [
          compare(
            'wall time per request',
            'median µs',
            'modelFetch',
            modelFetchSide.wallUsPerRequest,
            'global fetch',
            fetchSide.wallUsPerRequest,
            { medianPerRound: perRound('usPerRequest') },
          ),
          compare(
            'process CPU per request (client and server)',
            'median µs',
            'modelFetch',
            modelFetchSide.cpuUsPerRequest,
            'global fetch',
            fetchSide.cpuUsPerRequest,
            { medianPerRound: perRound('cpuUsPerRequest') },
          ),
        ],
        notes: [
          'The server answers in this process, so CPU per request includes its share, the same on both sides; ' +
            'the difference is the transport.',
        ],
      },
      common.json,
    );
  } finally {
    await server.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
