/**
 * docs/reference/environment.md: every process environment variable Baton reads, from the registry
 * (worker/environment.ts), production ones by topic and the test-only ones in a section of their own.
 */
import { GENERATED_NOTICE } from '../notice';
import { ENV_TOPICS, environmentVariables, type EnvReader, type NamedEnvVariable } from '../../../worker/environment';

/** What each reader of the registry is, for the page's key. */
const READERS: Record<EnvReader, string> = {
  worker: '`baton worker`, and `runWorkerFromEnv` in a program of your own',
  setup: '`baton setup`',
  dev: '`baton dev`, the local stack with its own worker',
  demo: '`baton demo`, the same stack with the example agents',
  CLI: 'the other `baton` commands (`run`, `send`, `explorer`, `mcp serve`, …)',
  SDK: '`connect()` without options, in your own code (`findConnection`)',
  explorer: '`baton explorer`',
  'mcp serve': '`baton mcp serve`',
  tests: "Baton's own tests (`npm test`)",
  bench: "Baton's own benchmarks (`npm run bench`)",
};

export async function pages(): Promise<Record<string, string>> {
  return Promise.resolve({ 'environment.md': environmentPage(environmentVariables()) });
}

export function environmentPage(variables: readonly NamedEnvVariable[]): string {
  const production = variables.filter((variable) => !variable.testOnly);
  const testOnly = variables.filter((variable) => variable.testOnly);
  const lines = [
    GENERATED_NOTICE,
    '',
    '# Environment variables',
    '',
    'Every variable Baton reads from its process environment, from the registry in `worker/environment.ts`.',
    '[Configuration](../configuration.md) explains how the worker, the CLI and the SDK are configured and which of',
    'these matter first. An empty value counts as unset. Variables a world sets (`baton world set`) are another',
    'thing: see [World variables](world-variables.md).',
    '',
    'What reads each variable:',
    '',
    ...Object.entries(READERS).map(([reader, what]) => `- **${reader}**: ${what}`),
    '',
    '## Production variables',
    '',
  ];
  for (const topic of ENV_TOPICS) {
    const inTopic = production.filter((variable) => variable.topic === topic);
    if (inTopic.length === 0) continue;
    lines.push(`### ${topic}`, '', ...inTopic.flatMap(entry), '');
  }
  const unlisted = production.filter((variable) => !(ENV_TOPICS as readonly string[]).includes(variable.topic));
  if (unlisted.length > 0)
    throw new Error(`variables without a known topic: ${unlisted.map((v) => v.name).join(', ')}`);
  lines.push(
    '## Test-only variables',
    '',
    "Set by Baton's own test runner and CI, or for them: no deployment needs these.",
    '',
    ...testOnly.flatMap(entry),
  );
  return `${lines.join('\n').trimEnd()}\n`;
}

/** One variable: its name, what it means, who reads it and its default, as a list item. */
function entry(variable: NamedEnvVariable): string[] {
  return [
    `- \`${variable.name}\`: ${variable.meaning}`,
    `  Read by ${variable.readBy.join(', ')}. Default: ${variable.default}.`,
  ];
}
