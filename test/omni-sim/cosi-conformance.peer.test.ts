// COSI's own conformance suite (cosi-project/runtime pkg/state/conformance) judges the simulated
// Omni: test/go/cosi-state's test binary runs it over the /api gateway of `stub-provider sim` (the
// built CLI), signed with go-api-signature as an infra provider of the scenario, and each of its
// cases is one test here. A case passes, or is listed in test/go/cosi-state/not-applicable.yaml with
// the reason it cannot apply and a piece of the failure that shows that reason; a listed case that
// passes fails here (take it off the list). The same suite against cosi-project/runtime's own
// in-memory State behind the same gateway must pass in full: it shows that the gateway client is
// sound, so a failure against the sim is the sim's.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosiStateBinaries, REPO, startSimProcess } from '../helpers/cosi-state.js';
import { runConformance, type CaseResult } from '../helpers/cosi-conformance.js';

interface NotApplicable {
  case: string;
  reason: string;
  shows: string;
}

const LIST = join(REPO, 'test', 'go', 'cosi-state', 'not-applicable.yaml');
const notApplicable = new Map((parse(readFileSync(LIST, 'utf8')) as NotApplicable[]).map((n) => [n.case, n]));
const PROVIDER = 'cosi';
const SCENARIO = `
omni: { version: "1.9.3" }
identities:
  - { name: "infra-provider:${PROVIDER}", role: InfraProvider }
resources:
  - metadata: { namespace: infra-provider, type: InfraProviders.omni.sidero.dev, id: ${PROVIDER} }
    proto_spec: ""
`;
const RUN_TIMEOUT_MS = 5 * 60_000;

// The suite's cases, named before anything runs (the test binary lists them).
const { cases } = await runConformance(cosiStateBinaries().conformance, 'TestCases', {});

it('the suite has cases, and every listed case is one of them', () => {
  expect(cases.length).toBeGreaterThan(20);
  for (const name of notApplicable.keys())
    expect(cases, `${name} in not-applicable.yaml is not a case of COSI's suite`).toContain(name);
  for (const n of notApplicable.values())
    expect(n.reason.length > 40 && n.shows.length > 0, `${n.case}: a reason and what shows it`).toBe(true);
});

describe('COSI conformance vs stub-provider sim', () => {
  let results: Map<string, CaseResult>;
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const sim = await startSimProcess(SCENARIO);
    close = sim.close;
    const key = sim.keys[`infra-provider:${PROVIDER}`];
    if (!key) throw new Error(`the sim generated no key for infra-provider:${PROVIDER}`);
    results = (
      await runConformance(cosiStateBinaries().conformance, 'TestSim', {
        COSI_SIM_ENDPOINT: sim.endpoint,
        COSI_SIM_KEY: key,
      })
    ).results;
  }, RUN_TIMEOUT_MS);
  afterAll(async () => {
    await close?.();
  });

  for (const name of cases) {
    const na = notApplicable.get(name);
    it(na ? `${name} (listed as not applicable)` : name, () => {
      const r = results.get(name);
      expect(r, `${name} did not run`).toBeDefined();
      if (!na) {
        expect(r?.action, `${name} against the sim:\n${r?.output}`).toBe('pass');
        return;
      }
      expect(r?.action, `${name} passes now: take it off ${LIST}`).not.toBe('pass');
      expect(r?.output, `${name} failed, but not for the listed reason`).toContain(na.shows);
    });
  }
});

describe("COSI conformance vs cosi-project/runtime's own State behind the same gateway", () => {
  let results: Map<string, CaseResult>;
  beforeAll(async () => {
    results = (await runConformance(cosiStateBinaries().conformance, 'TestServer', {})).results;
  }, RUN_TIMEOUT_MS);

  for (const name of cases) {
    it(name, () => {
      const r = results.get(name);
      expect(r?.action, `${name} against COSI's own State:\n${r?.output}`).toBe('pass');
    });
  }
});
