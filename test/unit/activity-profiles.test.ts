import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as profiles from '../../workflows/activity-profiles';

test('activity profiles: every profile has a start-to-close timeout and a bounded retry policy', () => {
  const entries = Object.entries(profiles).filter(([name]) => name.endsWith('_PROFILE'));
  assert.ok(entries.length >= 3, `found ${entries.map(([name]) => name).join(', ')}`);
  for (const [name, profile] of entries) {
    const options = profile as { startToCloseTimeout?: unknown; retry?: { maximumAttempts?: number } };
    assert.ok(options.startToCloseTimeout, `${name} sets startToCloseTimeout`);
    const attempts = options.retry?.maximumAttempts;
    // 0 means "unlimited" to Temporal, as does leaving it out: a retry that can never end is a defect.
    assert.ok(
      typeof attempts === 'number' && Number.isInteger(attempts) && attempts > 0 && attempts <= 100,
      `${name} bounds its retries (maximumAttempts: ${String(attempts)})`,
    );
  }
});
