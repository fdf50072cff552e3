/**
 * What `npm test` (testing/run-tests.ts) hands the test files: the addresses of the stack it booted, through
 * environment variables, so every test file (its own process) shares one Temporal server and one database.
 */
import { randomBytes } from 'node:crypto';

export const TEST_ENV = {
  temporalAddress: 'BATON_TEST_TEMPORAL_ADDRESS',
  databaseUrl: 'BATON_TEST_DATABASE_URL',
  workflowBundle: 'BATON_TEST_WORKFLOW_BUNDLE',
  temporalCli: 'BATON_TEST_TEMPORAL_CLI',
  stateDir: 'BATON_TEST_STATE_DIR',
} as const;

export interface TestEnv {
  temporalAddress: string;
  databaseUrl: string;
  /** Path of the pre-built workflow bundle. */
  workflowBundlePath: string;
  /** Path of the Temporal CLI, when the stack started one (chaos tests start their own servers with it). */
  temporalCli?: string;
  /** A scratch directory for this test run. */
  stateDir: string;
}

/** @throws Error when run outside `npm test`, saying how to run the file. */
export function readTestEnv(env: Readonly<Record<string, string | undefined>> = process.env): TestEnv {
  const missing = [TEST_ENV.temporalAddress, TEST_ENV.databaseUrl, TEST_ENV.workflowBundle, TEST_ENV.stateDir].filter(
    (name) => !env[name],
  );
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} not set: run tests through \`npm test\` (or \`npm test -- <suite|file>\`), which starts the stack they need`,
    );
  }
  return {
    temporalAddress: env[TEST_ENV.temporalAddress] ?? '',
    databaseUrl: env[TEST_ENV.databaseUrl] ?? '',
    workflowBundlePath: env[TEST_ENV.workflowBundle] ?? '',
    ...(env[TEST_ENV.temporalCli] ? { temporalCli: env[TEST_ENV.temporalCli] } : {}),
    stateDir: env[TEST_ENV.stateDir] ?? '',
  };
}

/** A task queue no other test uses, so suites can run side by side on one server. */
export function uniqueTaskQueue(name: string): string {
  return `test-${name}-${randomBytes(4).toString('hex')}`;
}

/** A thread id no other test uses. */
export function uniqueThreadId(name: string): string {
  return `${name}-${randomBytes(4).toString('hex')}`;
}
