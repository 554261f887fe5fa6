// Reads over any State or CoreState (the gateway client or a test double).

import type { Pointer, Resource } from './resource.js';
import { NotFoundError, isOmniError } from './errors.js';
import type { CallOptions, CoreState } from './types.js';

/** A Get that answers undefined when the resource does not exist (NotFound); every other error is thrown. */
export async function getIfExists(state: Pick<CoreState, 'get'>, p: Pointer, opts: CallOptions = {}): Promise<Resource | undefined> {
  try {
    return await state.get(p, opts);
  } catch (err) {
    if (isOmniError(err, NotFoundError)) return undefined;
    throw err;
  }
}
