/**
 * What model calls cost, for budgets in US dollars (`BATON_MODEL_PRICES`, read by `readModelPrices` in
 * worker/config.ts): a price per million input and output tokens, by provider or provider/model as model limits are
 * keyed. A reply is priced once, by the worker that stored it, and its cost is stored in its usage.
 */
import type { TokenUsage } from '../common/usage';

/** The price of one model's tokens, in US dollars per million. */
export interface ModelPrice {
  readonly inputPerMillion: number;
  readonly outputPerMillion: number;
}

/** Prices by scope: a provider's name (`default` for the default endpoint), or `<provider>/<model>`. */
export type ModelPrices = Readonly<Record<string, ModelPrice>>;

/** The price of `model` at `provider`: the model's own, else its provider's, else none. */
export function priceOf(prices: ModelPrices, provider: string, model: string): ModelPrice | undefined {
  return prices[`${provider}/${model}`] ?? prices[provider];
}

/** `usage` with what it cost at `price` (to the millionth of a dollar, rounded up so a budget never under-counts). */
export function pricedUsage(usage: TokenUsage, price: ModelPrice | undefined): TokenUsage {
  if (price === undefined) return usage;
  const cost = (usage.promptTokens * price.inputPerMillion + usage.completionTokens * price.outputPerMillion) / 1e6;
  // Rounded to a billionth first, so float error (2500.0000000003 micro-dollars) does not round a whole one up.
  return { ...usage, costUsd: Math.ceil(Math.round(cost * 1e9) / 1e3) / 1e6 };
}
