// The provider never sends a Watch without `options`: Omni before 1.6.5 answers one with HTTP 500 (a
// nil dereference in COSI's State server, recorded on 1.3.4). Every request a full run sends is
// recorded by a loopback proxy in front of the sim, for each example scenario, with --wait (its change
// feed and its waits for Omni's finalizers watch) and without, on 1.3.4 and 1.9.3.

import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createSim, type Sim } from '../../../src/omni-sim/index.js';
import { runIn } from '../../helpers/cli-config.js';
import { startTamperProxy, type TamperProxy } from '../../helpers/tamper-proxy.js';

const SCENARIOS = new URL('../../../scenarios/', import.meta.url);
const files = readdirSync(SCENARIOS)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

const open: { sim: Sim; proxy: TamperProxy }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.proxy.close();
    await o.sim.close();
  }
});

/** The scenario at `version`: its header's version replaced, or a header added (omnictl dumps have none). */
function atVersion(text: string, version: string): string {
  const header = /^omni:\s*\{\s*version:\s*"[^"]*"\s*\}\s*$/m;
  return header.test(text)
    ? text.replace(header, `omni: { version: "${version}" }`)
    : `${text}\n---\nomni: { version: "${version}" }\n`;
}

describe.each(files)('scenarios/%s', (file) => {
  it.each(
    ['1.3.4', '1.9.3'].flatMap(
      (v) =>
        [
          [v, false],
          [v, true],
        ] as const,
    ),
  )('Omni %s, --wait %s: every Watch the run sends has options', async (version, wait) => {
    const sim = await createSim(atVersion(readFileSync(new URL(file, SCENARIOS), 'utf8'), version));
    const proxy = await startTamperProxy(sim.endpoint);
    open.push({ sim, proxy });
    const provider = sim.scenario.identities.find((i) => i.role === 'InfraProvider')?.name ?? '';
    const id = provider.slice('infra-provider:'.length);
    const rep = await runIn(sim, id, wait ? ['--wait'] : [], { endpoint: proxy.endpoint });
    expect(rep.exitCode).toBe(0);
    const watches = proxy.seen.filter((r) => r.rpc === 'Watch');
    // Not vacuous: the run watched (its waits for Omni, and with --wait its change feed).
    expect(watches.length).toBeGreaterThan(0);
    for (const w of watches) {
      const options = (w.body as { options?: unknown } | undefined)?.options;
      expect(typeof options === 'object' && options !== null && !Array.isArray(options), JSON.stringify(w.body)).toBe(
        true,
      );
    }
  });
});
