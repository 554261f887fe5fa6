#!/bin/bash
# Manual check (not part of CI: it needs root for a PID namespace, and tini installed):
# the container's ENTRYPOINT runs the CLI under tini as PID 1; a stopped container or Job pod sends it
# SIGTERM. This runs the built CLI the same way (tini as PID 1 of a new PID namespace) and checks:
#   1. `stub-provider sim --dump F` stops on SIGTERM with exit 0 and writes F;
#   2. `stub-provider run` stopped by SIGTERM in the middle of its pass exits 143 with a JSON report
#      whose result is "interrupted" (a sim with 1.5 s per call keeps the pass going).
# Usage: npm run build && bash scripts/check-tini-signals.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAIN=$ROOT/dist/src/main.js
command -v tini >/dev/null || { echo "tini is not installed (apt-get install tini)"; exit 2; }
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
fail=0

unshare --pid --fork --mount-proc tini -- \
  node "$MAIN" sim --scenario "$ROOT/scenarios/bare-metal-stuck.yaml" --dump "$W/dump.yaml" \
  >"$W/sim1.out" 2>"$W/sim1.err" &
outer=$!
for _ in $(seq 1 100); do [ -s "$W/sim1.out" ] && break; sleep 0.1; done
kill -TERM "$(pgrep -P $outer -x tini)"
wait $outer; code=$?
if [ $code -eq 0 ] && [ -s "$W/dump.yaml" ]; then
  echo "ok: sim under tini stopped by SIGTERM, exit 0, state dumped"
else
  echo "FAIL: sim under tini: exit $code, dump $(test -s "$W/dump.yaml" && echo written || echo missing)"
  fail=1
fi

{ cat "$ROOT/scenarios/bare-metal-stuck.yaml"; echo 'faults: { latency_ms: 1500 }'; } >"$W/slow.yaml"
node "$MAIN" sim --scenario "$W/slow.yaml" >"$W/sim2.out" 2>"$W/sim2.err" &
for _ in $(seq 1 100); do [ -s "$W/sim2.out" ] && break; sleep 0.1; done
read -r EP KEY < <(node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").split("\n")[0]);
  console.log(r.endpoint, r.keys["infra-provider:bare-metal"]);' "$W/sim2.out")
OMNI_SERVICE_ACCOUNT_KEY="$KEY" unshare --pid --fork --mount-proc tini -- \
  node "$MAIN" run --id bare-metal --omni-api-endpoint "$EP" --yes --output json >"$W/run.out" 2>"$W/run.err" &
outer=$!
sleep 12   # past the preflight and the snapshot (a few calls of 1.5 s each), inside the pass
kill -TERM "$(pgrep -P $outer -x tini)"
wait $outer; code=$?
result=$(node -e '
  try { console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).result) }
  catch { console.log("no report") }' "$W/run.out")
if [ $code -eq 143 ] && [ "$result" = interrupted ]; then
  echo "ok: run under tini stopped by SIGTERM, exit 143, report result interrupted"
else
  echo "FAIL: run under tini: exit $code, report: $result"
  fail=1
fi
exit $fail
