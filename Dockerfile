# syntax=docker/dockerfile:1
# The Baton worker image (`baton worker` by default; docker-compose.yml also runs `baton setup` from it).
# Baton runs from its TypeScript sources through tsx, so there is no compile stage (with the workflow bundle built
# below, tsx costs a running worker about 7 MB of memory; README "Performance"): the first stage installs the
# production dependencies, the second copies them beside the sources and runs as the unprivileged `node` user.

FROM node:20.20.2-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: Baton needs none of its dependencies' (README "Install scripts"), and its own `prepare` builds
# dist/ for a git install, which this image does not use (nor are its sources copied yet).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node:20.20.2-bookworm-slim AS runtime
ENV NODE_ENV=production
# glibc gives each thread that allocates (the Temporal core's runtime threads, libuv's pool, the workflow thread) an
# arena of its own, up to 8 per core, and keeps what they freed. With two, a worker with 200 threads waiting on
# humans measured 316-349 MB against 352-407 MB without (README "Worker memory"; `npm run bench -- memory`).
ENV MALLOC_ARENA_MAX=2
# The shell tool runs every command in a bubblewrap sandbox, and refuses to run without one (README "Worlds:
# variables, prompts and the shell"); slirp4netns gives commands of worlds with the network on their egress, never the
# container's loopback (util-linux's unshare and nsenter, which it needs too, are in every Debian image). bwrap also
# needs the container's security options, and slirp4netns the TUN device, that docker-compose.yml gives the worker
# (README "Running in production").
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap slirp4netns \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
# Everything else the worker needs (see .dockerignore for what stays out: tests, benchmarks, local state).
COPY . .
# The workflow bundle, built once from the sources just copied: a worker that bundles at start-up runs webpack in its
# own process and keeps about 120 MB of it resident for good (README "Performance"), besides seconds of CPU per start.
# The worker checks at start that the bundle matches its sources.
RUN node bin/baton.js bundle /app/workflow-bundle.js
# The same with Temporal's tracing interceptors, for a worker that exports traces (set OTEL_EXPORTER_OTLP_ENDPOINT and
# BATON_WORKFLOW_BUNDLE=/app/workflow-bundle-traced.js): the default one carries no tracing code.
RUN node bin/baton.js bundle /app/workflow-bundle-traced.js --tracing
ENV BATON_WORKFLOW_BUNDLE=/app/workflow-bundle.js
USER node
ENTRYPOINT ["node", "bin/baton.js"]
CMD ["worker"]
