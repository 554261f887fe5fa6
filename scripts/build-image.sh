#!/usr/bin/env bash
# Builds the container image from the unmodified Dockerfile with `buildah bud --isolation chroot`, then
# checks it: its config (numeric user, tini entrypoint, OCI labels), that no build secret is in any
# layer, and a run of its root filesystem the way the Job runs it (docs/operator-guide.md, "Container
# and Kubernetes Job"): read-only root, tmpfs /tmp, uid 1000, tini as PID 1 of its own PID namespace,
# a network namespace with loopback only, the image's ENTRYPOINT, against `stub-provider sim` started
# outside the image. Called by .ci/run after the tests; needs root (buildah, namespaces, mounts).
#
# Without a reachable image registry the base is assembled from Debian's packages (debootstrap) with
# the build host's own Node, and cached under /var/cache/stub-provider-image-base (docs/architecture.md,
# scripts/). Every line starts with "image:"; a check that cannot run here says so and why. Exits
# non-zero when the build or a check fails, and (with CI=true) when the build could not be tried.
#
# Usage: bash scripts/build-image.sh [--tag NAME]    (default tag: localhost/stub-provider:<version>)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CACHE=/var/cache/stub-provider-image-base
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=bookworm   # the Debian release of the Dockerfile's default base, node:22-bookworm-slim
VERSION=$(node -p 'require("./package.json").version')
TAG=localhost/stub-provider:$VERSION
while [ $# -gt 0 ]; do
  case $1 in
    --tag) TAG=${2:?--tag needs a name}; shift 2 ;;
    *) echo "usage: bash scripts/build-image.sh [--tag NAME]" >&2; exit 2 ;;
  esac
done

passed=0 failed=0 skipped=0
say() { printf 'image: %s\n' "$*"; }
ok() { say "ok: $*"; passed=$((passed + 1)); }
fail() { say "FAIL: $*"; failed=$((failed + 1)); }
skip() { say "skipped: $*"; skipped=$((skipped + 1)); }
# What a build, npm, apt or the CLI printed is shown inert: control characters become '?'.
inert() { LC_ALL=C sed 's/\r$//; s/[^[:print:][:space:]]/?/g; s/\r/?/g'; }
tail_of() { tail -n "${2:-25}" "$1" | inert | sed 's/^/image:   | /'; }
finish() {
  say "checks: $passed ok, $failed failed, $skipped skipped ($((SECONDS - started_all)) s)"
  [ "$failed" -eq 0 ] || exit 1
  exit 0
}
# Cannot even try the build: a plain line, and a failure in CI (CI must build the image).
cannot() {
  say "cannot build here: $*"
  if [ "${CI:-}" = true ]; then fail "CI=true and the image could not be built"; else skip "the build and every check of the image"; fi
  finish
}
started_all=$SECONDS

W=$(mktemp -d /tmp/stub-provider-image.XXXXXX)
chmod 700 "$W"
NETNS=stub-provider-image-$$
ctr=
cleanup() {
  local p f
  # A running image's unshare (its PID file lives as long as it does) takes its PID namespace down
  # with it (--kill-child); then this shell's own background jobs (sims, a run), only those still alive.
  for f in "$W"/*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true; done
  for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$NETNS" 2>/dev/null || true
  if [ -n "$ctr" ]; then buildah umount "$ctr" >/dev/null 2>&1 || true; buildah rm "$ctr" >/dev/null 2>&1 || true; fi
  rm -rf "$W"
}
trap cleanup EXIT

# --- tools ------------------------------------------------------------------------------------------
[ "$(uname -s)" = Linux ] || cannot "buildah and the run checks need Linux"
if [ "$(id -u)" != 0 ]; then
  cannot "not root: buildah's chroot isolation, the namespaces and the mounts of the run checks need root (run it with sudo)"
fi
export DEBIAN_FRONTEND=noninteractive
apt_updated=
apt_install() {
  command -v apt-get >/dev/null || return 1
  [ -n "$apt_updated" ] || { timeout 300 apt-get update -qq >"$W/apt.log" 2>&1 && apt_updated=1; } || return 1
  timeout 600 apt-get install -y -qq --no-install-recommends "$@" >>"$W/apt.log" 2>&1
}
need=()
command -v buildah >/dev/null || need+=(buildah)
command -v ip >/dev/null || need+=(iproute2)
command -v unshare >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} (apt-get)"
  apt_install "${need[@]}" || { tail_of "$W/apt.log" 10; cannot "apt-get could not install ${need[*]}"; }
fi
say "$(buildah --version)"
buildah info >"$W/buildah-info.json" 2>"$W/buildah-info.err" || { tail_of "$W/buildah-info.err" 5; cannot "buildah cannot open its storage"; }

# --- base -------------------------------------------------------------------------------------------
default_base=$(sed -n 's/^ARG NODE_IMAGE=\([^[:space:]]*\).*/\1/p' Dockerfile | head -n 1)
[ -n "$default_base" ] || { fail "the Dockerfile has no 'ARG NODE_IMAGE=<image>' line"; finish; }
build_args=()
t=$SECONDS
# A name without a registry is an official image of Docker Hub, as Docker reads it.
case $default_base in
  */*) case ${default_base%%/*} in *.*|*:*|localhost) full_base=$default_base ;; *) full_base=docker.io/$default_base ;; esac ;;
  *) full_base=docker.io/library/$default_base ;;
esac
if buildah inspect --type image "$full_base" >/dev/null 2>&1; then
  say "base: $full_base, present in buildah's storage"
  base=$full_base
elif timeout 120 buildah pull -q "$full_base" >"$W/pull.log" 2>&1; then
  say "base: $full_base, pulled in $((SECONDS - t)) s"
  base=$full_base
else
  say "base: cannot pull $full_base ($(grep -m1 -o 'Error.*' "$W/pull.log" | cut -c1-240 | inert)): a stand-in from Debian's packages instead"
  # Debian bookworm's nodejs is 18, below the engines' >= 20.19 (package.json). The stand-in takes the
  # build host's Node, a glibc build like the official image's /usr/local/bin/node; .ci/run has just
  # tested the project with it. (trixie's nodejs 20.19 would drag a second Debian release into the root.)
  host_node=$(readlink -f "$(command -v node)")
  node_version=$(node -p 'process.versions.node')
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' \
    || { fail "the host's Node $node_version is below 20.19: no base for the image"; finish; }
  npm_dir=$(readlink -f "$(dirname "$(readlink -f "$(command -v npm)")")/..")
  [ -f "$npm_dir/package.json" ] || { fail "cannot find npm's folder beside $(command -v npm)"; finish; }
  command -v debootstrap >/dev/null || { say "installing debootstrap (apt-get)"; apt_install debootstrap || { tail_of "$W/apt.log" 10; cannot "apt-get could not install debootstrap"; }; }
  # The cache key: everything that goes into the base. The suite's Release date changes with each point
  # release; the recipe is this script's assemble_base function.
  suite_date=$(timeout 30 curl -fsS "$DEBIAN_MIRROR/dists/$SUITE/InRelease" 2>/dev/null | sed -n 's/^Date: //p' | head -n 1 || true)
  assemble_base() {
    local root=$1
    timeout 900 debootstrap --variant=minbase "$SUITE" "$root" "$DEBIAN_MIRROR" >"$W/debootstrap.log" 2>&1 || return 1
    # What Debian's own container images do: no docs, man pages or translations; apt keeps no caches.
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root"/usr/share/{groff,info,lintian/overrides,locale,man}/*
    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
      "$DEBIAN_MIRROR" "$SUITE" "$DEBIAN_MIRROR" "$SUITE" "$DEBIAN_SECURITY_MIRROR" "$SUITE" >"$root/etc/apt/sources.list"
    # The runtime brings /dev, /etc/resolv.conf and /etc/hostname; nothing of the build host stays.
    rm -rf "$root"/dev/* "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*
    : >"$root/etc/resolv.conf"; : >"$root/etc/hostname"
    # Node where the official image has it, and its `node` user, uid/gid 1000.
    mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/node_modules"
    cp "$host_node" "$root/usr/local/bin/node"
    cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
    /usr/sbin/chroot "$root" /usr/sbin/groupadd --gid 1000 node
    /usr/sbin/chroot "$root" /usr/sbin/useradd --uid 1000 --gid node --shell /bin/bash --create-home node
    [ "$(env -i /usr/sbin/chroot "$root" /usr/local/bin/node -p 'process.versions.node' 2>>"$W/debootstrap.log")" = "$node_version" ] || {
      echo "the host's node ($host_node) does not run inside a $SUITE root" >>"$W/debootstrap.log"
      return 1
    }
  }
  key=$( { declare -f assemble_base; echo "$SUITE $DEBIAN_MIRROR $DEBIAN_SECURITY_MIRROR $suite_date"
           dpkg-query -W -f='${Version}\n' debootstrap; dpkg --print-architecture
           sha256sum "$host_node" | cut -d' ' -f1; node -p "require('$npm_dir/package.json').version"; } | sha256sum | cut -c1-16)
  base=localhost/stub-provider-base:$key
  if buildah inspect --type image "$base" >/dev/null 2>&1; then
    say "base: $base (cached: $SUITE minbase of $suite_date, Node $node_version from this host)"
  else
    mkdir -p "$CACHE"
    if [ ! -s "$CACHE/$key.tar" ]; then
      say "base: debootstrap --variant=minbase $SUITE from $DEBIAN_MIRROR, Node $node_version from this host"
      rm -rf "$W/root"
      assemble_base "$W/root" || { tail_of "$W/debootstrap.log" 15; fail "the base could not be assembled"; finish; }
      tar -C "$W/root" --numeric-owner -cf "$CACHE/$key.tar.part" . && mv "$CACHE/$key.tar.part" "$CACHE/$key.tar"
      rm -rf "$W/root"
    fi
    bctr=$(buildah from scratch)
    buildah add "$bctr" "$CACHE/$key.tar" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env NODE_VERSION="$node_version" --cmd node \
      --label "stub-provider.image-base=stand-in for $default_base: Debian $SUITE minbase ($suite_date) with Node $node_version from the build host (scripts/build-image.sh)" "$bctr"
    buildah commit -q "$bctr" "$base" >/dev/null
    buildah rm "$bctr" >/dev/null
    # Only the current base is kept: older keys' tarballs and images go.
    find "$CACHE" -maxdepth 1 -name '*.tar*' ! -name "$key.tar" -delete
    for old in $(buildah images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/stub-provider-base:' | grep -v ":$key\$" || true); do
      buildah rmi "$old" >/dev/null 2>&1 || true
    done
    say "base: $base made in $((SECONDS - t)) s (cached in $CACHE/$key.tar)"
  fi
fi
# By its full name: buildah's short-name lookup depends on the machine's registries.conf.
build_args+=(--build-arg "NODE_IMAGE=$base")
say "base size: $(buildah images --format '{{.Size}}' "$base" | head -n 1)"

# --- build ------------------------------------------------------------------------------------------
# The build secrets, as an operator behind a TLS-inspecting proxy passes them. Each carries a canary
# line (ignored by PEM readers and by npm) that must not be found in any layer of the image.
canary=stub-provider-build-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
secrets=()
host_ca=
for f in "${NODE_EXTRA_CA_CERTS:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
  if [ -n "$f" ] && [ -s "$f" ]; then host_ca=$f; break; fi
done
if [ -n "$host_ca" ]; then
  { echo "# $canary"; cat "$host_ca"; } >"$W/npm_ca"
  secrets+=(--secret "id=npm_ca,src=$W/npm_ca")
  say "build secret npm_ca: this host's CA bundle ($host_ca)"
else
  say "build secret npm_ca: none (no CA bundle on this host)"
fi
# npm's registry as this host has it configured (its value is never printed: it may carry a token).
printf '# %s\nregistry=%s\n' "$canary" "$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)" >"$W/npmrc"
secrets+=(--secret "id=npmrc,src=$W/npmrc")
say "build secret npmrc: this host's npm registry"

source_url=$(git remote get-url origin 2>/dev/null | sed -E 's#//[^/@]*@#//#' || true)
[ -n "$source_url" ] || source_url="file://$REPO"
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
build_args+=(--build-arg "VERSION=$VERSION" --build-arg "SOURCE_URL=$source_url" --build-arg "REVISION=$revision")
old_id=$(buildah images -q --noheading "$TAG" 2>/dev/null | head -n 1 || true)
t=$SECONDS
say "buildah bud --isolation chroot -t $TAG ${build_args[*]} (+ secrets)"
if ! timeout 1500 buildah bud --isolation chroot -t "$TAG" "${build_args[@]}" "${secrets[@]}" -f Dockerfile . >"$W/build.log" 2>&1; then
  tail_of "$W/build.log" 30
  fail "the image did not build ($((SECONDS - t)) s)"
  finish
fi
new_id=$(buildah images -q --noheading "$TAG" | head -n 1)
# The previous build of this tag is left nameless: remove it (only that one image).
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then buildah rmi "$old_id" >/dev/null 2>&1 || true; fi
ok "built $TAG in $((SECONDS - t)) s, size $(buildah images --format '{{.Size}}' "$TAG" | head -n 1)"

# --- the image's config -----------------------------------------------------------------------------
buildah inspect --type image "$TAG" >"$W/image.json"
config_check() {
  # One line per finding; nothing printed when the config is as the Job needs it.
  node - "$W/image.json" "$REPO/package.json" <<'EOF'
const fs = require('fs');
const img = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const pkg = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const c = img.OCIv1.config ?? {};
const out = (s) => console.log(s);
if (c.User !== '1000:1000') out(`user is ${JSON.stringify(c.User)}, not "1000:1000"`);
const want = ['/usr/bin/tini', '--', 'node', '/app/dist/src/main.js'];
if (JSON.stringify(c.Entrypoint) !== JSON.stringify(want)) out(`entrypoint is ${JSON.stringify(c.Entrypoint)}, not ${JSON.stringify(want)}`);
if (c.Cmd && c.Cmd.length) out(`a Cmd ${JSON.stringify(c.Cmd)} would be appended to the Job's args`);
if (c.WorkingDir !== '/app') out(`working directory is ${JSON.stringify(c.WorkingDir)}, not "/app"`);
const l = c.Labels ?? {};
const labels = {
  'org.opencontainers.image.title': pkg.name,
  'org.opencontainers.image.description': pkg.description,
  'org.opencontainers.image.version': pkg.version,
  'org.opencontainers.image.licenses': 'Apache-2.0',
};
for (const [k, v] of Object.entries(labels)) if (l[k] !== v) out(`label ${k} is ${JSON.stringify(l[k])}, not ${JSON.stringify(v)}`);
for (const k of ['org.opencontainers.image.source', 'org.opencontainers.image.revision']) if (!l[k]) out(`label ${k} is missing or empty`);
EOF
}
findings=$(config_check)
if [ -z "$findings" ]; then
  ok "config: user 1000:1000, entrypoint tini -- node /app/dist/src/main.js, workdir /app, OCI labels (title, description, version $VERSION, licenses Apache-2.0, source, revision)"
else
  while IFS= read -r line; do fail "config: $line"; done <<<"$findings"
fi

# --- no build secret in any layer -------------------------------------------------------------------
# Every layer of the pushed image (and its config, history included) is searched for the canaries, for
# files named like the secrets, and for the certificates of the host's CA bundle that Debian does not
# ship (a proxy's CA: the image's own ca-certificates must not have it).
t=$SECONDS
buildah push -q "$TAG" "oci:$W/oci:image" >/dev/null 2>"$W/push.err" || { tail_of "$W/push.err" 5; fail "buildah push to an OCI folder failed"; finish; }
needles=("$canary")
if [ -n "$host_ca" ] && [ -d /usr/share/ca-certificates ]; then
  while IFS= read -r n; do needles+=("$n"); done < <(node - "$host_ca" <<'EOF'
const fs = require('fs');
const path = require('path');
const blocks = (t) => t.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
const body = (b) => b.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
const debian = new Set();
const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name); if (e.isDirectory()) walk(p); else if (e.name.endsWith('.crt')) for (const b of blocks(fs.readFileSync(p, 'utf8'))) debian.add(body(b)); } };
walk('/usr/share/ca-certificates');
// A 48-character stretch from the middle of each extra certificate, as it would appear in a PEM file.
for (const b of blocks(fs.readFileSync(process.argv[2], 'utf8'))) {
  const lines = b.split('\n').filter((l) => l && !l.startsWith('-----'));
  if (!debian.has(body(b)) && lines.length > 4) console.log(lines[Math.floor(lines.length / 2)].slice(8, 56));
}
EOF
)
fi
layers=0 hits=() n=0
for blob in "$W"/oci/blobs/sha256/*; do
  layers=$((layers + 1))
  printf '%s\n' "${needles[@]}" >"$W/needles"
  # Counted over the whole stream: `grep -q` would stop reading, and pipefail take gzip's SIGPIPE for a miss.
  n=$(gzip -dcf "$blob" | grep -a -c -F -f "$W/needles" || true)
  [ "${n:-0}" -eq 0 ] || hits+=("blob $(basename "$blob" | cut -c1-12): $n line(s) with the canary or an extra CA certificate")
  n=$( (tar -tf "$blob" 2>/dev/null || true) | grep -c -E '(^|/)(npm_ca|\.?npmrc)$' || true)
  [ "${n:-0}" -eq 0 ] || hits+=("blob $(basename "$blob" | cut -c1-12): $n file(s) named like a secret")
done
if [ ${#hits[@]} -eq 0 ]; then
  ok "no build secret in the image: $layers blobs searched for the secrets' canary, $(( ${#needles[@]} - 1 )) certificate(s) of this host's CA bundle that Debian does not ship, and files named npm_ca/npmrc ($((SECONDS - t)) s)"
else
  for h in "${hits[@]}"; do fail "secret in the image: $h"; done
fi

# --- a run of the image's root filesystem, as the Job runs it ----------------------------------------
run_checks() {
  [ -f "$REPO/dist/src/main.js" ] || { say "building the host's dist/ for the sim (npm run build)"; npm run -s build >"$W/npm-build.log" 2>&1 || { tail_of "$W/npm-build.log" 10; fail "npm run build"; return; }; }
  ctr=$(buildah from --pull-never "$TAG")
  ROOTFS=$(buildah mount "$ctr")
  ip netns add "$NETNS"
  ip netns exec "$NETNS" ip link set lo up
  # The image's own environment, working directory, user and entrypoint, from its config.
  mapfile -t IMG_ENV < <(node -e 'for (const e of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).OCIv1.config.Env ?? []) console.log(e)' "$W/image.json")
  mapfile -t ENTRY < <(node -e 'for (const a of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).OCIv1.config.Entrypoint) console.log(a)' "$W/image.json")
  IMG_WD=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).OCIv1.config.WorkingDir || "/"' "$W/image.json")
  IMG_USER=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).OCIv1.config.User' "$W/image.json")
  case $IMG_USER in
    [0-9]*:[0-9]*) ;;
    *) fail "run: the image's user '$IMG_USER' is not uid:gid, the run checks need it numeric"; return ;;
  esac

  # version
  local out code
  code=0; in_image 60 "$W/version.out" "$W/version.err" -- --version || code=$?
  if [ $code -eq 0 ] && [ "$(cat "$W/version.out")" = "$VERSION" ]; then ok "run: --version printed $VERSION, exit 0"
  else fail "run: --version exited $code, printed '$(head -c 200 "$W/version.out" | inert)'"; tail_of "$W/version.err" 10; fi

  # plan, run, plan again against a sim of the stuck bare-metal machine
  start_sim a bare-metal-stuck || return
  code=0; in_image 60 "$W/plan1.out" "$W/plan1.err" "${SIM_ENV[@]}" -- plan --id bare-metal --output json || code=$?
  if [ $code -eq 10 ]; then ok "run: plan exited 10 (changes pending)"; else fail "run: plan exited $code, not 10"; tail_of "$W/plan1.err" 10; fi
  code=0; in_image 90 "$W/run.out" "$W/run.err" "${SIM_ENV[@]}" -- --id bare-metal --yes --output json || code=$?
  local result dereg
  result=$(json_field "$W/run.out" result) dereg=$(json_field "$W/run.out" deregistration.status)
  if [ $code -eq 0 ] && [ "$result" = done ] && [ "$dereg" = deregistered ]; then ok "run: exit 0, result done, deregistration deregistered"
  else fail "run: exit $code, result '$result', deregistration '$dereg'"; tail_of "$W/run.err" 15; fi
  code=0; in_image 60 "$W/plan2.out" "$W/plan2.err" "${SIM_ENV[@]}" -- plan --id bare-metal --output json || code=$?
  dereg=$(json_field "$W/plan2.out" deregistration.status)
  if [ $code -eq 0 ] && [ "$dereg" = done ]; then ok "run: a second plan exited 0, deregistration done (nothing of the provider left)"
  else fail "run: the second plan exited $code, deregistration '$dereg'"; tail_of "$W/plan2.err" 10; fi
  stop_sim a
  local left
  left=$(node --input-type=module -e '
    import { readFileSync } from "node:fs"; import { parse } from "yaml";
    const doc = parse(readFileSync(process.argv[1], "utf8"));
    const types = (doc.resources ?? []).map((r) => r.metadata.type);
    console.log(types.filter((t) => t === "InfraProviderStatuses.omni.sidero.dev" || t === "InfraMachines.omni.sidero.dev" || t.endsWith(".bare-metal.infraprovider.sidero.dev")).join(" ") || "none");
  ' "$W/sim-a.dump" 2>&1 | inert) || true
  if [ "$left" = none ]; then ok "run: the sim's dump has no InfraMachine, InfraProviderStatus or bare-metal resource left"
  else fail "run: the sim's dump still has: $left"; fi

  # SIGTERM in the middle of a run: every call to the sim takes 1.5 s, so the pass is under way for a while
  start_sim b bare-metal-stuck --faults '{latency_ms: 1500}' || return
  in_image 60 "$W/term.out" "$W/term.err" "${SIM_ENV[@]}" -- --id bare-metal --yes --output json &
  local bg=$! tini= node_pid= i
  # Under way: the run logged that it is releasing (its JSON phase line, stage "releasing"; each write is only a
  # debug line at the default level), then tini and node are found.
  for i in $(seq 1 300); do
    if node -e 'const t = require("fs").readFileSync(process.argv[1], "utf8"); process.exit(t.split("\n").some((l) => { try { return JSON.parse(l).stage === "releasing"; } catch { return false; } }) ? 0 : 1)' "$W/term.err" 2>/dev/null; then break; fi
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.1
  done
  local unsh
  unsh=$(cat "$W/term.pid" 2>/dev/null || true)
  [ -n "$unsh" ] && tini=$(pgrep -P "$unsh" | head -n 1 || true)
  [ -n "$tini" ] && node_pid=$(pgrep -P "$tini" | head -n 1 || true)
  if [ -z "$node_pid" ] || ! kill -0 "$bg" 2>/dev/null; then
    fail "run: the run to interrupt never showed unshare -> tini -> node while it wrote (unshare $unsh, tini ${tini:-none}, node ${node_pid:-none})"
    tail_of "$W/term.err" 15; wait "$bg" 2>/dev/null || true; stop_sim b; return
  fi
  process_facts "$tini" "$node_pid"
  local t0 t1 ms
  t0=$(date +%s%N)
  kill -TERM "$tini"
  for i in $(seq 1 100); do kill -0 "$bg" 2>/dev/null || break; sleep 0.05; done
  t1=$(date +%s%N); ms=$(( (t1 - t0) / 1000000 ))
  code=0; wait "$bg" || code=$?
  result=$(json_field "$W/term.out" result)
  if [ $code -eq 143 ] && [ "$ms" -le 2000 ] && [ "$result" = interrupted ]; then
    ok "run: SIGTERM to tini mid-run: exit 143 in $ms ms, the JSON result on stdout says interrupted"
  else
    fail "run: SIGTERM to tini mid-run: exit $code after $ms ms (at most 2000), result '$result'"; tail_of "$W/term.err" 10
  fi
  stop_sim b
}

# in_image SECONDS OUT ERR [NAME=VALUE...] -- ARGS...: the image's entrypoint with ARGS, as the Job runs
# it: a mount namespace where the image's root is bind-mounted read-only with a tmpfs on /tmp and a
# minimal /dev; its own PID namespace (tini is PID 1, /proc is its own); uid/gid from the image's config
# and no supplementary groups; the image's Env and WorkingDir only; the loopback-only network namespace.
# Writes the PID of the process that is tini's parent to OUT's .pid sibling.
in_image() {
  local secs=$1 out=$2 err=$3; shift 3
  local extra=()
  while [ "$1" != -- ]; do extra+=("$1"); shift; done
  shift
  local pidfile=${out%.out}.pid code=0
  timeout -s KILL "$secs" env -i "${IMG_ENV[@]}" "${extra[@]}" \
    ip netns exec "$NETNS" unshare --mount --propagation private -- /bin/sh -c '
      r=$1 wd=$2 uid=$3 gid=$4 pidfile=$5; shift 5
      mount --bind "$r" "$r" && mount -o remount,bind,ro,nosuid,nodev "$r" &&
      mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$r/tmp" &&
      mount -t tmpfs -o mode=755,size=64k,nosuid tmpfs "$r/dev" &&
      for d in null zero full random urandom tty; do : >"$r/dev/$d" && mount --bind "/dev/$d" "$r/dev/$d" || exit 125; done &&
      ln -s /proc/self/fd "$r/dev/fd" && echo $$ >"$pidfile" &&
      exec unshare --pid --fork --kill-child --mount-proc --root="$r" --wd="$wd" --setgid "$gid" --setuid "$uid" -- "$@"
    ' sh "$ROOTFS" "$IMG_WD" "${IMG_USER%%:*}" "${IMG_USER##*:}" "$pidfile" "${ENTRY[@]}" "$@" >"$out" 2>"$err" </dev/null || code=$?
  rm -f "$pidfile"
  return $code
}

# What the Job's pod would show from the inside, read from /proc of the running tini and node.
process_facts() {
  local tini=$1 node_pid=$2 problems=()
  [ "$(cat "/proc/$tini/comm")" = tini ] || problems+=("PID 1 of the namespace is $(cat "/proc/$tini/comm"), not tini")
  [ "$(awk '/^NSpid:/ {print $NF}' "/proc/$tini/status")" = 1 ] || problems+=("tini is not PID 1 of its PID namespace")
  local p uid=${IMG_USER%%:*} gid=${IMG_USER##*:} ids
  for p in "$tini" "$node_pid"; do
    # Real, effective, saved and file-system IDs; then the supplementary groups and the capabilities.
    ids=$(awk '/^Uid:/ {u = $2 " " $3 " " $4 " " $5} /^Gid:/ {g = $2 " " $3 " " $4 " " $5} END {print u "/" g}' "/proc/$p/status")
    [ "$ids" = "$uid $uid $uid $uid/$gid $gid $gid $gid" ] || problems+=("$(cat "/proc/$p/comm") runs as uid/gid $ids")
    [ -z "$(awk '/^Groups:/ {$1 = ""; print}' "/proc/$p/status" | tr -d ' ')" ] || problems+=("$(cat "/proc/$p/comm") has supplementary groups")
    [ "$(awk '/^CapEff:/ {print $2}' "/proc/$p/status")" = 0000000000000000 ] || problems+=("$(cat "/proc/$p/comm") has effective capabilities")
  done
  # mountinfo: field 5 is the mount point, 6 its options; the file system type follows the "-" field.
  local root_opts tmp_fs
  root_opts=$(awk '$5 == "/" { o = $6 } END { print o }' "/proc/$node_pid/mountinfo")
  tmp_fs=$(awk '$5 == "/tmp" { for (i = 7; i < NF; i++) if ($i == "-") t = $(i + 1) } END { print t }' "/proc/$node_pid/mountinfo")
  case $root_opts in ro|ro,*) ;; *) problems+=("the root is mounted $root_opts for node, not read-only") ;; esac
  [ "$tmp_fs" = tmpfs ] || problems+=("/tmp is '$tmp_fs' for node, not a tmpfs")
  [ "$(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' "/proc/$node_pid/net/dev" | tr '\n' ' ')" = "lo " ] || problems+=("node sees network interfaces other than lo")
  [ "$(readlink "/proc/$node_pid/cwd")" = "${ROOTFS%/}$IMG_WD" ] || problems+=("node's working directory is not $IMG_WD")
  if [ ${#problems[@]} -eq 0 ]; then
    ok "run: tini is PID 1 of its own PID namespace; tini and node run as uid/gid $IMG_USER with no supplementary groups and no capabilities, in $IMG_WD, on a read-only root with a tmpfs /tmp and only lo"
  else
    for p in "${problems[@]}"; do fail "run: $p"; done
  fi
}

# start_sim NAME SCENARIO [ARGS...]: `stub-provider sim` from the host's dist/, in the loopback-only
# network namespace, on 127.0.0.1:0; its ready line gives the endpoint and the provider's key.
start_sim() {
  local name=$1 scenario=$2; shift 2
  ip netns exec "$NETNS" node "$REPO/dist/src/main.js" sim --scenario "$scenario" --dump "$W/sim-$name.dump" "$@" \
    >"$W/sim-$name.out" 2>"$W/sim-$name.err" </dev/null &
  local pid=$! i
  eval "sim_$name=$pid"
  local ready=
  for i in $(seq 1 150); do
    # The ready line is complete once a newline follows it.
    if ready=$(node -e '
      const t = require("fs").readFileSync(process.argv[1], "utf8");
      if (!t.includes("\n")) process.exit(1);
      const r = JSON.parse(t.split("\n")[0]);
      const key = r.keys["infra-provider:bare-metal"];
      if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(r.endpoint) || !key) process.exit(2);
      require("fs").writeFileSync(process.argv[2], key, { mode: 0o600 });
      console.log(r.endpoint);
    ' "$W/sim-$name.out" "$W/sim-$name.key" 2>/dev/null); then break; fi
    ready=
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  [ -n "$ready" ] || { fail "sim $name: no ready line with a loopback endpoint and a bare-metal key within 30 s"; tail_of "$W/sim-$name.err" 10; return 1; }
  SIM_ENV=("OMNI_ENDPOINT=$ready" "OMNI_SERVICE_ACCOUNT_KEY=$(cat "$W/sim-$name.key")")
}

stop_sim() {
  local pid_var=sim_$1 i
  local pid=${!pid_var}
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# json_field FILE a.b: the value at that path of the JSON document in FILE, or "(no JSON)".
json_field() {
  node -e '
    let v; try { v = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); } catch { console.log("(no JSON)"); process.exit(0); }
    for (const k of process.argv[2].split(".")) v = v == null ? undefined : v[k];
    console.log(typeof v === "string" ? v : JSON.stringify(v));
  ' "$1" "$2" | inert
}

t=$SECONDS
if ! unshare --pid --fork --mount-proc true 2>"$W/unshare.err" || ! ip netns add "$NETNS-probe" 2>>"$W/unshare.err"; then
  tail_of "$W/unshare.err" 3
  skip "the run checks: this machine does not allow PID or network namespaces to be made"
else
  ip netns del "$NETNS-probe"
  run_checks
  say "run checks took $((SECONDS - t)) s"
fi
finish
