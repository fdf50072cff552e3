/**
 * `npm run bench -- memory`: the resident memory of a Baton worker process (`baton worker`, spawned and measured from
 * outside through /proc/<pid>/status VmRSS) with 200 and then 1,000 threads waiting on a human (each thread's turn
 * called `ask_human` and waits), against the same worker idle before the first thread: the baseline, measured in the
 * same run. Each waiting thread keeps two workflows open (the thread and its turn); the worker's sticky cache holds
 * at most `BATON_MAX_CACHED_WORKFLOWS` of them (default 1000), read back from the worker's Prometheus metrics.
 *
 * Worker configurations (`--configs`), one fresh worker process each: `image`, as the Docker image runs it (the
 * Dockerfile's `ENV` lines, read from it: the workflow bundle `baton bundle` wrote beforehand, `MALLOC_ARENA_MAX`,
 * `NODE_ENV`); `prebuilt`, the bundle alone; `in-process`, `baton worker` with neither, bundling `workflows/` with
 * webpack in its own process at start-up, whose memory stays resident.
 *
 * Flags (and those of bench/common.ts): `--threads LIST` (default `200,1000`; `100,300` with `--quick`), `--caches
 * LIST` (BATON_MAX_CACHED_WORKFLOWS values, default `1000`), `--configs LIST` (default `image,in-process`),
 * `--worker-env KEY=VALUE` (repeatable: more environment for every worker process, e.g. a Node or allocator setting
 * to try). One worker process per cache and configuration, one after the other.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowUpdateStage } from '@temporalio/client';
import { connect } from '../client';
import { writeWorkflowBundle } from '../worker/main';
import { choosePort } from '../stack/temporal-server';
import { startScriptedModelServer } from '../scripted-model';
import { uniqueTaskQueue } from '../testing/test-env';
import { startWorkerProcess } from '../testing/worker-process';
import { benchAgentFile, benchScript } from './baselines';
import {
  compare,
  log,
  median,
  parseBenchArgs,
  printReport,
  ROOT,
  round1,
  runBench,
  wholeNumbers,
  type Comparison,
} from './common';

const AGENT = 'asker';
/** Threads started at once while filling the worker up. */
const START_CONCURRENCY = 20;
/** Samples of VmRSS per measurement (1 s apart, the median kept). */
const SAMPLES = 5;
/** Longest wait for the threads of one step to reach their question. */
const FILL_TIMEOUT_MS = 15 * 60_000;
/** Target: 200 waiting threads at most this many MB of worker RSS. */
const TARGET_MB_AT_200 = 400;
/** How a worker process is configured: see the top of this file. */
const CONFIGS = ['image', 'prebuilt', 'in-process'] as const;
type WorkerConfigName = (typeof CONFIGS)[number];

const { common, values } = parseBenchArgs(process.argv.slice(2), [1, 1], {
  threads: { type: 'string' },
  caches: { type: 'string', default: '1000' },
  configs: { type: 'string', default: 'image,in-process' },
  'worker-env': { type: 'string', multiple: true, default: [] },
});
const steps = wholeNumbers(
  'threads',
  typeof values.threads === 'string' ? values.threads : common.quick ? '100,300' : '200,1000',
);
const caches = wholeNumbers('caches', String(values.caches));
/** `--worker-env KEY=VALUE`: more environment for every worker process (a Node or allocator setting to try). */
const workerEnv = Object.fromEntries(
  ((values['worker-env'] as string[] | undefined) ?? []).map((assignment) => {
    const equals = assignment.indexOf('=');
    if (equals < 1) throw new Error(`--worker-env: '${assignment}' is not KEY=VALUE`);
    return [assignment.slice(0, equals), assignment.slice(equals + 1)];
  }),
);
const configs = String(values.configs)
  .split(',')
  .map((part) => {
    const config = CONFIGS.find((c) => c === part.trim());
    if (config === undefined) throw new Error(`--configs: '${part}' is not one of ${CONFIGS.join(', ')}`);
    return config;
  });

/** The environment the Dockerfile's runtime stage sets (`ENV KEY=VALUE` lines), as the image's worker gets it. */
function imageEnv(): Record<string, string> {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.search(/^FROM .+ AS runtime$/m));
  return Object.fromEntries([...runtime.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

interface Sample {
  threads: number;
  rssMb: number;
  peakMb: number;
  cacheSize: number | undefined;
  forcedEvictions: number | undefined;
}

runBench(common, async (context) => {
  const dir = fs.mkdtempSync(path.join(context.stack.stateDir, 'memory-bench-'));
  const agentsDir = path.join(dir, 'agents');
  fs.mkdirSync(agentsDir);
  fs.writeFileSync(path.join(agentsDir, `${AGENT}.md`), benchAgentFile(AGENT));
  const model = await startScriptedModelServer({
    script: benchScript(
      [`  ${AGENT}:\n    - call: ask_human\n      args: { question: "Which colour?" }\n    - say: "Thanks."\n`],
      'memory-bench',
    ),
  });
  context.defer(() => model.close());
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  const envOf: Record<WorkerConfigName, Record<string, string>> = {
    image: { ...imageEnv(), BATON_WORKFLOW_BUNDLE: bundlePath },
    prebuilt: { BATON_WORKFLOW_BUNDLE: bundlePath },
    'in-process': {},
  };
  if (configs.some((config) => 'BATON_WORKFLOW_BUNDLE' in envOf[config])) {
    const bytes = await writeWorkflowBundle(bundlePath);
    log(`workflow bundle: ${bundlePath} (${bytes} bytes)`);
  }

  const results: { cache: number; config: WorkerConfigName; samples: Sample[] }[] = [];
  for (const [cache, config] of caches.flatMap((c) => configs.map((w) => [c, w] as const))) {
    const label = `cache ${cache}, ${config}`;
    log(`${label}: worker environment ${describeEnv({ ...envOf[config], ...workerEnv })}`);
    const taskQueue = uniqueTaskQueue(`bench-memory-${cache}`);
    const metricsAddress = `127.0.0.1:${await choosePort('127.0.0.1', 0)}`;
    const worker = await startWorkerProcess({
      name: `worker (${label})`,
      env: {
        TEMPORAL_ADDRESS: context.stack.temporalAddress,
        TEMPORAL_NAMESPACE: 'default',
        BATON_TASK_QUEUE: taskQueue,
        DATABASE_URL: context.stack.databaseUrl,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: 'scripted',
        BATON_MODEL: 'baton-scripted',
        BATON_AGENTS_DIR: agentsDir,
        BATON_LOG_LEVEL: 'WARN',
        BATON_MAX_CACHED_WORKFLOWS: String(cache),
        BATON_METRICS_ADDRESS: metricsAddress,
        ...envOf[config],
        ...workerEnv,
      },
    });
    const stopWorker = () => worker.kill();
    context.defer(stopWorker);
    const pid = worker.child.pid;
    if (pid === undefined) throw new Error('the worker process has no pid');
    const client = await connect({
      address: context.stack.temporalAddress,
      namespace: 'default',
      taskQueue,
      databaseUrl: context.stack.databaseUrl,
    });
    context.defer(() => client.close());
    const measure = async (threads: number): Promise<Sample> => {
      await sleep(3_000);
      const rss: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        if (i > 0) await sleep(1_000);
        rss.push(readStatusKb(pid, 'VmRSS'));
      }
      const metrics = await scrape(metricsAddress);
      return {
        threads,
        rssMb: round1(median(rss) / 1024),
        peakMb: round1(readStatusKb(pid, 'VmHWM') / 1024),
        cacheSize: metrics.get('temporal_sticky_cache_size'),
        forcedEvictions: metrics.get('temporal_sticky_cache_total_forced_eviction'),
      };
    };

    log(`${label}: worker pid ${pid}, idle`);
    const samples = [await measure(0)];
    const prefix = `bench-mem-${cache}-${config}-${process.pid}-`;
    let started = 0;
    for (const target of steps) {
      log(`${label}: starting threads up to ${target}`);
      while (started < target) {
        const batch = Array.from({ length: Math.min(START_CONCURRENCY, target - started) }, (_, i) => started + i);
        started += batch.length;
        await Promise.all(
          batch.map(async (n) => {
            const thread = await client.startThread({ agent: AGENT, threadId: `${prefix}${n}` });
            // Accepted is enough: the turn runs on and waits for its answer, which never comes.
            await thread.workflow.startUpdate('sendMessage', {
              args: [{ message: 'Paint the border.' }],
              waitForStage: WorkflowUpdateStage.ACCEPTED,
            });
          }),
        );
      }
      const deadline = Date.now() + FILL_TIMEOUT_MS;
      for (;;) {
        const { rows } = await client
          .database()
          .query<{ n: number }>(
            `SELECT count(*)::int AS n FROM questions WHERE status = 'open' AND root_thread_id LIKE $1`,
            [`${prefix}%`],
          );
        const waiting = rows[0]?.n ?? 0;
        if (waiting >= target) break;
        if (Date.now() > deadline) throw new Error(`only ${waiting} of ${target} threads reached their question`);
        await sleep(1_000);
      }
      samples.push(await measure(target));
      log(`${label}: ${target} waiting, RSS ${samples.at(-1)?.rssMb} MB`);
    }
    results.push({ cache, config, samples });
    await stopWorker();
  }

  const comparisons: Comparison[] = results.flatMap(({ cache, config, samples }) => {
    const idle = samples[0] as Sample;
    return samples.slice(1).map((s) =>
      compare(
        `cache ${cache}, ${config}: RSS with ${s.threads} waiting / idle`,
        'RSS MB',
        `${s.threads} waiting`,
        s.rssMb,
        'idle',
        idle.rssMb,
        {
          ...(s.threads === 200 ? { target: TARGET_MB_AT_200, targetOn: 'subject' as const } : {}),
          figures: {
            perWaitingThreadKb: round1(((s.rssMb - idle.rssMb) * 1024) / s.threads),
            cacheSize: s.cacheSize,
            forcedEvictions: s.forcedEvictions,
          },
        },
      ),
    );
  });
  // Each other configuration against `in-process` (`baton worker` as it runs with nothing set) at the same cache and
  // load: what the bundle (and the image's environment) save.
  for (const subject of results.filter((r) => r.config !== 'in-process')) {
    const inProcess = results.find((r) => r.config === 'in-process' && r.cache === subject.cache);
    subject.samples.forEach((s, i) => {
      const other = inProcess?.samples[i];
      if (other === undefined) return;
      const load = s.threads === 0 ? 'idle' : `${s.threads} waiting`;
      comparisons.push(
        compare(
          `cache ${subject.cache}, ${load}: RSS ${subject.config} / in-process`,
          'RSS MB',
          subject.config,
          s.rssMb,
          'in-process',
          other.rssMb,
          { figures: { savedMb: round1(other.rssMb - s.rssMb) } },
        ),
      );
    });
  }
  printReport(
    {
      bench: 'memory',
      description:
        'worker process RSS with threads waiting on ask_human vs the same worker idle; as the Docker image runs it ' +
        '(pre-built workflow bundle, its environment) vs baton worker with nothing set (bundling in the process)',
      settings: {
        threads: steps.join(','),
        caches: caches.join(','),
        configs: configs.join(','),
        workerEnv: describeEnv(workerEnv),
        samples: SAMPLES,
      },
      dynamicConfig: context.dynamicConfig,
      cases: results.flatMap(({ cache, config, samples }) =>
        samples.map((s) => ({
          name: `cache ${cache}, ${config}, ${s.threads === 0 ? 'idle' : `${s.threads} waiting`}`,
          rssMb: s.rssMb,
          peakMb: s.peakMb,
          cacheSize: s.cacheSize ?? 'n/a',
          forcedEvictions: s.forcedEvictions ?? 'n/a',
        })),
      ),
      comparisons,
    },
    common.json,
  );
});

function describeEnv(env: Record<string, string>): string {
  const entries = Object.entries(env);
  return entries.length === 0 ? '(nothing set)' : entries.map(([key, value]) => `${key}=${value}`).join(' ');
}

/** A `/proc/<pid>/status` field in kB. */
function readStatusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(match[1]);
}

/** The worker's Prometheus metrics: each series name (labels summed) to its value. */
async function scrape(address: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://${address}/metrics`)).text();
  const metrics = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line);
    if (match) metrics.set(match[1] ?? '', (metrics.get(match[1] ?? '') ?? 0) + Number(match[2]));
  }
  return metrics;
}
