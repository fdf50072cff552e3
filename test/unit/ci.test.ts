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
