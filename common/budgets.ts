/**
 * Budgets' bounds and a turn's request for more (`on_budget: ask`), as an approval shows it: pure, for the workflow,
 * the agent files, the SDK and the CLI.
 */

/** The largest token budget a root or an agent file may set (what a world variable can say). */
export const MAX_BUDGET_TOKENS = 999_999_999;
/** The largest dollar budget a root or an agent file may set. */
export const MAX_BUDGET_USD = 1_000_000;

/** The name an approval for more budget carries where a tool call's would be; its arguments are the extension. */
export const EXTEND_BUDGET_REQUEST = 'extend_budget';

/** An extension in words: `20000 tokens and $0.5`. */
export function describeExtension(extension: { tokens?: number; usd?: number }): string {
  const parts = [
    ...(extension.tokens === undefined ? [] : [`${extension.tokens} tokens`]),
    ...(extension.usd === undefined ? [] : [`$${extension.usd}`]),
  ];
  return parts.join(' and ') || 'nothing';
}
