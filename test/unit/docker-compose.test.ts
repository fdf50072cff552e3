/**
 * What can be proven of docker-compose.yml and the Dockerfile without a Docker engine: the services the README
 * promises, pinned images, health-gated start order, loopback-only ports, the model passed through, and every
 * variable set for Baton's containers being one `baton worker` or `baton setup` reads (a typo there would
 * otherwise go unnoticed until someone ran it).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { LATENCY_DYNAMIC_CONFIG } from '../../stack/temporal-server';
import { batonEnvVariables } from '../../worker/config';

const ROOT = path.resolve(__dirname, '..', '..');

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition?: string }>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test?: string[] };
  stop_grace_period?: string;
  security_opt?: string[];
  devices?: string[];
}

const compose = parse(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
};
const services = compose.services;
const service = (name: string): ComposeService => {
  const found = services[name];
  assert.ok(found, `docker-compose.yml has no service '${name}'`);
  return found;
};
/** Services that run Baton's image. */
const batonServices = Object.entries(services).filter(([, s]) => s.build !== undefined || s.image === 'baton:local');

test('docker compose: the services of the production topology are there', () => {
  assert.deepEqual(Object.keys(services).sort(), [
    'baton-setup',
    'postgres',
    'temporal',
    'temporal-schema',
    'temporal-ui',
    'worker',
  ]);
  assert.match(service('temporal-schema').image ?? '', /^temporalio\/admin-tools:/);
  assert.match(service('temporal').image ?? '', /^temporalio\/server:/, 'not the deprecated auto-setup image');
  assert.match(service('temporal-ui').image ?? '', /^temporalio\/ui:/);
  assert.deepEqual(service('baton-setup').command, ['setup']);
  assert.deepEqual(service('worker').command, ['worker']);
  assert.ok(service('postgres').volumes?.some((v) => v.endsWith(':/var/lib/postgresql/data')));
  assert.ok(compose.volumes && 'postgres-data' in compose.volumes);
});

test('docker compose: every image is pinned to a version, Baton builds from the Dockerfile', () => {
  for (const [name, s] of Object.entries(services)) {
    if (s.image === 'baton:local') continue;
    assert.match(s.image ?? '', /^[\w./-]+:\d+(\.\d+)+[\w.-]*$/, `${name}: image ${s.image} is not pinned`);
  }
  assert.ok(service('baton-setup').build !== undefined, 'baton-setup builds the image');
  assert.equal(service('worker').image, 'baton:local');
});

test('docker compose: start order waits for health or completion, and long-running dependencies have health checks', () => {
  for (const [name, s] of Object.entries(services)) {
    for (const [dependency, spec] of Object.entries(s.depends_on ?? {})) {
      assert.ok(
        spec.condition === 'service_healthy' || spec.condition === 'service_completed_successfully',
        `${name} depends on ${dependency} without a condition`,
      );
      assert.ok(dependency in services, `${name} depends on unknown ${dependency}`);
      if (spec.condition === 'service_healthy') {
        assert.ok(service(dependency).healthcheck?.test, `${dependency} has no health check for ${name} to wait on`);
      }
    }
  }
  assert.equal(service('temporal').depends_on?.['temporal-schema']?.condition, 'service_completed_successfully');
  assert.equal(service('worker').depends_on?.['baton-setup']?.condition, 'service_completed_successfully');
  assert.ok(service('worker').healthcheck?.test, 'the worker has a health check');
});

test('docker compose: published ports listen on 127.0.0.1 only, and workers publish none so they scale', () => {
  for (const [name, s] of Object.entries(services)) {
    for (const port of s.ports ?? []) assert.match(port, /^127\.0\.0\.1:/, `${name} publishes ${port}`);
  }
  assert.equal(service('worker').ports, undefined);
});

test('docker compose: Docker waits longer than the worker drains before it kills a stopping worker', () => {
  const grace = /^(\d+)s$/.exec(service('worker').stop_grace_period ?? '');
  const drain = Number(service('worker').environment?.BATON_SHUTDOWN_GRACE_S ?? 30);
  assert.ok(grace && Number(grace[1]) > drain, `stop_grace_period ${service('worker').stop_grace_period}`);
});

test('docker compose: Temporal runs on Postgres from the mounted config file, the one the native test uses', () => {
  const temporal = service('temporal');
  const mount = temporal.volumes?.find((v) => v.startsWith('./deploy/temporal/production.yaml:'));
  assert.ok(mount, 'deploy/temporal/production.yaml is mounted');
  const target = mount.split(':')[1] ?? '';
  const entry = temporal.entrypoint ?? [];
  assert.equal(entry[0], 'temporal-server');
  assert.equal(
    path.posix.join(entry[entry.indexOf('--config') + 1] ?? '', `${entry[entry.indexOf('--env') + 1]}.yaml`),
    target,
  );
  const config = fs.readFileSync(path.join(ROOT, 'deploy', 'temporal', 'production.yaml'), 'utf8');
  assert.match(config, /^# enable-template/);
  assert.match(config, /pluginName: postgres12/);
  assert.ok(service('temporal-schema').volumes?.some((v) => v.startsWith('./deploy/temporal/create-schemas.sh:')));
});

test("docker compose: Temporal gets the dev server's latency settings from the mounted dynamic config file", () => {
  const mount = service('temporal').volumes?.find((v) => v.startsWith('./deploy/temporal/dynamicconfig.yaml:'));
  assert.ok(mount, 'deploy/temporal/dynamicconfig.yaml is mounted');
  const config = fs.readFileSync(path.join(ROOT, 'deploy', 'temporal', 'production.yaml'), 'utf8');
  // production.yaml's default path is where the file is mounted (the native topology sets the variable).
  const filepath = /filepath: \{\{ env "DYNAMIC_CONFIG_FILE_PATH" \| default "([^"]+)" \| quote \}\}/.exec(config);
  assert.equal(filepath?.[1], mount.split(':')[1]);
  const dynamic = parse(fs.readFileSync(path.join(ROOT, 'deploy', 'temporal', 'dynamicconfig.yaml'), 'utf8')) as Record<
    string,
    { value: unknown; constraints?: unknown }[]
  >;
  // The same settings as the dev server's, so production is not slower than what `npm run bench` measured.
  assert.deepEqual(
    Object.entries(dynamic).map(([key, values]) => `${key}=${values.map((v) => String(v.value)).join(',')}`),
    [...LATENCY_DYNAMIC_CONFIG],
  );
});

test('docker compose: the model endpoint and key come from the environment, the scripted model otherwise', () => {
  const env = service('worker').environment ?? {};
  assert.equal(env.OPENAI_API_KEY, '${OPENAI_API_KEY:-}');
  assert.equal(env.OPENAI_BASE_URL, '${OPENAI_BASE_URL:-}');
  assert.match(env.BATON_MODEL ?? '', /^\$\{BATON_MODEL:-/);
  assert.ok(env.BATON_MODEL_SCRIPT && fs.existsSync(path.join(ROOT, env.BATON_MODEL_SCRIPT)), 'the script exists');
});

test('docker compose: every variable set for Baton containers is one baton worker or baton setup reads', () => {
  const known = new Set(batonEnvVariables());
  assert.ok(batonServices.length >= 2);
  for (const [name, s] of batonServices) {
    for (const variable of Object.keys(s.environment ?? {})) {
      assert.ok(known.has(variable), `${name} sets ${variable}, which Baton does not read`);
    }
  }
});

test('dockerfile: multi-stage, runs as a non-root user, `baton worker` by default', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const stages = dockerfile.match(/^FROM .+$/gm) ?? [];
  assert.ok(stages.length >= 2, 'multi-stage');
  for (const stage of stages) assert.match(stage, /^FROM [\w./-]+:\d+(\.\d+)+[\w.-]*( AS \w+)?$/, stage);
  assert.match(dockerfile, /^USER node$/m);
  assert.match(dockerfile, /^ENTRYPOINT \["node", "bin\/baton\.js"\]$/m);
  assert.match(dockerfile, /^CMD \["worker"\]$/m);
});

test('dockerfile: the workflow bundle is built at image build, from the copied sources, and the worker starts from it', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const bundle = /^RUN node bin\/baton\.js bundle (\S+)$/m.exec(dockerfile);
  assert.ok(bundle, 'the image runs `baton bundle <file>`');
  const file = bundle[1] ?? '';
  assert.ok(path.isAbsolute(file), `${file}: an absolute path, whatever the worker's working directory`);
  assert.match(
    dockerfile,
    new RegExp(`^ENV BATON_WORKFLOW_BUNDLE=${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'),
  );
  const at = (pattern: RegExp) => dockerfile.search(pattern);
  const runtime = at(/^FROM .+ AS runtime$/m);
  assert.ok(runtime >= 0, 'a runtime stage');
  assert.ok(at(/^COPY \. \.$/m) > runtime, 'the sources are copied into the runtime stage');
  assert.ok(bundle.index > at(/^COPY \. \.$/m), 'the bundle is built after the sources are copied, so it is of them');
  assert.ok(bundle.index < at(/^USER node$/m), 'as root, before the image drops to the unprivileged user');
  // And one for workers that export traces, beside it.
  const traced = /^RUN node bin\/baton\.js bundle (\S+) --tracing$/m.exec(dockerfile);
  assert.ok(traced, 'the image runs `baton bundle <file> --tracing` too');
  assert.ok(path.isAbsolute(traced[1] ?? '') && traced[1] !== file, 'to a file of its own');
  assert.ok(traced.index > at(/^COPY \. \.$/m) && traced.index < at(/^USER node$/m));
});

test('dockerfile: the worker runs with two glibc malloc arenas (measured: less memory, bench/results/history.md)', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /^FROM node:[\w.-]+-bookworm[\w-]* AS runtime$/m, "a glibc image: the variable is glibc's");
  assert.match(dockerfile, /^ENV MALLOC_ARENA_MAX=2$/m);
});

test('dockerfile: the dependencies install with no scripts, before the sources (and `prepare`) are copied', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const install = /^RUN npm ci (.*)$/m.exec(dockerfile);
  assert.ok(install, 'the image installs with `npm ci`');
  assert.match(install[1] ?? '', /--omit=dev/);
  // Run, `prepare` would fail on its missing script; Baton needs none of its dependencies' (README).
  assert.match(install[1] ?? '', /--ignore-scripts/);
  assert.ok(install.index < dockerfile.search(/^COPY \. \.$/m), 'installed before the sources are copied');
});

test("docker compose and dockerfile: the worker's image has bubblewrap and slirp4netns, and its container lets them run", () => {
  // One instruction per line: continuation lines joined.
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n\s*/g, '');
  const install = /^RUN apt-get update.*$/m.exec(dockerfile);
  assert.ok(install, 'the image installs packages with apt');
  assert.match(install[0], /apt-get install -y --no-install-recommends bubblewrap slirp4netns/);
  assert.ok(install.index > dockerfile.search(/^FROM .+ AS runtime$/m), 'in the runtime stage');
  assert.ok(install.index < dockerfile.search(/^USER node$/m), 'as root, before the image drops to the node user');
  // Docker's seccomp profile refuses the user namespaces, its AppArmor profile the mounts, and its masked /proc paths
  // a fresh /proc: the shell tool would refuse every command without these (docs/deploy.md, "The shell's sandbox in a container").
  assert.deepEqual([...(service('worker').security_opt ?? [])].sort(), [
    'apparmor=unconfined',
    'seccomp=unconfined',
    'systempaths=unconfined',
  ]);
  // slirp4netns gives each command with the network a TAP interface: the worker refuses those commands without it.
  assert.deepEqual(service('worker').devices, ['/dev/net/tun:/dev/net/tun']);
});

test('docker compose: the Postgres password has no default, so no password everyone knows opens Baton’s database', () => {
  const text = fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
  const uses = [...text.matchAll(/\$\{POSTGRES_PASSWORD([^}]*)\}/g)].map((match) => match[1] ?? '');
  assert.ok(uses.length >= 5, 'every service that needs the password names it');
  for (const use of uses) assert.match(use, /^:\?/, `POSTGRES_PASSWORD is required (\${POSTGRES_PASSWORD${use}})`);
});

test('docker compose: the workers require a decision key, so no decision sent to temporal:7233 counts without it', () => {
  const key = service('worker').environment?.BATON_DECISION_KEY ?? '';
  assert.match(key, /^\$\{BATON_DECISION_KEY:\?[^}]+\}$/, `BATON_DECISION_KEY is required (${key})`);
});
