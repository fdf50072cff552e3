/**
 * A `node --test` reporter that counts what ran, for `npm test` to refuse a run in which nothing was tested (zero
 * tests executed, or every test skipped) and, under CI, a run with a skip that is not allow-listed
 * (testing/test-report.ts decides). It also times each test file, for the slowest-files table the runner prints at the
 * end of every run. It writes one JSON line at the end:
 * `{ "executed", "skipped", "todo", "failed", "onlySkipped": [files], "skips": [{ file, name, reason }],
 *    "files": [{ file, seconds }] }`.
 * File-level entries (the runner reports each test file as a test named by its path) are timed, not counted. Plain
 * JavaScript: Node loads reporters before any TypeScript loader is in place.
 */
export default async function* countReporter(source) {
  const counts = { executed: 0, skipped: 0, todo: 0, failed: 0 };
  /** Per test file: tests executed and skipped. */
  const files = new Map();
  /** Every skipped test, with the reason it gave (`true` when it gave none). */
  const skips = [];
  /** Per test file: its wall time in seconds, as the runner measured it around the file's process. */
  const seconds = new Map();
  for await (const event of source) {
    const data = event.data ?? {};
    // The per-file entry of the runner is named by the file's path. Node 20 reports it as `test:complete` only,
    // later versions also as `test:pass`/`test:fail`; both carry the file's duration.
    const fileEntry = data.name !== undefined && data.file !== undefined && data.name === data.file;
    if (fileEntry && ['test:complete', 'test:pass', 'test:fail'].includes(event.type)) {
      const ms = data.details?.duration_ms;
      if (typeof ms === 'number' && Number.isFinite(ms)) seconds.set(data.file, ms / 1000);
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    // A suite is no test, but a skipped one stands for its tests, which the runner then never reports.
    const skipped = data.skip !== undefined && data.skip !== false;
    if (data.details?.type === 'suite' && !skipped) continue;
    const file = files.get(data.file) ?? { executed: 0, skipped: 0 };
    files.set(data.file, file);
    if (skipped) {
      counts.skipped += 1;
      file.skipped += 1;
      skips.push({ file: data.file ?? null, name: data.name ?? '', reason: data.skip });
    } else if (data.todo !== undefined && data.todo !== false) counts.todo += 1;
    else {
      counts.executed += 1;
      file.executed += 1;
    }
    if (event.type === 'test:fail') counts.failed += 1;
  }
  const onlySkipped = [...files]
    .filter(([file, count]) => file !== undefined && count.executed === 0 && count.skipped > 0)
    .map(([file]) => file);
  const timed = [...seconds].map(([file, value]) => ({ file, seconds: value }));
  yield `${JSON.stringify({ ...counts, onlySkipped, skips, files: timed })}\n`;
}
