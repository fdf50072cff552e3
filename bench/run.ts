/**
 * `npm run bench [-- NAME… FLAGS…]`: runs the benchmarks one after another, each in its own process (a stack each,
 * nothing shared between their timings). Names pick benchmarks (default: all, in the order below); flags go to every
 * one of them. With `--json` the output is one object keyed by benchmark name: a benchmark that prints JSON
 * contributes its object, one that prints text contributes `{ "text": … }`, one that fails `{ "error": … }` (and the
 * exit code is 1); the same object, with the date, the machine, the load and the commit, is kept in
 * `bench/results/<date>.json` (bench/results.ts).
 */
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { thisMachine, writeBenchRecord, type BenchRecord } from './results';

/** Benchmark names: `bench/<name>.bench.ts`. */
const BENCHES = [
  'step',
  'throughput',
  'fork-join',
  'long-thread',
  'memory',
  'env-data',
  'stream',
  'trace',
  'limits',
  'langgraph',
  'vm-watchdog',
  'model-transport',
] as const;

function runBench(name: string, flags: readonly string[], capture: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, `${name}.bench.ts`), ...flags], {
      stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      code === 0 ? resolve(output) : reject(new Error(`bench ${name} ended with ${signal ?? `code ${String(code)}`}`)),
    );
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const names = args.filter((arg) => (BENCHES as readonly string[]).includes(arg));
  const unknown = args.filter(
    (arg, i) => !arg.startsWith('-') && !names.includes(arg) && !/^-/.test(args[i - 1] ?? ''),
  );
  if (unknown.length > 0) throw new Error(`unknown benchmark ${unknown.join(', ')} (there are: ${BENCHES.join(', ')})`);
  const flags = args.filter((arg) => !names.includes(arg));
  const json = flags.includes('--json');
  const results: Record<string, unknown> = {};
  for (const name of names.length > 0 ? names : BENCHES) {
    // A failing benchmark is reported and the others still run: one broken case must not hide the rest.
    let output: string;
    try {
      output = await runBench(name, flags, json);
    } catch (error) {
      process.exitCode = 1;
      const message = error instanceof Error ? error.message : String(error);
      process.stderr.write(`${message}\n`);
      results[name] = { error: message };
      continue;
    }
    if (!json) continue;
    // A JSON benchmark's object is its last line (anything a library printed to stdout before it is dropped).
    const last = output.trimEnd().split('\n').at(-1) ?? '';
    try {
      results[name] = JSON.parse(last) as unknown;
    } catch {
      results[name] = { text: output };
    }
  }
  if (!json) return;
  process.stdout.write(`${JSON.stringify(results)}\n`);
  const record: BenchRecord = {
    date: new Date().toISOString(),
    commit: checkoutCommit(),
    machine: thisMachine(),
    loadAverage: os.loadavg().map((load) => Math.round(load * 100) / 100),
    flags: flags.filter((flag) => flag !== '--json'),
    results,
  };
  const file = writeBenchRecord(path.join(__dirname, 'results'), record);
  process.stderr.write(`bench: this run's record is ${path.relative(process.cwd(), file)}\n`);
}

/** The checkout's commit and whether it has uncommitted changes, or undefined where git cannot tell. */
function checkoutCommit(): BenchRecord['commit'] {
  const git = (args: string[]) =>
    execFileSync('git', args, { cwd: __dirname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    return { sha: git(['rev-parse', 'HEAD']).trim(), dirty: git(['status', '--porcelain']).trim() !== '' };
  } catch {
    return undefined; // not a git checkout (an installed package), or no git
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
