// Reads over any State or CoreState (the gateway client or a test double).

import type { Pointer, Resource } from '../omni-api/resource.js';
import { NotFoundError } from '../omni-api/errors.js';
import { isOmniError } from './errors.js';
import type { CallOptions, CoreState } from '../omni-api/state.js';

/** A Get that answers undefined when the resource does not exist (NotFound); every other error is thrown. */
export async function getIfExists(state: Pick<CoreState, 'get'>, p: Pointer, opts: CallOptions = {}): Promise<Resource | undefined> {
  try {
    return await state.get(p, opts);
  } catch (err) {
    if (isOmniError(err, NotFoundError)) return undefined;
    throw err;
  }
}
