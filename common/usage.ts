/** Tokens a model call used, as its endpoint reported them. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export const ZERO_USAGE: TokenUsage = Object.freeze({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });

/** Sums token usage; a call that reported none adds nothing. */
export function addUsage(total: TokenUsage, more: TokenUsage | null): TokenUsage {
  if (!more) return total;
  return {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: total.completionTokens + more.completionTokens,
    totalTokens: total.totalTokens + more.totalTokens,
  };
}
