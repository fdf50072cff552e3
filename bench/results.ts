/**
 * The record `npm run bench -- --json` keeps of a run in `bench/results/<date>.json`: what ran, where, on which commit,
 * and every benchmark's figures, so the docs can quote a current run and the history stays out of them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The machine a run measured: what its figures depend on. */
export interface BenchMachine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly platform: string;
  readonly node: string;
}

export interface BenchRecord {
  /** When the run ended, ISO 8601. */
  readonly date: string;
  /** The checkout's commit, and whether it had uncommitted changes; undefined outside a git checkout. */
  readonly commit: { readonly sha: string; readonly dirty: boolean } | undefined;
  readonly machine: BenchMachine;
  /** The 1-, 5- and 15-minute load averages as the run ended: a busy machine slows every figure. */
  readonly loadAverage: readonly number[];
  /** The benchmarks' flags (`--quick`, …). */
  readonly flags: readonly string[];
  /** Per benchmark: its JSON object, `{ text }` or `{ error }` (bench/run.ts). */
  readonly results: Readonly<Record<string, unknown>>;
}

/** This machine, as a record names it. */
export function thisMachine(): BenchMachine {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
  };
}

/**
 * Writes `record` to `<dir>/<date>.json` (the day of `record.date`, UTC), or `<date>-2.json`, `-3`, … when a run of
 * that day is already there: a record is never overwritten.
 * @returns the file written
 */
export function writeBenchRecord(dir: string, record: BenchRecord): string {
  fs.mkdirSync(dir, { recursive: true });
  const day = record.date.slice(0, 10);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new Error(`a bench record's date must be ISO 8601, not '${record.date}'`);
  const text = `${JSON.stringify(record, null, 2)}\n`;
  for (let run = 1; ; run += 1) {
    const file = path.join(dir, run === 1 ? `${day}.json` : `${day}-${run}.json`);
    try {
      // 'wx': created here or not at all, so two runs ending at once never write one file.
      fs.writeFileSync(file, text, { flag: 'wx' });
      return file;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
