# stub-provider as a one-shot container job (see docs/operator-guide.md, "Container and Kubernetes Job").
# scripts/build-image.sh builds this file with buildah and runs the image as the Job runs it (CI).
#
# Build (Docker with BuildKit, or buildah/podman):
#   docker build -t stub-provider .
#
# Behind a TLS-inspecting proxy, or with an npm mirror: the CA bundle and the npm configuration are
# build secrets, mounted only for `npm ci` in the build stage and in no layer of any stage:
#   docker build --secret id=npm_ca,src=/etc/ssl/certs/ca-certificates.crt \
#     --secret id=npmrc,src=$HOME/.npmrc -t stub-provider .
#   buildah bud --secret id=npm_ca,src=ca.pem --secret id=npmrc,src=mirror.npmrc -t stub-provider .
# A mirror without credentials can also be named with --build-arg NPM_REGISTRY=https://npm.example.net/
# (build args are kept in the build stage's history: never put a token in one). Another Node >= 20.19
# base: --build-arg NODE_IMAGE=registry.example.net/node:22-bookworm-slim. Labels: --build-arg
# VERSION=<package version> --build-arg SOURCE_URL=<where this repository is published> --build-arg
# REVISION=<commit>.
#
# Run:
#   docker run --rm --read-only --tmpfs /tmp \
#     -e OMNI_ENDPOINT=https://omni.example.com -e OMNI_SERVICE_ACCOUNT_KEY \
#     stub-provider --id bare-metal --yes --output json

# Debian bookworm with Node >= 20.19 in /usr/local and uid 1000 (the official image's `node` user).
ARG NODE_IMAGE=node:22-bookworm-slim

# --- build: compile TypeScript with the locked dev dependencies, then drop them ---------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The secrets are mounted at /run/secrets/<id> for this one command when given, and absent otherwise.
ARG NPM_REGISTRY=
RUN --mount=type=secret,id=npm_ca --mount=type=secret,id=npmrc \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi; \
    npm ci --no-audit --no-fund ${NPM_REGISTRY:+--registry="$NPM_REGISTRY"}
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
# Source maps are for development (the npm package leaves them out too).
RUN npm run build \
 && find dist/src -name '*.map' -delete \
 && npm prune --omit=dev --no-audit --no-fund

# --- runtime: Node (>= 20.19), ipmitool for the IPMI wipes, tini as PID 1 ------------------------------
FROM ${NODE_IMAGE} AS runtime
# ipmitool: --wipe ipmi-*; tini: forwards SIGTERM/SIGINT to the CLI and reaps ipmitool and --wipe command
# children; ca-certificates: for programs run by --wipe command (Node has its own CA bundle). apt's
# lists and caches go in the same layer, whatever the base's apt configuration keeps.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ipmitool tini ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
# Nothing is written outside /tmp: mount an emptyDir (or --tmpfs) there and make the root read-only.
ENV NODE_ENV=production HOME=/tmp
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
# The shipped example scenarios, by name: `sim --scenario bare-metal-stuck`, `plan --from-dump ...`.
COPY scenarios ./scenarios
ARG VERSION=0.0.0-dev
ARG SOURCE_URL=
ARG REVISION=
LABEL org.opencontainers.image.title="stub-provider" \
      org.opencontainers.image.description="Finish Omni deletions that a removed infra provider's finalizers block: log in as the provider, release what is being deleted, clean up, deregister." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.revision="${REVISION}"
# uid/gid 1000 is the image's `node` user; numeric so that Kubernetes can check runAsNonRoot.
USER 1000:1000
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/src/main.js"]
