# syntax=docker/dockerfile:1
# The one proxyfleet image: every entrypoint (api, gateway, worker, relay, controller) runs from it,
# chosen by the command (`node <entrypoint>/src/main.ts`; Node 24 runs the TypeScript sources
# directly through type stripping, so there is no build step). Kubernetes supplies DATABASE_URL,
# so the embedded PostgreSQL of `npm start` is not used here.
#
# BASE: node:24-slim from a registry. `npm run image` (scripts/image.sh) passes a local stand-in
# built from Debian packages where no registry serves it (docs/adr/0065).
ARG BASE=node:24-slim

# 1. Production dependencies only. --ignore-scripts: no install script runs in the image build
#    (the only ones the project allows are for dev tooling and embedded PostgreSQL's binaries).
FROM ${BASE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# 2. Runtime: sources, migrations and CRDs; a fixed non-root user (uid 10001, as the chart's
#    podSecurityContext expects); read-only root filesystem friendly (writes go to /tmp).
FROM ${BASE} AS runtime
ENV NODE_ENV=production \
    PROXYFLEET_DATA_DIR=/tmp/proxyfleet
WORKDIR /app
RUN groupadd --system --gid 10001 proxyfleet \
 && useradd --system --uid 10001 --gid proxyfleet --no-create-home --shell /usr/sbin/nologin proxyfleet
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --chown=root:root package.json ./
COPY --chown=root:root bin ./bin
COPY --chown=root:root common ./common
COPY --chown=root:root api ./api
COPY --chown=root:root gateway ./gateway
COPY --chown=root:root worker ./worker
COPY --chown=root:root relay ./relay
COPY --chown=root:root controllers ./controllers
COPY --chown=root:root migrations ./migrations
COPY --chown=root:root crds ./crds
USER 10001:10001
# api 8080, relay stream 8095; health/metrics: gateway 9090, worker 9091, controller 9092, relay 9093;
# gateways add their plan's port.
EXPOSE 8080 8095 9090 9091 9092 9093
CMD ["node", "api/src/main.ts"]
