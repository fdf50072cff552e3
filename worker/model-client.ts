import OpenAI from 'openai';
import { DEFAULT_PROVIDER, routeModel, type ModelProviders } from '../activities/model-providers';
import { modelChain, type AgentRegistry } from '../common/agent-definition';
import type { ModelConfig, ProviderConfig } from './config';
import { modelFetch } from './model-fetch';

/**
 * The `openai` client as Baton uses it: its own retries off (Temporal's retry policy owns retries,
 * docs/architecture.md §4, invariant 7) and a request timeout below the model activity's start-to-close timeout.
 * Only the endpoint and the key are read: each request names its model. Requests go through `modelFetch`
 * (`node:http` over keep-alive connections), which costs less CPU per request than the global `fetch`.
 */
export function createModelClient(config: Pick<ModelConfig, 'baseURL' | 'apiKey'> & Partial<ModelConfig>): OpenAI {
  return new OpenAI({
    apiKey: config.apiKey,
    ...(config.baseURL ? { baseURL: config.baseURL } : {}),
    maxRetries: 0,
    timeout: 9 * 60 * 1000,
    fetch: modelFetch,
  });
}

/** One client per configured provider, built once at worker start like the default one. */
export function createProviderClients(providers: readonly ProviderConfig[]): ModelProviders {
  return Object.fromEntries(providers.map((provider) => [provider.name, createModelClient(provider)]));
}

/**
 * Which agent goes to which endpoint, one line (`baton worker` and `baton dev` print it at start and on reload):
 * `models: coordinator → default gpt-4o (https://…); solver, observer → local llama3.1 (http://127.0.0.1:11434/v1)`.
 * Agents are checked against the providers when they load, so every one routes somewhere.
 */
export function describeModelRoutes(
  agents: AgentRegistry,
  defaults: { readonly openai: OpenAI; readonly model: string },
  providers: ModelProviders,
): string {
  const groups = new Map<string, string[]>();
  for (const agent of agents.values()) {
    const chain = modelChain(agent).flatMap((name) => {
      const routed = routeModel(name, Object.keys(providers));
      if (!('route' in routed)) return [];
      const { provider, model } = routed.route;
      const client = provider === DEFAULT_PROVIDER ? defaults.openai : providers[provider];
      return [`${provider} ${model ?? defaults.model} (${client?.baseURL ?? 'not configured'})`];
    });
    if (chain.length === 0) continue;
    // A fallback chain reads in the order its models are tried.
    const endpoint = chain.join(', then ');
    groups.set(endpoint, [...(groups.get(endpoint) ?? []), agent.name]);
  }
  return `models: ${[...groups].map(([endpoint, names]) => `${names.join(', ')} → ${endpoint}`).join('; ')}`;
}
