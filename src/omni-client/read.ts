// Reads over any State or CoreState (the gateway client or a test double).

import type { Pointer, Resource } from '../omni-api/resource.js';
import { hasCode } from './errors.js';
import type { CallOptions, CoreState } from '../omni-api/state.js';

/** A Get that answers undefined when the resource does not exist (NotFound); every other error is thrown. */
export async function getIfExists(
  state: Pick<CoreState, 'get'>,
  p: Pointer,
  opts: CallOptions = {},
): Promise<Resource | undefined> {
  try {
    return await state.get(p, opts);
  } catch (err) {
    if (hasCode(err, 'OMNI_NOT_FOUND')) return undefined;
    throw err;
  }
}
