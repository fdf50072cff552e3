/**
 * Several model endpoints: an agent's `model` may be `provider/model`, where each provider is an OpenAI-compatible
 * endpoint the worker was configured with; a plain `model` (or none) goes to the default endpoint.
 */
import { ApplicationFailure } from '@temporalio/common';
import type OpenAI from 'openai';
import { modelChain, type AgentDefinition } from '../common/agent-definition';
import { ErrorType } from '../common/errors';

/**
 * The name of the default endpoint (the worker's `openai` client: `OPENAI_BASE_URL`, or the scripted model). A plain
 * `model` goes there, and so does `default/<name>`, which sends `<name>` as it is (a gateway's `openai/gpt-4o`).
 */
export const DEFAULT_PROVIDER = 'default';

/** A provider's name: a lowercase letter, then lowercase letters, digits, `_` or `-`; at most 32 characters. */
export const PROVIDER_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;

/** The rule of {@link PROVIDER_NAME_PATTERN} in words, for error messages. */
export const PROVIDER_NAME_RULE =
  "must be a lowercase letter followed by lowercase letters, digits, '_' or '-' (at most 32 characters)";

/**
 * The endpoints besides the default one, by provider name: one `openai` client each, built once with `maxRetries: 0`
 * (Temporal's retry policy owns retries; see `createModelClient`).
 */
export type ModelProviders = Readonly<Record<string, OpenAI>>;

/** Where an agent's model calls go. */
export interface ModelRoute {
  /** A configured provider's name, or {@link DEFAULT_PROVIDER}. */
  readonly provider: string;
  /** The model name sent to that endpoint; `undefined` means the worker's default model (`BATON_MODEL`). */
  readonly model: string | undefined;
}

/**
 * Splits an agent's `model` into the endpoint and the name sent there. Once providers are configured, a name with `/`
 * names one (the part before the first `/`), so a misspelt provider is refused instead of reaching the default
 * endpoint unnoticed. Without providers there is nothing to misspell: the name goes to the default endpoint as it is,
 * as it did before providers existed (a gateway's `openai/gpt-4o` keeps working).
 * @param providers the configured provider names (without {@link DEFAULT_PROVIDER})
 * @returns the route, or the reason the name routes nowhere
 */
export function routeModel(
  model: string | undefined,
  providers: readonly string[],
): { readonly route: ModelRoute } | { readonly problem: string } {
  if (model === undefined) return { route: { provider: DEFAULT_PROVIDER, model: undefined } };
  const slash = model.indexOf('/');
  if (slash < 0) return { route: { provider: DEFAULT_PROVIDER, model } };
  const provider = model.slice(0, slash);
  if (provider !== DEFAULT_PROVIDER && providers.length === 0) return { route: { provider: DEFAULT_PROVIDER, model } };
  const name = model.slice(slash + 1).trim();
  if (name === '') return { problem: `model '${model}' names no model after '${provider}/'` };
  if (provider === DEFAULT_PROVIDER || providers.includes(provider)) return { route: { provider, model: name } };
  return {
    problem:
      `model '${model}' names provider '${provider}', which is not configured (providers: ${providers.join(', ')}); ` +
      `to send a name with '/' to the default endpoint as it is, write 'default/${model}'`,
  };
}

/**
 * Where one model call goes: the provider (for the `x-baton-provider` header and the stored reply), its client, and
 * the model name sent.
 */
export interface ModelEndpoint {
  readonly provider: string;
  readonly openai: OpenAI;
  readonly model: string;
}

/**
 * The endpoints of an agent's model calls, in the order a call tries them (one, or its fallback chain): each
 * provider's client and the model name without the provider prefix. Agents are checked when they load; an agent
 * version stored by a worker with other providers fails here.
 * @param endpoints the default client and model name, and the providers' clients
 * @throws ApplicationFailure `Model.UnknownProvider`, non-retryable
 */
export function modelEndpointsFor(
  agent: Pick<AgentDefinition, 'name' | 'model'>,
  endpoints: { readonly openai: OpenAI; readonly model: string; readonly providers?: ModelProviders | undefined },
): ModelEndpoint[] {
  const providers = endpoints.providers ?? {};
  return modelChain(agent).map((name) => {
    const routed = routeModel(name, Object.keys(providers));
    if ('problem' in routed) {
      throw ApplicationFailure.create({
        type: ErrorType.ModelUnknownProvider,
        message: `agent '${agent.name}' on this worker: ${routed.problem}`,
        nonRetryable: true,
      });
    }
    const { provider, model } = routed.route;
    const openai = provider === DEFAULT_PROVIDER ? endpoints.openai : providers[provider];
    // routeModel returns only the names it was given, each with its client.
    if (openai === undefined) throw new Error(`no client for provider '${provider}'`);
    return { provider, openai, model: model ?? endpoints.model };
  });
}

/**
 * Checks a set of providers given in code (`createBatonWorker({ providers })`): names as `BATON_PROVIDERS` takes them.
 * @throws Error naming the bad provider
 */
export function checkProviderNames(providers: ModelProviders): void {
  for (const name of Object.keys(providers)) {
    if (name === DEFAULT_PROVIDER) {
      throw new Error(`provider '${name}' is reserved for the default endpoint (the worker's own openai client)`);
    }
    if (!PROVIDER_NAME_PATTERN.test(name)) throw new Error(`provider name '${name}' ${PROVIDER_NAME_RULE}`);
  }
}
