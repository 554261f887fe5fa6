// Shows that the State suites bite (docs/cosi-semantics.md): each mutation breaks one rule of the simulated Omni's
// COSI store, and the three suites that judge it must all fail on the mutated copy:
//   - test/omni-api/state-conformance.test.ts  (ours, modelled on COSI's: store, double, client);
//   - test/omni-client/state-api.peer.test.ts   (the client against the sim and against COSI);
//   - test/omni-sim/cosi-conformance.peer.test.ts   (COSI's own suite against `stub-provider sim`).
//
//   node scripts/state-mutations.mjs      (npm run test:state-mutations; .ci/run runs it after npm test)
//
// Prints one line per mutation and `state mutations caught: N/M`; exits 1 unless all are caught.

import { checkMutations } from './mutations.mjs';

const STORE = 'src/omni-sim/store/store.ts';
const STORE_WATCH = 'src/omni-sim/store/watch.ts';
const STORE_EVENTS = 'src/omni-sim/store/events.ts';

const MUTATIONS = [
  {
    name: 'a version conflict is answered as success',
    file: STORE,
    from: '    if (r.metadata.version !== cur.metadata.version) {',
    to: "    if (r.metadata.version === 'no such version') {",
  },
  {
    name: 'a watch drops every fifth event',
    file: STORE_EVENTS,
    from: '        w.queue.push(e);',
    to: '        if (e.pos % 5 !== 0) w.queue.push(e);',
  },
  {
    name: 'the owner is not checked',
    file: STORE,
    from: "  private checkOwner(cur: Resource, owner: string, op: 'update' | 'destroy'): void {\n",
    to:
      "  private checkOwner(cur: Resource, owner: string, op: 'update' | 'destroy'): void {\n    if (owner !== " +
      "'\\u0000') return;\n",
  },
  {
    name: 'Destroy ignores pending finalizers',
    file: STORE,
    from: '    if (cur.metadata.finalizers.length > 0) {',
    to: '    if (cur.metadata.finalizers.length < 0) {',
  },
  {
    name: 'a label-query update that stops a match stays an UPDATED',
    file: STORE_WATCH,
    from: '    if (before && now) return out(EventType.UPDATED, e.old);',
    to: '    if (before) return out(EventType.UPDATED, e.old);',
  },
];

process.exitCode = await checkMutations({
  label: 'state mutations',
  files: [
    'test/omni-api/state-conformance.test.ts',
    'test/omni-client/state-api.peer.test.ts',
    'test/omni-sim/cosi-conformance.peer.test.ts',
  ],
  mutations: MUTATIONS,
});
