# stub-provider as a one-shot container job (see docs/operator-guide.md, "Container and Kubernetes Job").
#
#   docker build -t stub-provider .
#   docker run --rm --read-only --tmpfs /tmp \
#     -e OMNI_ENDPOINT=https://omni.example.com -e OMNI_SERVICE_ACCOUNT_KEY \
#     stub-provider --id bare-metal --yes --output json
#
# test/e2e/dockerfile.test.ts performs these steps in a scratch folder (no Docker engine needed), so keep
# to the instructions it understands: FROM, WORKDIR, COPY (and COPY --from=build), RUN, ENV, USER,
# ENTRYPOINT in exec form. RUN lines with apt-get are the only ones it cannot execute.

# --- build: compile TypeScript with the locked dev dependencies, then drop them ---------------------
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build
RUN npm prune --omit=dev --no-audit --no-fund

# --- runtime: Node 22 (>= 20.19), ipmitool for the IPMI wipes, tini as PID 1 ---------------------------
FROM node:22-bookworm-slim AS runtime
# ipmitool: --wipe ipmi-*; tini: forwards SIGTERM/SIGINT to the CLI and reaps ipmitool and --wipe command
# children; ca-certificates: for programs run by --wipe command (Node has its own CA bundle).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ipmitool tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# Nothing is written outside /tmp: mount an emptyDir (or --tmpfs) there and make the root read-only.
ENV NODE_ENV=production HOME=/tmp
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
# The shipped example scenarios, by name: `sim --scenario bare-metal-stuck`, `plan --from-dump ...`.
COPY scenarios ./scenarios
# uid/gid 1000 is the image's `node` user; numeric so that Kubernetes can check runAsNonRoot.
USER 1000:1000
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/src/main.js"]
