import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isCi, skipUnlessCi } from '../../testing/ci';

test('ci: a missing dependency skips the test on a developer machine and fails it under CI=true', () => {
  const skipped: string[] = [];
  const t = { skip: (message?: string) => skipped.push(message ?? '') };
  skipUnlessCi(t, 'no Temporal CLI', {});
  assert.deepEqual(skipped, ['no Temporal CLI']);
  assert.throws(() => skipUnlessCi(t, 'no Temporal CLI', { CI: 'true' }), /no Temporal CLI \(CI=true: .*fails/);
  assert.deepEqual(skipped, ['no Temporal CLI'], 'not skipped under CI');
  assert.equal(isCi({ CI: '1' }), true);
  assert.equal(isCi({ CI: 'false' }), false);
  assert.equal(isCi({}), false);
});

test('ci: the count reporter names each test file whose every test skipped (under CI the runner then fails)', async () => {
  type Event = { type: string; data: Record<string, unknown> };
  const { default: countReporter } = await import('../../testing/count-reporter.mjs');
  const reported: Event[] = [
    { type: 'test:pass', data: { name: 'needs a browser', file: '/t/browser.test.ts', skip: 'no Chromium' } },
    { type: 'test:pass', data: { name: 'runs', file: '/t/mixed.test.ts' } },
    { type: 'test:pass', data: { name: 'skips', file: '/t/mixed.test.ts', skip: true } },
    { type: 'test:fail', data: { name: 'fails', file: '/t/failing.test.ts' } },
    // The runner's own entry for a file, and a suite: neither is a test.
    { type: 'test:pass', data: { name: '/t/browser.test.ts', file: '/t/browser.test.ts' } },
    { type: 'test:pass', data: { name: 'a suite', file: '/t/mixed.test.ts', details: { type: 'suite' } } },
  ];
  async function* events(): AsyncIterable<Event> {
    for (const event of reported) yield await Promise.resolve(event);
  }
  let output = '';
  for await (const chunk of countReporter(events())) output += chunk;
  assert.deepEqual(JSON.parse(output), {
    executed: 2,
    skipped: 2,
    todo: 0,
    failed: 1,
    onlySkipped: ['/t/browser.test.ts'],
    skips: [
      { file: '/t/browser.test.ts', name: 'needs a browser', reason: 'no Chromium' },
      { file: '/t/mixed.test.ts', name: 'skips', reason: true },
    ],
    files: [],
  });
});
