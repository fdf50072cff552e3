/**
 * Tests whose dependency may be missing (a Temporal CLI that cannot be built, a shared Postgres server) skip on a
 * developer's machine but fail under CI: a resolver bug, or a machine without Go, must not pass CI as a row of skips.
 */

/** Whether the tests run under CI (`CI=true`, as CI services set it). */
export function isCi(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return /^(1|true|yes)$/i.test(env.CI?.trim() ?? '');
}

/**
 * Skips the test with `reason`, or, under CI, fails it with that reason.
 * @throws Error under CI
 */
export function skipUnlessCi(
  t: { skip(message?: string): void },
  reason: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): void {
  if (isCi(env)) throw new Error(`${reason} (CI=true: a missing dependency fails the test instead of skipping it)`);
  t.skip(reason);
}
