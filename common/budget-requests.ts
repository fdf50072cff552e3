/**
 * A turn's request for more budget (`on_budget: ask`), as an approval shows it: pure, for the workflow and the CLI.
 */

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
