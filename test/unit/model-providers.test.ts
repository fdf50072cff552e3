import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { APIError } from 'openai';
import { classifyModelError, movesToNextModelAtOnce } from '../../activities/model-errors';
import { checkProviderNames, modelEndpointsFor, routeModel } from '../../activities/model-providers';
import { modelChain } from '../../common/agent-definition';
import { ConfigError, readModelLimits, readModelPrices, readProviders, readWorkerConfig } from '../../worker/config';
import { priceOf, pricedUsage } from '../../activities/model-prices';
import { addUsage, ZERO_USAGE } from '../../common/usage';
import { limitedScopes } from '../../activities/model-limits';
import { AgentConfigError, loadAgents, parseAgentFile } from '../../worker/agents';
import { createModelClient, createProviderClients, describeModelRoutes } from '../../worker/model-client';

const minimal = {
  TEMPORAL_ADDRESS: '127.0.0.1:7233',
  DATABASE_URL: 'postgres://baton@127.0.0.1:5432/baton',
  OPENAI_API_KEY: 'sk-test',
};

const LOCAL = { base_url: 'http://127.0.0.1:11434/v1', api_key_env: 'LOCAL_API_KEY' };

/** The problems readProviders reports for BATON_PROVIDERS `json` (and any other variables). */
function problemsOf(json: string, env: Record<string, string> = {}): string[] {
  try {
    readProviders({ BATON_PROVIDERS: json, ...env });
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.problems;
  }
  assert.fail(`BATON_PROVIDERS ${json} was accepted`);
}

test('providers config: BATON_PROVIDERS names endpoints and the variables holding their keys', () => {
  const config = readWorkerConfig({
    ...minimal,
    BATON_PROVIDERS: JSON.stringify({
      local: LOCAL,
      hosted: { base_url: 'https://api.example.com/v1', api_key_env: 'HOSTED_KEY' },
    }),
    LOCAL_API_KEY: 'unused',
    HOSTED_KEY: 'sk-hosted',
  });
  assert.deepEqual(config.providers, [
    { name: 'local', baseURL: 'http://127.0.0.1:11434/v1', apiKeyEnv: 'LOCAL_API_KEY', apiKey: 'unused' },
    { name: 'hosted', baseURL: 'https://api.example.com/v1', apiKeyEnv: 'HOSTED_KEY', apiKey: 'sk-hosted' },
  ]);
  assert.ok(Object.isFrozen(config.providers) && Object.isFrozen(config.providers[0]));
  // The plain model keeps OPENAI_BASE_URL, OPENAI_API_KEY and BATON_MODEL.
  assert.deepEqual(config.model, { baseURL: undefined, apiKey: 'sk-test', model: 'gpt-4o-mini' });
});

test('providers config: unset, empty or {} means no providers', () => {
  assert.deepEqual(readWorkerConfig(minimal).providers, []);
  assert.deepEqual(readProviders({ BATON_PROVIDERS: '  ' }), []);
  assert.deepEqual(readProviders({ BATON_PROVIDERS: '{}' }), []);
});

test('providers config: bad JSON, or JSON that is not an object of providers, is named with an example', () => {
  assert.deepEqual(problemsOf('{"local": {"base_url": "http://x"'), [
    `BATON_PROVIDERS is not valid JSON (${jsonError('{"local": {"base_url": "http://x"')}); write it as ` +
      '{"local": {"base_url": "http://127.0.0.1:11434/v1", "api_key_env": "LOCAL_API_KEY"}}',
  ]);
  for (const json of ['[]', '"local"', 'null', '3']) {
    assert.match(problemsOf(json)[0] ?? '', /^BATON_PROVIDERS must be a JSON object of providers by name, e\.g\. \{/);
  }
});

function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return (error as Error).message;
  }
  return '';
}

test('providers config: a provider defined twice, or a field set twice, is refused (JSON.parse would keep the last)', () => {
  const env = { LOCAL_API_KEY: 'k' };
  assert.deepEqual(problemsOf(`{"local": ${JSON.stringify(LOCAL)}, "local": ${JSON.stringify(LOCAL)}}`, env), [
    "BATON_PROVIDERS defines provider 'local' twice",
  ]);
  assert.deepEqual(
    problemsOf(
      '{"local": {"base_url": "http://a/v1", "base_url": "http://b/v1", "api_key_env": "LOCAL_API_KEY"}}',
      env,
    ),
    ["BATON_PROVIDERS provider 'local': sets base_url twice"],
  );
});

test('providers config: bad names, and the reserved name default, are refused', () => {
  const env = { LOCAL_API_KEY: 'k' };
  for (const name of ['Local', 'my/local', '1local', '', 'x'.repeat(33)]) {
    assert.deepEqual(problemsOf(JSON.stringify({ [name]: LOCAL }), env), [
      `BATON_PROVIDERS provider name '${name}' must be a lowercase letter followed by lowercase letters, digits, '_' or '-' (at most 32 characters)`,
    ]);
  }
  assert.deepEqual(problemsOf(JSON.stringify({ default: LOCAL }), env), [
    "BATON_PROVIDERS names a provider 'default': that name is the default endpoint (OPENAI_BASE_URL)",
  ]);
  assert.deepEqual(
    readProviders({ BATON_PROVIDERS: JSON.stringify({ 'my-local_2': LOCAL }), ...env })[0]?.name,
    'my-local_2',
  );
});

test('providers config: a bad URL, a missing or unknown field, or a provider that is not an object is named', () => {
  const env = { LOCAL_API_KEY: 'k' };
  const one = (provider: unknown) => problemsOf(JSON.stringify({ local: provider }), env);
  assert.deepEqual(one({ ...LOCAL, base_url: 'ftp://127.0.0.1/v1' }), [
    `BATON_PROVIDERS provider 'local': base_url must be an http(s) URL (got "ftp://127.0.0.1/v1")`,
  ]);
  assert.deepEqual(one({ ...LOCAL, base_url: '127.0.0.1:11434' }), [
    `BATON_PROVIDERS provider 'local': base_url must be an http(s) URL (got "127.0.0.1:11434")`,
  ]);
  assert.deepEqual(one({ api_key_env: 'LOCAL_API_KEY' }), [
    "BATON_PROVIDERS provider 'local': base_url is required (an http(s) URL)",
  ]);
  assert.deepEqual(one({ base_url: LOCAL.base_url }), [
    "BATON_PROVIDERS provider 'local': api_key_env is required (the name of the variable holding the API key; any value for an endpoint that takes none)",
  ]);
  assert.deepEqual(one({ ...LOCAL, api_key_env: 'sk-12345' }), [
    "BATON_PROVIDERS provider 'local': api_key_env must be the name of an environment variable (letters, digits, _)",
  ]);
  assert.deepEqual(one({ ...LOCAL, baseurl: 'http://x' }), [
    "BATON_PROVIDERS provider 'local': unknown field 'baseurl' (fields: base_url, api_key_env)",
  ]);
  assert.deepEqual(one('http://127.0.0.1:11434/v1'), [
    `BATON_PROVIDERS provider 'local' must be an object {"base_url": …, "api_key_env": …}`,
  ]);
});

test('providers config: a key variable that is not set (or empty) stops start-up, naming the variable', () => {
  assert.deepEqual(problemsOf(JSON.stringify({ local: LOCAL })), [
    "BATON_PROVIDERS provider 'local': its API key variable LOCAL_API_KEY is not set",
  ]);
  assert.deepEqual(problemsOf(JSON.stringify({ local: LOCAL }), { LOCAL_API_KEY: ' ' }), [
    "BATON_PROVIDERS provider 'local': its API key variable LOCAL_API_KEY is not set",
  ]);
  assert.throws(
    () => readWorkerConfig({ ...minimal, BATON_PROVIDERS: JSON.stringify({ local: LOCAL }) }),
    /invalid configuration:\n {2}- BATON_PROVIDERS provider 'local': its API key variable LOCAL_API_KEY is not set/,
  );
});

test('providers config: every problem of every provider is named at once', () => {
  assert.deepEqual(
    problemsOf(JSON.stringify({ Bad: LOCAL, local: { base_url: 'nope' }, other: LOCAL }), { LOCAL_API_KEY: 'k' }),
    [
      "BATON_PROVIDERS provider name 'Bad' must be a lowercase letter followed by lowercase letters, digits, '_' or '-' (at most 32 characters)",
      `BATON_PROVIDERS provider 'local': base_url must be an http(s) URL (got "nope")`,
      "BATON_PROVIDERS provider 'local': api_key_env is required (the name of the variable holding the API key; any value for an endpoint that takes none)",
    ],
  );
});

test('model routing: provider/model names a provider; a plain name, none, default/…, or any name without providers is the default endpoint', () => {
  const providers = ['local', 'hosted'];
  assert.deepEqual(routeModel(undefined, providers), { route: { provider: 'default', model: undefined } });
  assert.deepEqual(routeModel('gpt-4o', providers), { route: { provider: 'default', model: 'gpt-4o' } });
  assert.deepEqual(routeModel('local/llama3.1:8b', providers), { route: { provider: 'local', model: 'llama3.1:8b' } });
  assert.deepEqual(routeModel('hosted/meta-llama/Llama-3-70b', providers), {
    route: { provider: 'hosted', model: 'meta-llama/Llama-3-70b' },
  });
  assert.deepEqual(routeModel('default/openai/gpt-4o', []), { route: { provider: 'default', model: 'openai/gpt-4o' } });
  assert.deepEqual(routeModel('lcoal/llama3', providers), {
    problem:
      "model 'lcoal/llama3' names provider 'lcoal', which is not configured (providers: local, hosted); to send a name with '/' to the default endpoint as it is, write 'default/lcoal/llama3'",
  });
  // Without providers there is nothing to misspell: a gateway's name goes to the default endpoint as it is.
  assert.deepEqual(routeModel('openai/gpt-4o', []), { route: { provider: 'default', model: 'openai/gpt-4o' } });
  assert.deepEqual(routeModel('local/ ', providers), { problem: "model 'local/ ' names no model after 'local/'" });
});

test('model routing: an agent file naming an unknown provider stops loading at the line of its model', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-providers-'));
  fs.writeFileSync(path.join(dir, 'lead.md'), '---\nname: lead\ndescription: Leads.\n---\nLead.\n');
  fs.writeFileSync(
    path.join(dir, 'worker.md'),
    '---\nname: worker\ndescription: Works.\nmodel: lcoal/llama3\n---\nWork.\n',
  );
  assert.throws(
    () => loadAgents(dir, { toolNames: [], providers: ['local'] }),
    (error: unknown) =>
      error instanceof AgentConfigError &&
      error.message ===
        `${path.join(dir, 'worker.md')}:4: model 'lcoal/llama3' names provider 'lcoal', which is not configured (providers: local); to send a name with '/' to the default endpoint as it is, write 'default/lcoal/llama3'`,
  );
  fs.writeFileSync(
    path.join(dir, 'worker.md'),
    '---\nname: worker\ndescription: Works.\nmodel: local/llama3\n---\nWork.\n',
  );
  assert.equal(loadAgents(dir, { toolNames: [], providers: ['local'] }).get('worker')?.model, 'local/llama3');
});

test('model routing: the start-up line says which agent goes to which endpoint', () => {
  const agent = (name: string, model?: string) =>
    parseAgentFile(
      `---\nname: ${name}\ndescription: The ${name}.\n${model ? `model: ${model}\n` : ''}---\n`,
      `${name}.md`,
    );
  const agents = new Map(
    [agent('lead'), agent('solver', 'local/llama3.1'), agent('observer', 'local/llama3.1')].map((a) => [a.name, a]),
  );
  const providers = createProviderClients([
    { name: 'local', baseURL: 'http://127.0.0.1:11434/v1', apiKeyEnv: 'LOCAL_API_KEY', apiKey: 'unused' },
  ]);
  const openai = createModelClient({ baseURL: 'https://api.example.com/v1', apiKey: 'k' });
  assert.equal(
    describeModelRoutes(agents, { openai, model: 'gpt-4o' }, providers),
    'models: lead → default gpt-4o (https://api.example.com/v1); solver, observer → local llama3.1 (http://127.0.0.1:11434/v1)',
  );
});

test('model fallback: a list of models is a chain, each routed and checked like one model', () => {
  const parse = (model: string) =>
    parseAgentFile(`---\nname: chained\ndescription: Falls back.\nmodel: ${model}\n---\nAct.\n`, 'chained.md');
  const chained = parse('[hosted/big-1, local/llama3, small-1]');
  assert.deepEqual(modelChain(chained), ['hosted/big-1', 'local/llama3', 'small-1']);
  assert.deepEqual(modelChain(parse('hosted/big-1')), ['hosted/big-1']);
  assert.deepEqual(modelChain({}), [undefined]);
  const hosted = createModelClient({ baseURL: 'http://127.0.0.1:1/v1', apiKey: 'k' });
  const local = createModelClient({ baseURL: 'http://127.0.0.1:2/v1', apiKey: 'k' });
  const openai = createModelClient({ baseURL: 'http://127.0.0.1:3/v1', apiKey: 'k' });
  const endpoints = modelEndpointsFor(chained, { openai, model: 'gpt-4o', providers: { hosted, local } });
  assert.deepEqual(
    endpoints.map(({ provider, model, openai: client }) => [provider, model, client.baseURL]),
    [
      ['hosted', 'big-1', 'http://127.0.0.1:1/v1'],
      ['local', 'llama3', 'http://127.0.0.1:2/v1'],
      ['default', 'small-1', 'http://127.0.0.1:3/v1'],
    ],
  );
  // A stored agent version naming a provider this worker lacks fails the call, whichever link of the chain it is.
  assert.throws(
    () => modelEndpointsFor(chained, { openai, model: 'gpt-4o', providers: { hosted } }),
    (error: unknown) => error instanceof ApplicationFailure && error.type === 'Model.UnknownProvider',
  );
  for (const [bad, problem] of [
    ['[]', /must list at least one model/],
    ['[a, b, c, d, e, f]', /must list at most 5 models/],
    ['[a, 3]', /must list model names, each a non-empty text/],
    ['{ a: 1 }', /must be a model name or a list of model names/],
  ] as const) {
    assert.throws(() => parse(bad), problem, `model: ${bad}`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-chain-'));
  fs.writeFileSync(
    path.join(dir, 'chained.md'),
    '---\nname: chained\ndescription: Falls back.\nmodel: [local/llama3, lcoal/llama3]\n---\nAct.\n',
  );
  assert.throws(
    () => loadAgents(dir, { toolNames: [], providers: ['local'] }),
    /chained\.md:4: model 'lcoal\/llama3' names provider 'lcoal', which is not configured/,
  );
  const agents = new Map([[chained.name, chained]]);
  assert.equal(
    describeModelRoutes(agents, { openai, model: 'gpt-4o' }, { hosted, local }),
    'models: chained → hosted big-1 (http://127.0.0.1:1/v1), then local llama3 (http://127.0.0.1:2/v1), then default small-1 (http://127.0.0.1:3/v1)',
  );
});

test('model fallback: a refused key or an unknown model moves to the next model at once; nothing else does', () => {
  const failureOf = (status: number) =>
    classifyModelError(APIError.generate(status, { error: { message: `status ${status}` } }, undefined, new Headers()));
  for (const status of [401, 403, 404]) assert.equal(movesToNextModelAtOnce(failureOf(status)), true, `${status}`);
  for (const status of [400, 408, 409, 422, 429, 500, 503]) {
    assert.equal(movesToNextModelAtOnce(failureOf(status)), false, `${status}`);
  }
  assert.equal(movesToNextModelAtOnce(new Error('not a model failure')), false);
});

test('model routing: providers given in code follow the same names', () => {
  const client = createModelClient({ baseURL: 'http://127.0.0.1:1/v1', apiKey: 'k' });
  assert.doesNotThrow(() => checkProviderNames({ local: client }));
  assert.throws(
    () => checkProviderNames({ default: client }),
    /provider 'default' is reserved for the default endpoint/,
  );
  assert.throws(
    () => checkProviderNames({ 'My Local': client }),
    /provider name 'My Local' must be a lowercase letter/,
  );
});

test("model clients: the openai client's own retries are off, for the default endpoint and every provider", () => {
  // Temporal's retry policy owns retries (invariant 7): a client retrying by itself would hide failures from it.
  const openai = createModelClient({ baseURL: 'http://127.0.0.1:1/v1', apiKey: 'k' });
  const providers = createProviderClients([
    { name: 'local', baseURL: 'http://127.0.0.1:2/v1', apiKeyEnv: 'LOCAL_API_KEY', apiKey: 'unused' },
  ]);
  assert.equal(openai.maxRetries, 0);
  assert.equal(providers.local?.maxRetries, 0);
});

test('model limits: BATON_MODEL_LIMITS sets limits by provider or provider/model; a call is limited by both', () => {
  const providers = [{ name: 'local' }];
  assert.deepEqual(readModelLimits({}, providers), {});
  const limits = readModelLimits(
    {
      BATON_MODEL_LIMITS:
        '{"default": {"requests_per_minute": 60, "concurrent": 4}, "local/llama3.1:8b": {"tokens_per_minute": 1000}}',
    },
    providers,
  );
  assert.deepEqual(limits, {
    default: { requestsPerMinute: 60, concurrent: 4 },
    'local/llama3.1:8b': { tokensPerMinute: 1000 },
  });
  assert.deepEqual(limitedScopes(limits, 'default', 'gpt-4o'), [
    { scope: 'default', limit: { requestsPerMinute: 60, concurrent: 4 } },
  ]);
  assert.deepEqual(limitedScopes(limits, 'local', 'llama3.1:8b'), [
    { scope: 'local/llama3.1:8b', limit: { tokensPerMinute: 1000 } },
  ]);
  assert.deepEqual(limitedScopes(limits, 'local', 'other'), []);
  // The worker's configuration reads it against its providers.
  const config = readWorkerConfig({ ...minimal, BATON_MODEL_LIMITS: '{"default": {"concurrent": 2}}' }, process.cwd());
  assert.deepEqual(config.modelLimits, { default: { concurrent: 2 } });
});

test('model limits: bad JSON, an unknown provider, an unknown field, a bad number or no limit at all is named', () => {
  const problems = (json: string): string[] => {
    try {
      readModelLimits({ BATON_MODEL_LIMITS: json }, [{ name: 'local' }]);
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      return error.problems;
    }
    assert.fail(`BATON_MODEL_LIMITS ${json} was accepted`);
  };
  assert.match(problems('{').join('\n'), /BATON_MODEL_LIMITS is not valid JSON/);
  assert.match(problems('[]').join('\n'), /must be a JSON object of limits by provider or provider\/model/);
  assert.deepEqual(problems('{"hosted": {"concurrent": 1}, "local/": {"concurrent": 1}}'), [
    "BATON_MODEL_LIMITS 'hosted' names no configured provider: write a provider (default, local) or <provider>/<model>",
    "BATON_MODEL_LIMITS 'local/' names no configured provider: write a provider (default, local) or <provider>/<model>",
  ]);
  assert.deepEqual(problems('{"local": {"rpm": 1}}'), [
    "BATON_MODEL_LIMITS 'local': unknown field 'rpm' (fields: requests_per_minute, tokens_per_minute, concurrent)",
    "BATON_MODEL_LIMITS 'local' sets no limit (requests_per_minute, tokens_per_minute, concurrent)",
  ]);
  assert.deepEqual(problems('{"local": {"concurrent": 0}}'), [
    "BATON_MODEL_LIMITS 'local': concurrent must be a whole number from 1",
  ]);
  assert.deepEqual(problems('{"default": {}}'), [
    "BATON_MODEL_LIMITS 'default' sets no limit (requests_per_minute, tokens_per_minute, concurrent)",
  ]);
});

test('model prices: BATON_MODEL_PRICES by provider or provider/model, the model winning; a reply priced once', () => {
  const providers = [{ name: 'local' }];
  assert.deepEqual(readModelPrices({}, providers), {});
  const prices = readModelPrices(
    {
      BATON_MODEL_PRICES:
        '{"default": {"input_per_million": 1, "output_per_million": 2}, "default/gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}, "local": {"input_per_million": 0, "output_per_million": 0}}',
    },
    providers,
  );
  assert.deepEqual(priceOf(prices, 'default', 'gpt-4o'), { inputPerMillion: 2.5, outputPerMillion: 10 });
  assert.deepEqual(priceOf(prices, 'default', 'gpt-4o-mini'), { inputPerMillion: 1, outputPerMillion: 2 });
  assert.equal(
    priceOf(
      readModelPrices(
        { BATON_MODEL_PRICES: '{"local": {"input_per_million": 0, "output_per_million": 0}}' },
        providers,
      ),
      'default',
      'x',
    ),
    undefined,
  );
  const usage = { promptTokens: 1000, completionTokens: 100, totalTokens: 1100 };
  // 1000 × 2.5 / 1e6 + 100 × 10 / 1e6 = 0.0035: exact; 7 × 1 / 1e6 + 1 × 2 / 1e6 = 0.000009.
  assert.deepEqual(pricedUsage(usage, priceOf(prices, 'default', 'gpt-4o')), { ...usage, costUsd: 0.0035 });
  assert.equal(pricedUsage({ promptTokens: 7, completionTokens: 1, totalTokens: 8 }, prices.default).costUsd, 0.000009);
  // A third of a millionth is rounded up: a budget never counts less than was spent.
  assert.equal(
    pricedUsage({ promptTokens: 1, completionTokens: 0, totalTokens: 1 }, { inputPerMillion: 0.3, outputPerMillion: 0 })
      .costUsd,
    0.000001,
  );
  assert.deepEqual(pricedUsage(usage, undefined), usage, 'no price, no cost');
  assert.deepEqual(pricedUsage(usage, prices.local), { ...usage, costUsd: 0 });
  // Summed in millionths: ten calls of 0.000001 are 0.00001 exactly.
  let sum = { ...ZERO_USAGE };
  for (let index = 0; index < 10; index += 1) sum = addUsage(sum, { ...usage, costUsd: 0.000001 });
  assert.equal(sum.costUsd, 0.00001);
  assert.equal(addUsage(ZERO_USAGE, usage).costUsd, undefined, 'unpriced calls sum to no cost');
  const config = readWorkerConfig(
    { ...minimal, BATON_MODEL_PRICES: '{"default": {"input_per_million": 1, "output_per_million": 2}}' },
    process.cwd(),
  );
  assert.deepEqual(config.modelPrices, { default: { inputPerMillion: 1, outputPerMillion: 2 } });
});

test('model prices: an unknown provider, a missing, negative or unknown field is named', () => {
  const problems = (json: string): string[] => {
    try {
      readModelPrices({ BATON_MODEL_PRICES: json }, [{ name: 'local' }]);
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      return error.problems;
    }
    assert.fail(`BATON_MODEL_PRICES ${json} was accepted`);
  };
  assert.match(problems('{').join('\n'), /BATON_MODEL_PRICES is not valid JSON/);
  assert.deepEqual(problems('{"hosted": {"input_per_million": 1, "output_per_million": 1}}'), [
    "BATON_MODEL_PRICES 'hosted' names no configured provider: write a provider (default, local) or <provider>/<model>",
  ]);
  const [missing] = problems('{"local": {"input_per_million": 1}}');
  assert.match(
    missing ?? '',
    /^BATON_MODEL_PRICES 'local' must be \{"input_per_million": <dollars>, "output_per_million": <dollars>\}, each from 0 \(output_per_million\)$/,
  );
  const [negative] = problems('{"default/x": {"input_per_million": -1, "output_per_million": 1}}');
  assert.match(negative ?? '', /'default\/x' must be .* \(input_per_million\)$/);
  const [unknownField] = problems('{"local": {"input_per_million": 1, "output_per_million": 1, "cached": 0}}');
  assert.match(unknownField ?? '', /'local' must be .*Unrecognized key/);
});
