/** Tokens a model call used, as its endpoint reported them. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /**
   * What the call cost in US dollars, where the worker that stored its reply has a price for the model that served it
   * (`BATON_MODEL_PRICES`); a sum has it when any of its calls had one.
   */
  costUsd?: number;
}

export const ZERO_USAGE: TokenUsage = Object.freeze({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });

/** Two dollar amounts added in millionths (the unit costs are stored in), so many small ones add up exactly. */
export function addCost(a: number | undefined, b: number): number {
  return (Math.round((a ?? 0) * 1e6) + Math.round(b * 1e6)) / 1e6;
}

/** Sums token usage; a call that reported none adds nothing. */
export function addUsage(total: TokenUsage, more: TokenUsage | null): TokenUsage {
  if (!more) return total;
  const sum = {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: total.completionTokens + more.completionTokens,
    totalTokens: total.totalTokens + more.totalTokens,
  };
  if (more.costUsd === undefined) return total.costUsd === undefined ? sum : { ...sum, costUsd: total.costUsd };
  return { ...sum, costUsd: addCost(total.costUsd, more.costUsd) };
}
