/**
 * `node --import tsx bench/report.ts bench/results/<record>.json`: prints a record of `npm run bench -- --json` as the
 * markdown `docs/performance.md` quotes: where and when it ran, then a list per benchmark with each comparison, its
 * ratio and its figures.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { BenchRecord } from './results';

/**
 * One comparison of a benchmark's JSON output: as bench/common.ts writes them, or as the env store's benchmark does
 * (`case`, `clients`, the store's and raw `pg`'s operations per second, `medianPerRoundRatio`).
 */
interface Comparison {
  readonly name?: string;
  readonly metric?: string;
  readonly subject?: { readonly name: string; readonly value: number };
  readonly baseline?: { readonly name: string; readonly value: number };
  readonly ratio?: number;
  readonly medianPerRound?: number;
  readonly case?: string;
  readonly clients?: number;
  readonly store?: { readonly opsPerSec: number };
  readonly raw?: { readonly opsPerSec: number };
  readonly medianPerRoundRatio?: number;
}

/** A comparison in the common shape. */
function normalized(comparison: Comparison): Comparison {
  if (comparison.name !== undefined) return comparison;
  return {
    name: `${comparison.case ?? '?'}, ${comparison.clients ?? '?'} client(s): store / raw pg`,
    metric: 'per second',
    ...(comparison.store === undefined ? {} : { subject: { name: 'store', value: comparison.store.opsPerSec } }),
    ...(comparison.raw === undefined ? {} : { baseline: { name: 'raw pg', value: comparison.raw.opsPerSec } }),
    ...(comparison.ratio === undefined ? {} : { ratio: comparison.ratio }),
    ...(comparison.medianPerRoundRatio === undefined ? {} : { medianPerRound: comparison.medianPerRoundRatio }),
  };
}

interface BenchOutput {
  readonly description?: string;
  readonly comparisons?: readonly Comparison[];
  readonly error?: string;
}

/** The markdown of `record`, which was read from `file` (named relative to the repository root). */
export function renderBenchRecord(record: BenchRecord, file: string): string {
  const { machine } = record;
  const commit =
    record.commit === undefined
      ? 'no git checkout'
      : `${record.commit.sha.slice(0, 12)}${record.commit.dirty ? ' with uncommitted changes' : ''}`;
  const lines = [
    `Run of ${record.date.slice(0, 10)} (\`${file}\`): \`npm run bench -- ${[...record.flags, '--json'].join(' ')}\` on commit ${commit}; ` +
      `${machine.cpus} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, ${machine.platform}, Node ${machine.node}; ` +
      `load average ${record.loadAverage.join(' / ')} (1, 5, 15 min) as it ended.`,
    '',
  ];
  for (const [name, output] of Object.entries(record.results) as [string, BenchOutput][]) {
    lines.push(`### \`${name}\``, '');
    if (output.error !== undefined) {
      lines.push(`Did not finish: ${output.error}.`, '');
      continue;
    }
    if (output.description)
      lines.push(`${output.description.charAt(0).toUpperCase()}${output.description.slice(1)}.`, '');
    const comparisons = output.comparisons ?? [];
    if (comparisons.length === 0) {
      lines.push('No comparison in this run.', '');
      continue;
    }
    // A list, not a table: the names of the comparisons are long, and a table of them is unreadable as markdown.
    for (const comparison of comparisons.map(normalized)) {
      const side = (value: Comparison['subject']) => (value === undefined ? '—' : `${value.name} ${value.value}`);
      const ratio = comparison.ratio === undefined ? '—' : `**${comparison.ratio}×**`;
      const perRound = comparison.medianPerRound === undefined ? '' : ` (per round ${comparison.medianPerRound}×)`;
      const unit = comparison.metric ? ` (${comparison.metric})` : '';
      lines.push(
        `- ${comparison.name}: ${ratio}${perRound}; ${side(comparison.subject)} vs ${side(comparison.baseline)}${unit}`,
      );
    }
    lines.push('');
  }
  return lines.join('\n');
}

if (require.main === module) {
  const file = process.argv[2];
  if (file === undefined) {
    process.stderr.write('usage: node --import tsx bench/report.ts bench/results/<record>.json\n');
    process.exitCode = 1;
  } else {
    const record = JSON.parse(fs.readFileSync(file, 'utf8')) as BenchRecord;
    const root = path.resolve(__dirname, '..');
    process.stdout.write(renderBenchRecord(record, path.relative(root, path.resolve(file)).split(path.sep).join('/')));
  }
}
