import OpenAI from 'openai';
import type { ModelConfig } from './config';

/**
 * The `openai` client as Baton uses it: its own retries off (Temporal's retry policy owns retries,
 * docs/architecture.md §4, invariant 7) and a request timeout below the model activity's start-to-close timeout.
 */
export function createModelClient(config: ModelConfig): OpenAI {
  return new OpenAI({
    apiKey: config.apiKey,
    ...(config.baseURL ? { baseURL: config.baseURL } : {}),
    maxRetries: 0,
    timeout: 9 * 60 * 1000,
  });
}
