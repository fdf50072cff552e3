/**
 * Every process environment variable Baton reads, once: who reads it, what it means and its default. Production
 * variables and those only our tests set are kept apart. The reference page (`docs/reference/environment.md`, written
 * by `npm run docs`) is generated from here; `test/unit/worker-production-config.test.ts` checks that the sources read
 * exactly these variables, and that what `baton worker` and `baton setup` read is what their zod schemas
 * (worker/config.ts) hold. Pure data.
 */
import type { setupEnvSchema, workerEnvSchema } from './config';

/** What reads a variable. */
export type EnvReader =
  | 'worker' // `baton worker` and `runWorkerFromEnv` (workerEnvSchema)
  | 'setup' // `baton setup` (setupEnvSchema)
  | 'dev' // `baton dev`: the local stack with its own worker
  | 'demo' // `baton demo`: the same local stack, with the example agents
  | 'CLI' // the other `baton` commands (`explorer` and `mcp serve` among them)
  | 'SDK' // `connect()` with no options, and `findConnection`
  | 'explorer' // `baton explorer`
  | 'mcp serve' // `baton mcp serve`
  | 'tests' // `npm test` and the test files
  | 'bench'; // `npm run bench`

/** The sections of the reference page, in order. */
export const ENV_TOPICS = [
  'Connections',
  'The worker',
  'Traces',
  'Models',
  'Tools and the shell',
  'Approvals and access',
  'The CLI and the local stack',
  'Tests',
] as const;
export type EnvTopic = (typeof ENV_TOPICS)[number];

/** One environment variable, as the reference page shows it. */
export interface EnvVariable {
  /** The section of the reference page it is listed in. */
  readonly topic: EnvTopic;
  readonly readBy: readonly EnvReader[];
  /** What it does, for a user: one or two sentences. */
  readonly meaning: string;
  /** What holds when it is unset (an empty value counts as unset). */
  readonly default: string;
}

/** Variables a deployment or a developer sets, by name. */
export const PRODUCTION_VARIABLES = {
  DATABASE_URL: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK', 'bench'],
    meaning: "Postgres for Baton's data: a `postgres://` or `postgresql://` URL.",
    default: '`baton dev` starts an embedded Postgres; required for `baton worker` and `baton setup`',
  },
  TEMPORAL_ADDRESS: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The Temporal frontend, `host:port` (`[::1]:7233` for IPv6; no scheme).',
    default: '`baton dev` starts a dev server; the CLI and SDK find it; required for `baton worker`',
  },
  TEMPORAL_NAMESPACE: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The Temporal namespace.',
    default: '`default`',
  },
  TEMPORAL_API_KEY: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'A Temporal Cloud API key, sent as a bearer token over TLS; turns TLS on.',
    default: 'none',
  },
  TEMPORAL_TLS: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning:
      "`true` (or `1`): TLS with the system's roots and no client certificate; `false`: plaintext, whatever else is set.",
    default: 'on when a certificate, CA, server name or API key is set',
  },
  TEMPORAL_TLS_CLIENT_CERT_PATH: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'A PEM client certificate file for mTLS (with `TEMPORAL_TLS_CLIENT_KEY_PATH`); turns TLS on.',
    default: 'none',
  },
  TEMPORAL_TLS_CLIENT_KEY_PATH: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The private key file of that certificate.',
    default: 'none',
  },
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: "A PEM CA bundle to trust for the server's certificate; turns TLS on.",
    default: "the system's roots",
  },
  TEMPORAL_TLS_CLIENT_CERT_DATA: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The client certificate itself, PEM, instead of a file (a secret passed as a variable).',
    default: 'none',
  },
  TEMPORAL_TLS_CLIENT_KEY_DATA: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'Its private key, PEM, instead of a file.',
    default: 'none',
  },
  TEMPORAL_TLS_SERVER_CA_CERT_DATA: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The CA bundle, PEM, instead of a file.',
    default: "the system's roots",
  },
  TEMPORAL_TLS_SERVER_NAME: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: "The name the server's certificate carries, when it differs from the address; turns TLS on.",
    default: "the address's host",
  },
  TEMPORAL_PROFILE: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning:
      'The `temporal.toml` profile to read (address, namespace, API key, TLS); named, it wins over a running ' +
      '`baton dev` as `TEMPORAL_ADDRESS` does. The CLI takes `--profile` too.',
    default: '`default`, when the file has one',
  },
  TEMPORAL_CONFIG_FILE: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'The `temporal.toml` to read profiles from.',
    default: '`~/.config/temporalio/temporal.toml`, where the Temporal CLI writes it',
  },
  TEMPORAL_TLS_CERT: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'Deprecated name of `TEMPORAL_TLS_CLIENT_CERT_PATH` (still read, with a notice).',
    default: 'none',
  },
  TEMPORAL_TLS_KEY: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'Deprecated name of `TEMPORAL_TLS_CLIENT_KEY_PATH` (still read, with a notice).',
    default: 'none',
  },
  TEMPORAL_TLS_CA: {
    topic: 'Connections',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI', 'SDK'],
    meaning: 'Deprecated name of `TEMPORAL_TLS_SERVER_CA_CERT_PATH` (still read, with a notice).',
    default: 'none',
  },
  BATON_TASK_QUEUE: {
    topic: 'Connections',
    readBy: ['worker', 'CLI', 'SDK'],
    meaning: 'The task queue the workers poll and clients start workflows on.',
    default: '`baton`',
  },
  BATON_NAMESPACE_RETENTION_DAYS: {
    topic: 'Connections',
    readBy: ['setup'],
    meaning:
      "How long Temporal keeps a closed workflow's history in the namespace `baton setup` creates (1 to 3650 " +
      'days; an existing namespace keeps its own).',
    default: '`7`',
  },
  BATON_LOG_LEVEL: {
    topic: 'The worker',
    readBy: ['worker', 'setup', 'dev', 'demo', 'CLI'],
    meaning: "The Temporal SDK's log level: `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.",
    default: '`WARN`',
  },
  BATON_DB_POOL_SIZE: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning:
      "The most Postgres connections one worker process holds (Postgres' `max_connections` must cover workers " +
      'times this).',
    default: '`10`',
  },
  BATON_MAX_CONCURRENT_ACTIVITIES: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: 'Activities (model calls, tools, writes) one worker runs at once.',
    default: '`100`',
  },
  BATON_MAX_CONCURRENT_WORKFLOW_TASKS: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: 'Workflow tasks one worker runs at once (at least 2).',
    default: '`40`',
  },
  BATON_MAX_CACHED_WORKFLOWS: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: "Workflows kept in the worker's sticky cache (each costs memory; a miss replays the history).",
    default: '`1000`',
  },
  BATON_WORKER_IDENTITY: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: "The worker's identity in Temporal (the Web UI, histories).",
    default: '`baton-worker <pid>@<host>`',
  },
  BATON_METRICS_ADDRESS: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: "`host:port` to serve Prometheus metrics on (`/metrics`): the Temporal SDK's and Baton's (`baton_*`).",
    default: 'off',
  },
  BATON_HEALTH_ADDRESS: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: '`host:port` to serve `GET /healthz` on: 200 while the worker polls, 503 otherwise.',
    default: 'off (the log line `baton worker: polling …` says it is up)',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning:
      'Turns tracing on: the OTLP/HTTP endpoint spans are sent to, `/v1/traces` added (`http://localhost:4318` for ' +
      'Jaeger or a Collector); for `baton worker` metrics too, `/v1/metrics` added, unless `BATON_METRICS_ADDRESS` is set.',
    default: 'off: no span is made or sent',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'The full traces URL instead (used as it is, e.g. `https://…/v1/traces`); turns tracing on too.',
    default: '`OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'Only `http/protobuf` is spoken; any other value stops start-up saying so.',
    default: '`http/protobuf`',
  },
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'The same, for traces only.',
    default: '`OTEL_EXPORTER_OTLP_PROTOCOL`',
  },
  OTEL_EXPORTER_OTLP_HEADERS: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'Headers sent with every export, `key=value,…` with URL-encoded values (an API key of a tracing service).',
    default: 'none',
  },
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'More headers for trace exports; a key set in both takes this value.',
    default: 'none',
  },
  OTEL_SERVICE_NAME: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: "The `service.name` of the worker's spans.",
    default: '`baton-worker`',
  },
  OTEL_RESOURCE_ATTRIBUTES: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'More resource attributes, `key=value,…` (`deployment.environment=prod`).',
    default: 'none',
  },
  OTEL_TRACES_SAMPLER: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning:
      'Which traces are kept: `always_on`, `always_off`, `traceidratio`, or `parentbased_` with one of those (a ' +
      "caller's sampled `traceparent` decides for its tree).",
    default: '`parentbased_always_on`',
  },
  OTEL_TRACES_SAMPLER_ARG: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: 'The ratio of the `traceidratio` samplers, from 0 to 1.',
    default: '1',
  },
  OTEL_TRACES_EXPORTER: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: '`none` turns tracing off whatever the endpoint; `otlp` is the only exporter.',
    default: '`otlp`',
  },
  OTEL_SDK_DISABLED: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning: '`true` turns tracing off whatever the endpoint.',
    default: '`false`',
  },
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: {
    topic: 'Traces',
    readBy: ['worker', 'dev'],
    meaning:
      '`true`: model spans carry the messages sent and the reply (`gen_ai.input.messages`, ' +
      '`gen_ai.output.messages`): everything agents and tools read and wrote, so keep it off where that is private.',
    default: '`false`',
  },
  BATON_SHUTDOWN_GRACE_S: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning:
      'Seconds running activities get to finish after SIGTERM or SIGINT before they are cancelled (0 to 3600); ' +
      'the worker then exits 0.',
    default: '`30`',
  },
  BATON_WATCH_SWEEP_SECONDS: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning:
      "Seconds between the worker's watch sweeps, which wake the watchers of shared-data changes no signal told " +
      'them about: such a watcher wakes at most about twice this late.',
    default: '`10`',
  },
  BATON_WORKFLOW_BUNDLE: {
    topic: 'The worker',
    readBy: ['worker', 'dev', 'demo'],
    meaning:
      'A workflow bundle written by `baton bundle <file>` (the image sets it): no webpack at start, and about ' +
      '120 MB less memory.',
    default: 'bundled at start-up (seconds, and the memory stays)',
  },
  BATON_AGENTS_DIR: {
    topic: 'The worker',
    readBy: ['worker'],
    meaning: 'The directory of agent files.',
    default: '`agents`',
  },
  OPENAI_API_KEY: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'The key for the model endpoint; `baton dev` and `baton demo` run the scripted model without it.',
    default: 'none (required for `baton worker`, unless `BATON_MODEL_SCRIPT` is set)',
  },
  OPENAI_BASE_URL: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'An OpenAI-compatible endpoint.',
    default: 'the OpenAI API',
  },
  BATON_MODEL: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'The model name agents use when they name none.',
    default: '`gpt-4o-mini`',
  },
  BATON_MODEL_SCRIPT: {
    topic: 'Models',
    readBy: ['worker'],
    meaning: 'Answer from this scripted-model script when `OPENAI_API_KEY` is unset (`docker-compose.yml` sets it).',
    default: 'off',
  },
  BATON_MODEL_LOG: {
    topic: 'Models',
    readBy: ['dev', 'demo'],
    meaning: 'The scripted model appends every request it receives to this file, one JSON line each.',
    default: 'off',
  },
  BATON_MODEL_STREAM: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning:
      '`on`: model calls ask for streamed replies, publish the text as it comes to the run feed (`delta` events) ' +
      'and store the assembled reply; `off`: whole replies.',
    default: '`off` for `baton worker`; `on` for `baton dev` and the demo',
  },
  BATON_PROVIDERS: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'More model endpoints, which agents name as `provider/model` (JSON; see the models guide).',
    default: 'none',
  },
  BATON_MODEL_LIMITS: {
    topic: 'Models',
    readBy: ['worker', 'dev'],
    meaning:
      'Limits on model calls that every worker of the task queue shares, by provider (`default` for the default ' +
      'endpoint) or `provider/model`: `requests_per_minute`, `tokens_per_minute`, `concurrent` (JSON; see the models guide).',
    default: 'none',
  },
  BATON_MODEL_PRICES: {
    topic: 'Models',
    readBy: ['worker', 'dev'],
    meaning:
      'What model calls cost, for budgets in dollars, by provider (`default` for the default endpoint) or ' +
      '`provider/model`: `input_per_million`, `output_per_million` in US dollars (JSON; see the budgets guide).',
    default: 'none',
  },
  BATON_STRUCTURED_OUTPUT: {
    topic: 'Models',
    readBy: ['worker', 'dev'],
    meaning:
      "Providers (`default` for the default endpoint), comma-separated, whose endpoints take `response_format: json_schema`: a typed agent's calls there ask for its `output` that way; elsewhere through a `final_output` tool (see the typed results guide).",
    default: 'none: the `final_output` tool everywhere',
  },
  BATON_STEPS: {
    topic: 'Models',
    readBy: ['worker', 'dev', 'demo'],
    meaning:
      'Where turns run their steps when neither their agent (`steps`) nor their world (`BATON_STEPS`) says: ' +
      '`activity`, `local` or `batched`.',
    default: '`activity`',
  },
  BATON_TOOLS: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev'],
    meaning:
      'Your tool modules, comma-separated, relative to the working directory (`baton dev --tools FILE` does the ' +
      'same).',
    default: 'none',
  },
  BATON_MCP_CONFIG: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'CLI'],
    meaning:
      'A JSON file of MCP servers whose tools agents call (`baton dev --mcp FILE` does the same; `baton mcp list` ' +
      'reads it too).',
    default: 'none',
  },
  BATON_FILES_ROOT: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning:
      'The directory `read_file` and `list_files` read in a world without `working_directory` (relative to the ' +
      'working directory).',
    default: 'the working directory',
  },
  BATON_ARC_DIR: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'The ARC task files (`<task id>.json`) `load_arc_task` reads (relative to the working directory).',
    default: '`data/arc/training` in the package',
  },
  BATON_ENV_MAX_VALUE_BYTES: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'The largest shared env-data value, as JSON (1 KiB to 16 MiB).',
    default: '`102400` (100 KiB)',
  },
  BATON_SHELL_SANDBOX: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning:
      '`bwrap`: every `shell` command runs in a bubblewrap sandbox; `none`: unsandboxed, with a warning at start ' +
      '(commands can then read everything the worker can).',
    default: '`bwrap`',
  },
  BATON_BWRAP: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning: 'The bubblewrap executable the shell sandbox runs.',
    default: '`bwrap` on the `PATH`',
  },
  BATON_SLIRP4NETNS: {
    topic: 'Tools and the shell',
    readBy: ['worker', 'dev', 'demo'],
    meaning: "The slirp4netns executable that gives `shell` commands egress (never the host's loopback).",
    default: '`slirp4netns` on the `PATH`',
  },
  BATON_DECISION_KEY: {
    topic: 'Approvals and access',
    readBy: ['worker', 'dev', 'demo', 'CLI', 'SDK'],
    meaning:
      "The key approvals' decisions are signed with (at least 32 characters; never printed): workers write no " +
      'decision without its proof, and whatever decides signs with it. Set the same one everywhere.',
    default: "a local stack's `.baton/token`; else decisions are unsigned, with a warning",
  },
  BATON_DECISION_KEY_FILE: {
    topic: 'Approvals and access',
    readBy: ['worker', 'dev', 'demo', 'CLI', 'SDK'],
    meaning:
      "A file holding that key instead (not both); keep it out of `/etc` (shell commands read it), every world's " +
      "directory and the file tools' root.",
    default: 'none',
  },
  BATON_EXPLORER_TOKEN: {
    topic: 'Approvals and access',
    readBy: ['explorer', 'dev', 'demo'],
    meaning:
      'The token every request to the explorer carries (at least 32 characters; never printed); `--token-file` ' +
      'wins.',
    default: '`.baton/token`, made on first use',
  },
  BATON_MCP_TOKEN: {
    topic: 'Approvals and access',
    readBy: ['mcp serve'],
    meaning:
      'The token every request to `baton mcp serve --http` carries (at least 32 characters; never printed); ' +
      '`--token-file` wins.',
    default: '`.baton/token`, made on first use',
  },
  OTEL_METRICS_EXPORTER: {
    topic: 'Traces',
    readBy: ['worker'],
    meaning: '`none` keeps metrics off OTLP whatever the endpoint; `otlp` is the only exporter.',
    default: '`otlp`',
  },
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: {
    topic: 'Traces',
    readBy: ['worker'],
    meaning:
      "The full OTLP/HTTP metrics URL: the worker sends the SDK's and Baton's metrics there, unless " +
      '`BATON_METRICS_ADDRESS` serves them to Prometheus (the runtime has one metrics exporter).',
    default: '`OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/metrics`',
  },
  OTEL_EXPORTER_OTLP_METRICS_HEADERS: {
    topic: 'Traces',
    readBy: ['worker'],
    meaning: 'More headers for metric exports; a key set in both takes this value.',
    default: 'none',
  },
  OTEL_METRIC_EXPORT_INTERVAL: {
    topic: 'Traces',
    readBy: ['worker'],
    meaning: 'Milliseconds between two metric exports over OTLP.',
    default: '60000',
  },
  BATON_TRACE_URL: {
    topic: 'Traces',
    readBy: ['dev', 'demo', 'explorer'],
    meaning:
      "A trace UI's search for one thread's traces, `{rootThreadId}` where its id goes: each thread's page in the " +
      'explorer links to it (Jaeger: `http://localhost:16686/search?service=baton-worker&tags=' +
      '%7B%22baton.root_thread_id%22%3A%22{rootThreadId}%22%7D`). `baton explorer` takes `--trace-url` too.',
    default: 'no link',
  },
  TRACEPARENT: {
    topic: 'Traces',
    readBy: ['CLI'],
    meaning:
      "A W3C `traceparent` that `baton run` and `baton send` continue (a traced worker's spans of the run go under " +
      'it), as OpenTelemetry passes a trace context to a command; `--traceparent` wins.',
    default: 'none',
  },
  TEMPORAL_CLI_PATH: {
    topic: 'The CLI and the local stack',
    readBy: ['dev', 'demo', 'tests'],
    meaning: 'The `temporal` CLI to start the dev server with.',
    default: 'found on the `PATH` or in the cache, else built from source',
  },
  TEMPORAL_UI_URL: {
    topic: 'The CLI and the local stack',
    readBy: ['explorer'],
    meaning: "The Temporal Web UI, for the explorer's links to workflows (`--ui-url` wins).",
    default: "the local stack's, else no links",
  },
  BATON_DEBUG: {
    topic: 'The CLI and the local stack',
    readBy: ['CLI'],
    meaning: "Any value: a failing command also prints the error's stack trace.",
    default: 'off',
  },
  NO_COLOR: {
    topic: 'The CLI and the local stack',
    readBy: ['CLI'],
    meaning: 'Any value: the live tree of `run`, `send` and `watch` is drawn without colours (no-color.org).',
    default: 'colours on a terminal',
  },
  TERM: {
    topic: 'The CLI and the local stack',
    readBy: ['CLI'],
    meaning: '`dumb`: `run`, `send` and `watch` treat the terminal as not one (plain lines, no redrawing).',
    default: 'set by the terminal',
  },
  XDG_CACHE_HOME: {
    topic: 'The CLI and the local stack',
    readBy: ['dev', 'demo', 'tests'],
    meaning:
      'Where the built Temporal CLI, `temporal-server` and `temporal-sql-tool` are cached ' +
      '(`$XDG_CACHE_HOME/baton/`; a relative path is ignored).',
    default: '`~/.cache`',
  },
} as const satisfies Record<string, EnvVariable>;

/** Variables only Baton's own tests, benchmarks and CI set or read, by name. */
export const TEST_VARIABLES = {
  BATON_FAULT_KILL_BEFORE_WATCH_SIGNAL: {
    topic: 'Tests',
    readBy: ['worker'],
    meaning:
      'The worker kills itself after a write of this env-data key commits, before it signals the watchers of the ' +
      'key (the chaos test of watchers).',
    default: 'unset',
  },
  BATON_SCHEDULE_MIN_INTERVAL_S: {
    topic: 'Tests',
    readBy: ['CLI'],
    meaning:
      'The shortest `--every` a schedule may have, in seconds: for tests that need fast schedules (a schedule ' +
      'firing more often than once a minute floods its threads).',
    default: '`60`',
  },
  BATON_TEST_TEMPORAL_ADDRESS: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'Set by `npm test` for the test files: the Temporal server of the stack it booted.',
    default: 'set by `npm test`',
  },
  BATON_TEST_DATABASE_URL: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'Set by `npm test` for the test files: the database of the stack it booted.',
    default: 'set by `npm test`',
  },
  BATON_TEST_WORKFLOW_BUNDLE: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'Set by `npm test` for the test files: the workflow bundle it built once for all of them.',
    default: 'set by `npm test`',
  },
  BATON_TEST_TEMPORAL_CLI: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'Set by `npm test` for the test files: the Temporal CLI, when the stack started one.',
    default: 'set by `npm test`',
  },
  BATON_TEST_STATE_DIR: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'Set by `npm test` for the test files: a scratch directory for the run.',
    default: 'set by `npm test`',
  },
  BATON_TEST_SYSTEM_TOOLS: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning:
      '`install`: `npm test` installs the system tools its files need (bubblewrap, slirp4netns, Chromium, tmux) ' +
      'with `apt-get` when they are missing; `skip`: it installs nothing, and the tests that need them fail.',
    default: '`install`',
  },
  BATON_TEST_ADMIN_URL: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: 'A Postgres server the local-Postgres tests use as an administrator (required under `CI=true`).',
    default: '`postgres://postgres@127.0.0.1:5432/postgres`, skipped when absent',
  },
  BATON_CHROMIUM: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: "The Chromium the explorer's browser tests drive (only this one when set).",
    default: "`/usr/bin/chromium`, then other distributions' paths",
  },
  BATON_README_IMAGES: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning: '`1`: the explorer test also writes `docs/images/explorer-live.png`.',
    default: 'off',
  },
  CI: {
    topic: 'Tests',
    readBy: ['tests'],
    meaning:
      '`1`, `true` or `yes`: tests that skip on a developer machine for want of something (Chromium, a Postgres ' +
      'server) run and fail instead, and `npm test` fails a run with a skipped test it does not allow.',
    default: 'unset (a developer machine)',
  },
} as const satisfies Record<string, EnvVariable>;

export type ProductionVariable = keyof typeof PRODUCTION_VARIABLES;
export type TestVariable = keyof typeof TEST_VARIABLES;

/**
 * What `baton worker` and `baton setup` read that this registry lacks: `never` when every key of their zod schemas
 * is registered, else the missing names, which fail the type check below.
 */
type UnregisteredSchemaVariable = Exclude<
  keyof typeof workerEnvSchema.shape | keyof typeof setupEnvSchema.shape,
  ProductionVariable | TestVariable
>;
const everySchemaVariableRegistered: [UnregisteredSchemaVariable] extends [never] ? true : UnregisteredSchemaVariable =
  true;
void everySchemaVariableRegistered;

/** One registered variable with its name. */
export interface NamedEnvVariable extends EnvVariable {
  readonly name: string;
  /** Set or read only by Baton's own tests. */
  readonly testOnly: boolean;
}

/** Every registered variable, production ones first, each list in the order written above. */
export function environmentVariables(): NamedEnvVariable[] {
  const named = (variables: Readonly<Record<string, EnvVariable>>, testOnly: boolean) =>
    Object.entries(variables).map(([name, variable]) => ({ name, ...variable, testOnly }));
  return [...named(PRODUCTION_VARIABLES, false), ...named(TEST_VARIABLES, true)];
}
