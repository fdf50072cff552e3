# syntax=docker/dockerfile:1
# The Baton worker image (`baton worker` by default; docker-compose.yml also runs `baton setup` from it).
# Baton runs from its TypeScript sources through tsx, so there is no compile stage: the first stage installs the
# production dependencies, the second copies them beside the sources and runs as the unprivileged `node` user.

FROM node:20.20.2-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20.20.2-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
# Everything else the worker needs (see .dockerignore for what stays out: tests, benchmarks, local state).
COPY . .
USER node
ENTRYPOINT ["node", "bin/baton.js"]
CMD ["worker"]
