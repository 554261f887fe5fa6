// One call as the transport's parts see it: what the caller passes with it, and how an error names
// it (the method and the resource, whose ID may come from a server: escaped).

import { escapeControl } from '../../omni-api/untrusted.js';
import type { OmniErrorContext } from '../../omni-api/errors.js';
import type { Pointer } from '../../omni-api/resource.js';
import { describePointer } from '../../omni-api/resource.js';
import { fullMethod, type MethodName } from '../../omni-api/wire.js';

export interface CallContext {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /** The resource the call is about, for error messages. */
  resource?: Pointer | undefined;
  /** Called before the call is sent again after a failed attempt (that attempt may have reached Omni). */
  onRetry?: (() => void) | undefined;
}

/** The fields an error of this call carries. */
export function errCtx(method: MethodName, ctx: CallContext): OmniErrorContext {
  return { method: fullMethod(method), ...(ctx.resource ? { resource: ctx.resource } : {}) };
}

/** The call and its resource, for the start of an error message. */
export function where(method: MethodName, ctx: CallContext): string {
  return `${fullMethod(method)}${ctx.resource ? ` ${escapeControl(describePointer(ctx.resource))}` : ''}`;
}
