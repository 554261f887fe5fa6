// A dump served read-only as the provider's account sees it (src/omni-sim/scenario/dump-state.ts), what a
// dump says about itself (summarizeDump), and the Omni version a header-less dump names.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NotFoundError, PermissionDeniedError } from '../../../src/omni-api/errors.js';
import { NS_EPHEMERAL, NS_INFRA_PROVIDER, T } from '../../../src/omni-api/resource.js';
import { dumpState, ReadOnlyDumpError, summarizeDump } from '../../../src/omni-sim/scenario/dump-state.js';
import { parseScenario } from '../../../src/omni-sim/scenario/scenario.js';
import { decodeSpec } from '../../../src/omni-api/specs/codec.js';
import { SysVersionSpec } from '../../../src/omni-api/specs/messages.js';

const EXAMPLE = readFileSync(
  fileURLToPath(new URL('../../../scenarios/bare-metal-stuck.omnictl.yaml', import.meta.url)),
  'utf8',
);
const UUID = '9b2f6a10-0c1d-4e5f-8a9b-112233445566';

describe('summarizeDump', () => {
  it('names the registrations, the providers the resources name, and the kinds it holds', () => {
    const s = summarizeDump(parseScenario(EXAMPLE));
    expect(s.registered).toEqual(['bare-metal']);
    expect(s.named).toEqual(['bare-metal']);
    expect(s.has(NS_INFRA_PROVIDER, T.InfraMachine)).toBe(true);
    expect(s.has(NS_INFRA_PROVIDER, T.MachineRequest)).toBe(false);
    expect(s.hasNamespace('infra-provider:bare-metal')).toBe(true);
    expect(s.hasNamespace('infra-provider:other')).toBe(false);
  });
});

describe('dumpState', () => {
  const sc = parseScenario(EXAMPLE);

  it('answers Gets and Lists as Omni answers the provider; NotFound for what the dump lacks', async () => {
    const st = dumpState(sc, 'bare-metal');
    expect((await st.get({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: UUID })).metadata.phase).toBe(
      'tearingDown',
    );
    expect(await st.list(NS_INFRA_PROVIDER, T.InfraMachine)).toHaveLength(1);
    const missing = await st
      .get({ namespace: NS_INFRA_PROVIDER, type: T.MachineRequest, id: 'x' })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
  });

  it('as another provider: not registered, the way Omni refuses it', async () => {
    const e = await dumpState(sc, 'BareMetal')
      .list(NS_INFRA_PROVIDER, T.InfraMachine)
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(PermissionDeniedError);
    expect((e as Error).message).toMatch(/not registered in the system/);
  });

  it('writes nothing: every write and a watch throw', async () => {
    const st = dumpState(sc, 'bare-metal');
    const im = await st.get({ namespace: NS_INFRA_PROVIDER, type: T.InfraMachine, id: UUID });
    for (const p of [
      st.update(im),
      st.create(im),
      st.destroy(im.metadata),
      st.teardown(im.metadata),
      st.removeFinalizers(im, ['bare-metal.WipeStatusController']),
      st.updateWithConflicts(im, (r) => r),
    ]) {
      await expect(p).rejects.toBeInstanceOf(ReadOnlyDumpError);
    }
    const it = st.watchKind(NS_INFRA_PROVIDER, T.InfraMachine)[Symbol.asyncIterator]();
    await expect(it.next()).rejects.toBeInstanceOf(ReadOnlyDumpError);
  });
});

describe('the Omni version of a dump', () => {
  it('header-less dump with a SysVersion (omnictl get sysversions): that version; a header wins; else default', () => {
    const doc =
      'metadata:\n    namespace: ephemeral\n    type: SysVersions.system.sidero.dev\n    id: current\n    version: ' +
      '1\n    owner: ""\n    phase: running\n' +
      'spec:\n    backendversion: v1.9.3\n    instancename: omni\n    backendapiversion: 1\n';
    expect(parseScenario(`${EXAMPLE}\n---\n${doc}`).omniVersion).toBe('v1.9.3');
    expect(parseScenario(`omni: { version: "1.4.2" }\n---\n${EXAMPLE}\n---\n${doc}`).omniVersion).toBe('1.4.2');
    expect(parseScenario(EXAMPLE).omniVersion).toBe('1.3.4');
    expect(parseScenario(EXAMPLE).resources.some((r) => r.metadata.namespace === NS_EPHEMERAL)).toBe(false);
  });
});

describe('the SysVersion a dump is served with', () => {
  const sysVersion = async (text: string): Promise<unknown> => {
    try {
      const r = await dumpState(parseScenario(text), 'bare-metal').get({
        namespace: NS_EPHEMERAL,
        type: T.SysVersion,
        id: 'current',
      });
      return decodeSpec(SysVersionSpec, r.spec.protoSpec).value.backend_version;
    } catch (e) {
      return e;
    }
  };

  it("a header's version (a sim's dump) is served as the SysVersion that sim served; none is made up", async () => {
    expect(await sysVersion(`omni: { version: "1.9.3" }\n---\n${EXAMPLE}`)).toBe('v1.9.3');
    expect(await sysVersion(EXAMPLE)).toBeInstanceOf(NotFoundError);
  });
});
