/**
 * The record `npm run bench -- --json` keeps of each run (bench/results.ts): one file per run under its day, never
 * overwritten, with the machine it measured.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { renderBenchRecord } from '../../bench/report';
import { thisMachine, writeBenchRecord, type BenchRecord } from '../../bench/results';

const record = (date: string, results: Record<string, unknown>): BenchRecord => ({
  date,
  commit: { sha: 'a'.repeat(40), dirty: false },
  machine: thisMachine(),
  loadAverage: [0.5, 0.4, 0.3],
  flags: ['--quick'],
  results,
});

test('bench results: each run of a day gets a file of its own, and none is overwritten', (t) => {
  const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-bench-results-')), 'results');
  t.after(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }));
  const first = record('2026-11-29T08:00:00.000Z', { step: { ratio: 0.98 } });
  const second = record('2026-11-29T23:59:59.000Z', { step: { ratio: 1.02 } });
  const nextDay = record('2026-11-30T00:00:01.000Z', { step: { error: 'bench step ended with code 1' } });
  assert.deepEqual(
    [first, second, nextDay].map((run) => path.basename(writeBenchRecord(dir, run))),
    ['2026-11-29.json', '2026-11-29-2.json', '2026-11-30.json'],
  );
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, '2026-11-29.json'), 'utf8')), first);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, '2026-11-29-2.json'), 'utf8')), second);
  assert.throws(() => writeBenchRecord(dir, record('yesterday', {})), /must be ISO 8601, not 'yesterday'/);
});

test('bench results: the machine is the one measuring', () => {
  const machine = thisMachine();
  assert.equal(machine.cpus, os.cpus().length);
  assert.equal(machine.node, process.version);
  assert.ok(
    machine.memoryGiB > 0 && Math.abs(machine.memoryGiB - os.totalmem() / 2 ** 30) < 0.1,
    `${machine.memoryGiB}`,
  );
});

test('bench report: a record renders as where it ran, then a list per benchmark; a failed one says so', () => {
  const markdown = renderBenchRecord(
    {
      ...record('2026-11-29T08:00:00.000Z', {
        'vm-watchdog': {
          description: 'a call into a vm context',
          comparisons: [
            {
              name: 'time per call',
              metric: 'median µs',
              subject: { name: 'with timeout', value: 47.6 },
              baseline: { name: 'no timeout', value: 0.7 },
              ratio: 70.99,
              medianPerRound: 74.55,
            },
          ],
        },
        step: { error: 'bench step ended with code 1' },
      }),
      machine: { cpus: 2, cpuModel: 'CPU', memoryGiB: 23.5, platform: 'Linux x64', node: 'v20.20.2' },
    },
    'bench/results/2026-11-29.json',
  );
  assert.equal(
    markdown,
    [
      'Run of 2026-11-29 (`bench/results/2026-11-29.json`): `npm run bench -- --quick --json` on commit aaaaaaaaaaaa; ' +
        '2 cores (CPU), 23.5 GiB, Linux x64, Node v20.20.2; load average 0.5 / 0.4 / 0.3 (1, 5, 15 min) as it ended.',
      '',
      '### `vm-watchdog`',
      '',
      'A call into a vm context.',
      '',
      '- time per call: **70.99×** (per round 74.55×); with timeout 47.6 vs no timeout 0.7 (median µs)',
      '',
      '### `step`',
      '',
      'Did not finish: bench step ended with code 1.',
      '',
    ].join('\n'),
  );
});
