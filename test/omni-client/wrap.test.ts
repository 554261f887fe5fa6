// wrap.ts: teardown, removeFinalizers and update-with-conflicts written once over any CoreState
// (docs/design.md rules 3 and 4). A scripted backend answers each Update as told, so that every
// branch of the conflict loop is reached: bounded attempts, what is read again, what is thrown.

import { describe, expect, it } from 'vitest';
import {
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  UnavailableError,
} from '../../src/omni-api/errors.js';
import { newMetadata, type Pointer, type Resource } from '../../src/omni-api/resource.js';
import type { CoreState, UpdateOptions } from '../../src/omni-api/state.js';
import { wrapCore } from '../../src/omni-client/wrap.js';

const P: Pointer = { namespace: 'infra-provider', type: 'InfraMachines.omni.sidero.dev', id: 'm1' };
const stored = (version: string, over: Partial<Resource['metadata']> = {}): Resource => ({
  metadata: newMetadata(P, {
    version,
    owner: 'InfraMachineController',
    phase: 'tearingDown',
    finalizers: ['bm.A', 'Other'],
    ...over,
  }),
  spec: { protoSpec: new Uint8Array([8, 1]) },
});

type Answer = Error | 'ok';

/** A backend whose Get answers `current()` (NotFound when undefined) and whose Updates answer `script` in turn. */
function scripted(script: Answer[], current: () => Resource | undefined = () => stored('5')) {
  const log: string[] = [];
  const sent: { r: Resource; opts: UpdateOptions | undefined }[] = [];
  const core: CoreState = {
    get: async () => {
      log.push('Get');
      const r = current();
      if (!r) throw new NotFoundError('gone');
      return r;
    },
    update: async (r, opts) => {
      log.push('Update');
      sent.push({ r, opts });
      const a = script.shift() ?? 'ok';
      if (a !== 'ok') throw a;
      return { ...r, metadata: { ...r.metadata, version: String(Number(r.metadata.version) + 1) } };
    },
    list: () => Promise.reject(new Error('not used')),
    create: () => Promise.reject(new Error('not used')),
    destroy: () => Promise.reject(new Error('not used')),
    watchKind: () => {
      throw new Error('not used');
    },
  };
  const pauses: number[] = [];
  const state = wrapCore(core, {
    random: () => 0,
    delay: async (ms, signal) => {
      pauses.push(ms);
      if (signal?.aborted) throw new Error('aborted');
    },
  });
  return { state, log, sent, pauses };
}

const conflict = () => new FailedPreconditionError('version conflict');

describe('update-with-conflicts, once for every backend', () => {
  it('a version conflict is read again and retried, at most 8 Updates; then the last conflict is thrown', async () => {
    const h = scripted(Array.from({ length: 10 }, conflict));
    await expect(h.state.removeFinalizers(P, ['bm.A'])).rejects.toBeInstanceOf(FailedPreconditionError);
    expect(h.log).toEqual(Array.from({ length: 8 }, () => ['Get', 'Update']).flat());
    expect(h.pauses).toEqual([10, 20, 40, 80, 160, 320, 500]);
  });

  it('writes back as the current owner what was read but the change, and keeps the order of what stays', async () => {
    const h = scripted(['ok']);
    const read = stored('5', { finalizers: ['x', 'bm.A', 'y'], labels: { l: 'v' } });
    const r = await h.state.removeFinalizers(read, ['bm.A']);
    expect(r).toMatchObject({ outcome: 'removed', attempts: 1, before: read });
    expect(h.log).toEqual(['Update']);
    expect(h.sent[0]?.r.metadata).toMatchObject({
      version: '5',
      finalizers: ['x', 'y'],
      labels: { l: 'v' },
      phase: 'tearingDown',
    });
    expect(h.sent[0]?.r.spec.protoSpec).toEqual(read.spec.protoSpec);
    expect(h.sent[0]?.opts).toMatchObject({ owner: 'InfraMachineController', before: read });
    expect(h.sent[0]?.opts?.expectedPhase).toBeUndefined();
    expect(read.metadata.finalizers).toEqual(['x', 'bm.A', 'y']);
  });

  it('a PermissionDenied is read again: retried when the resource changed meanwhile, thrown when not', async () => {
    let version = '5';
    const changed = scripted(
      [new PermissionDeniedError('not allowed to update other than setting finalizers'), 'ok'],
      () => stored(version),
    );
    version = '6';
    const r = await changed.state.removeFinalizers(stored('5'), ['bm.A']);
    expect(r).toMatchObject({ outcome: 'removed', attempts: 2 });
    expect(changed.log).toEqual(['Update', 'Get', 'Update']);
    expect(changed.sent[1]?.r.metadata.version).toBe('6');

    const refused = scripted([new PermissionDeniedError('no access')]);
    await expect(refused.state.removeFinalizers(stored('5'), ['bm.A'])).rejects.toThrow(/no access/);
    expect(refused.log).toEqual(['Update', 'Get']);
  });

  it('InvalidArgument is a phase conflict (read again) only when an expected phase was sent', async () => {
    const running = () => stored('5', { phase: 'running' });
    const torn = scripted([new InvalidArgumentError('expected phase running')], running);
    expect(await torn.state.teardown(P)).toBe(false);
    expect(torn.log).toEqual(['Get', 'Update', 'Get', 'Update']);
    expect(torn.sent.map((s) => s.opts?.expectedPhase)).toEqual(['running', 'running']);
    expect(torn.sent[0]?.r.metadata.phase).toBe('tearingDown');

    const removing = scripted([new InvalidArgumentError('validation failed')]);
    await expect(removing.state.removeFinalizers(P, ['bm.A'])).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(removing.log).toEqual(['Get', 'Update']);
  });

  it('NotFound: gone once a Get of the call found the resource, not-found before (design rule 4)', async () => {
    const afterGet = scripted([new NotFoundError('destroyed meanwhile')]);
    expect(await afterGet.state.removeFinalizers(P, ['bm.A'])).toMatchObject({ outcome: 'gone', attempts: 1 });
    expect(
      await scripted([new NotFoundError('destroyed meanwhile')], () =>
        stored('5', { phase: 'running' }),
      ).state.teardown(P),
    ).toBe(true);

    const listedOnly = scripted([new NotFoundError('no such ID')]);
    expect(await listedOnly.state.removeFinalizers(stored('5'), ['bm.A'])).toMatchObject({
      outcome: 'not-found',
      attempts: 1,
    });
    expect(listedOnly.log).toEqual(['Update']);

    let present = true;
    const reread = scripted([conflict()], () => (present ? stored('5') : undefined));
    const pending = reread.state.removeFinalizers(stored('4'), ['bm.A']);
    present = false;
    expect(await pending).toMatchObject({ outcome: 'not-found' });
    await expect(scripted([], () => undefined).state.teardown(P)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('teardown writes nothing when already tearing down, and says whether anything still holds it', async () => {
    const h = scripted([]);
    expect(await h.state.teardown(P)).toBe(false);
    expect(await scripted([], () => stored('5', { finalizers: [] })).state.teardown(P)).toBe(true);
    expect(h.log).toEqual(['Get']);
  });

  it('a resource read without its spec is read again first; errors but conflicts are thrown at once', async () => {
    const h = scripted([new UnavailableError('overloaded')]);
    const omitted: Resource = { ...stored('5'), spec: { protoSpec: new Uint8Array(), omitted: true } };
    await expect(h.state.removeFinalizers(omitted, ['bm.A'])).rejects.toBeInstanceOf(UnavailableError);
    expect(h.log).toEqual(['Get', 'Update']);
    expect(h.sent[0]?.r.spec.protoSpec).toEqual(new Uint8Array([8, 1]));
  });

  it('a cancelled caller stops between attempts', async () => {
    const ac = new AbortController();
    ac.abort(new Error('SIGTERM'));
    const h = scripted([conflict(), conflict()]);
    await expect(h.state.removeFinalizers(stored('5'), ['bm.A'], { signal: ac.signal })).rejects.toMatchObject({
      code: 'OMNI_CANCELED',
    });
    expect(h.log).toEqual(['Update']);
  });
});
