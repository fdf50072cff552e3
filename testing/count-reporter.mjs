/**
 * A `node --test` reporter that counts what ran, for `npm test` to refuse a run in which nothing was tested: zero
 * tests executed, or every test skipped, or (under CI) a test file whose every test skipped. It writes one JSON line
 * at the end: `{ "executed", "skipped", "todo", "failed", "onlySkipped": [files] }`. File-level entries (the runner
 * reports each test file as a test) are not counted. Plain JavaScript: Node loads reporters before any TypeScript
 * loader is in place.
 */
export default async function* countReporter(source) {
  const counts = { executed: 0, skipped: 0, todo: 0, failed: 0 };
  /** Per test file: tests executed and skipped. */
  const files = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const data = event.data ?? {};
    if (data.details?.type === 'suite') continue;
    // The per-file entry of the runner is named by the file's path.
    if (data.name !== undefined && data.file !== undefined && data.name === data.file) continue;
    const file = files.get(data.file) ?? { executed: 0, skipped: 0 };
    files.set(data.file, file);
    if (data.skip !== undefined && data.skip !== false) {
      counts.skipped += 1;
      file.skipped += 1;
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
  yield `${JSON.stringify({ ...counts, onlySkipped })}\n`;
}
