// Runs the shell blocks of a Markdown document as written, against simulated Omnis, with the
// installed package's `stub-provider` (pack.test.ts): every README and operator-guide command must work
// from the tarball. The blocks run in order as one bash script in a folder of their own.
// What is not ours is stood in for by shell functions: `omnictl get <type> -o yaml` prints the
// documents of that type from a fixture (what omnictl would print of the walkthroughs scenario),
// any other omnictl, docker, kubectl, git and npm call prints that it was not run. `npx stub-provider`,
// `stub-provider` and `node dist/src/main.js` (a clone's) run the installed bin and record each call
// (exit code, stderr); `sim` is started in the background and awaited (the guide says "leave it
// running"). The operator's environment is what the document sets, except the placeholders: an
// endpoint left at https://omni.example.com (or none) is the walkthroughs sim, and the key is the one
// of --id for the sim the endpoint names (the guide's "get a key" steps, done).

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { T } from '../../src/omni-api/resource.js';
import { sysVersionResource } from '../../src/omni-sim/behaviour.js';
import { dumpScenario, parseScenario } from '../../src/omni-sim/scenario/scenario.js';

/** The shell blocks (```sh, ```bash, ```shell) of a Markdown text, indentation of list items removed. */
export function shellBlocks(markdown: string): string[] {
  const blocks: string[] = [];
  let cur: string[] | undefined;
  let indent = 0;
  for (const line of markdown.split('\n')) {
    const fence = /^(\s*)```(\w*)\s*$/.exec(line);
    if (fence) {
      if (cur) {
        blocks.push(cur.join('\n'));
        cur = undefined;
      } else if (['sh', 'bash', 'shell'].includes(fence[2]!)) {
        cur = [];
        indent = fence[1]!.length;
      } else cur = undefined;
      continue;
    }
    cur?.push(line.slice(Math.min(indent, line.length - line.trimStart().length)));
  }
  return blocks;
}

/**
 * `omnictl get <alias> -o yaml` output of a scenario by alias (a type's plural in lower case), as omnictl prints it.
 */
export function omnictlFixture(scenarioFile: string): Record<string, string> {
  const sc = parseScenario(readFileSync(scenarioFile, 'utf8'));
  sc.resources.push(sysVersionResource(sc.omniVersion, Date.parse('2026-03-01T00:00:00Z')));
  const plain = (parseYaml(dumpScenario(sc)) as { resources: { metadata: { namespace: string; type: string } }[] })
    .resources;
  const out: Record<string, string> = {};
  for (const t of Object.values(T)) out[t.split('.')[0]!.toLowerCase()] = '';
  for (const r of plain) {
    // Omni has no resource definitions for a provider's own types: omnictl cannot print them.
    if (r.metadata.namespace.startsWith('infra-provider:')) continue;
    const alias = r.metadata.type.split('.')[0]!.toLowerCase();
    // omnictl separates documents with ---, none before the first (client/pkg/omnictl/output/yaml.go).
    out[alias] = `${out[alias] ? `${out[alias]}---\n` : ''}${stringify(r, { lineWidth: 0 })}`;
  }
  return out;
}

export interface DocCall {
  /** The exit code, or `ready` / `not-ready` for a sim started in the background. */
  result: string;
  command: string;
  stderr: string;
}

/**
 * The bash script that runs `blocks` with the stand-ins; `work` holds its state, `bin` is the installed stub-provider.
 */
export function docScript(
  blocks: string[],
  o: { work: string; bin: string; walkEndpoint: string; walkKeys: string; fixture: string },
): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return `#!/usr/bin/env bash
set +e
BIN=${q(o.bin)}
STATE=${q(o.work)}
printf '%s\\t%s\\n' ${q(o.walkEndpoint)} ${q(o.walkKeys)} > "$STATE/sims"
n=0
omnictl() {
  if [ "$1" = get ] && [ "$3" = -o ] && [ "$4" = yaml ]; then
    node -e '
      const f = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const a = process.argv[2].toLowerCase();
      if (!(a in f)) { console.error("resource " + JSON.stringify(a) + " is not registered"); process.exit(1); }
      process.stdout.write(f[a]);' ${q(o.fixture)} "$2"
    return
  fi
  echo "omnictl $*: not run here" >&2
}
docker() { echo "docker $*: not run here" >&2; }
kubectl() { echo "kubectl $*: not run here" >&2; }
npm() { echo "npm $*: not run here" >&2; }
stub_provider() {
  n=$((n+1))
  if [ "$1" = sim ]; then
    local args=("$@") keys=""
    for ((i=0; i<\${#args[@]}; i++)); do [ "\${args[i]}" = --keys-dir ] && keys="\${args[i+1]}"; done
    [ -z "$keys" ] && keys="$STATE/sim-keys-$n" && args+=(--keys-dir "$keys")
    "$BIN" "\${args[@]}" > "$STATE/sim-$n.out" 2> "$STATE/err-$n" &
    echo $! >> "$STATE/pids"
    for i in $(seq 1 300); do [ -s "$STATE/sim-$n.out" ] && break; sleep 0.1; done
    if [ -s "$STATE/sim-$n.out" ]; then
      printf '%s\\t%s\\n' "$(cat "$keys/endpoint")" "$(cd "$keys" && pwd)" >> "$STATE/sims"; r=ready
    else
      r=not-ready
    fi
    printf '%s\\t%s\\t%s\\n' "$r" "err-$n" "stub-provider $*" >> "$STATE/calls"
    return 0
  fi
  local id="" prev="" a
  for a in "$@"; do [ "$prev" = --id ] && id="$a"; prev="$a"; done
  local ep="$OMNI_ENDPOINT" key="$OMNI_SERVICE_ACCOUNT_KEY"
  case "$ep" in ""|https://omni.example.com) ep=${q(o.walkEndpoint)};; esac
  local dir; dir="$(awk -F'\\t' -v e="$ep" '$1 == e { print $2 }' "$STATE/sims" | tail -1)"
  [ -n "$id" ] && [ -n "$dir" ] && [ -f "$dir/$id.key" ] && key="$(cat "$dir/$id.key")"
  OMNI_ENDPOINT="$ep" OMNI_SERVICE_ACCOUNT_KEY="$key" "$BIN" "$@" 2> "$STATE/err-$n"
  local code=$?
  printf '%s\\t%s\\t%s\\n' "$code" "err-$n" "stub-provider $*" >> "$STATE/calls"
  return $code
}
npx() {
  if [ "$1" = stub-provider ]; then shift; stub_provider "$@"; return; fi
  echo "npx $*: not run here" >&2
}
git() { echo "git $*: not run here" >&2; }
# From a clone (README "Before it is published"): the built entry in place, or on PATH after npm link.
node() {
  if [ "$1" = dist/src/main.js ]; then shift; stub_provider "$@"; return; fi
  command node "$@"
}
stub-provider() { stub_provider "$@"; }
# ---- the document's blocks, in order
${blocks.join('\n# ----\n')}
`;
}

/** The calls the script recorded. */
export function docCalls(work: string): DocCall[] {
  let text = '';
  try {
    text = readFileSync(path.join(work, 'calls'), 'utf8');
  } catch {
    return [];
  }
  return text
    .trimEnd()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [result, err, ...command] = l.split('\t');
      return { result: result!, command: command.join('\t'), stderr: readFileSync(path.join(work, err!), 'utf8') };
    });
}

/**
 * Why a call did not work as the document means it, or undefined: flags and variables all known,
 * `--help` and `completion` 0, `plan` 0 or 10, `demo` 0, a run 0 (without --yes, off a terminal,
 * 2 asking for --yes is what the guide describes: on a terminal it asks), a sim ready.
 */
export function problemOf(c: DocCall): string | undefined {
  const words = c.command.split(/\s+/).slice(1);
  if (
    /Unknown argument|unknown flag|unknown command|did you mean|matches no flag|Run 'stub-provider --help'/.test(
      c.stderr,
    )
  )
    return `refused its arguments: ${c.stderr}`;
  if (words[0] === 'sim') return c.result === 'ready' ? undefined : `the sim did not get ready: ${c.stderr}`;
  const code = Number(c.result);
  if (words.includes('--help') || words.includes('--version') || words[0] === 'completion' || words[0] === 'demo')
    return code === 0 ? undefined : `exit ${code}: ${c.stderr}`;
  if (words[0] === 'plan') return code === 0 || code === 10 ? undefined : `plan exit ${code}: ${c.stderr}`;
  if (code === 0) return undefined;
  if (code === 2 && !words.includes('--yes') && /pass --yes/.test(c.stderr)) return undefined;
  return `exit ${code}: ${c.stderr}`;
}

export function writeFixture(file: string, fixture: Record<string, string>): void {
  writeFileSync(file, JSON.stringify(fixture));
}
