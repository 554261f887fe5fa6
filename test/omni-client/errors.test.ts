// The API's and the client's errors have one root (ApiError): each a stable code, whether it is retriable, and
// the exit code that code maps to (docs/design.md, "Exit codes"; docs/operator-guide.md lists the codes).

import { describe, expect, it } from 'vitest';
import * as apiErrors from '../../src/omni-api/errors.js';
import * as clientErrors from '../../src/omni-client/errors.js';
import {
  ApiError,
  GrpcCode,
  OmniError,
  WatchErroredError,
  errorFromStatus,
  NotFoundError,
  PermissionDeniedError,
} from '../../src/omni-api/errors.js';
import {
  ClockSkewError,
  ConfigError,
  KeyError,
  ProtocolError,
  RedirectError,
  SpecOmittedError,
  TransportError,
  brokeInTransit,
  hasCode,
} from '../../src/omni-client/errors.js';
import { SpecError } from '../../src/omni-api/specs/schema.js';
import { describeError, exitCodeFor } from '../../src/exit-codes.js';

const OMNI_CODES: [number, string, number][] = [
  [GrpcCode.Canceled, 'OMNI_CANCELED', 1],
  [GrpcCode.Unknown, 'OMNI_UNKNOWN', 1],
  [GrpcCode.InvalidArgument, 'OMNI_INVALID_ARGUMENT', 1],
  [GrpcCode.DeadlineExceeded, 'OMNI_DEADLINE_EXCEEDED', 5],
  [GrpcCode.NotFound, 'OMNI_NOT_FOUND', 1],
  [GrpcCode.AlreadyExists, 'OMNI_ALREADY_EXISTS', 1],
  [GrpcCode.PermissionDenied, 'OMNI_PERMISSION_DENIED', 4],
  [GrpcCode.ResourceExhausted, 'OMNI_RESOURCE_EXHAUSTED', 1],
  [GrpcCode.FailedPrecondition, 'OMNI_FAILED_PRECONDITION', 1],
  [GrpcCode.Aborted, 'OMNI_ABORTED', 1],
  [GrpcCode.OutOfRange, 'OMNI_OUT_OF_RANGE', 1],
  [GrpcCode.Unimplemented, 'OMNI_UNIMPLEMENTED', 1],
  [GrpcCode.Internal, 'OMNI_INTERNAL', 1],
  [GrpcCode.Unavailable, 'OMNI_UNAVAILABLE', 5],
  [GrpcCode.DataLoss, 'OMNI_DATA_LOSS', 1],
  [GrpcCode.Unauthenticated, 'OMNI_UNAUTHENTICATED', 4],
];

describe('one error root', () => {
  it.each(OMNI_CODES)(
    'gRPC code %i is %s (exit %i), of its class, under ApiError; only Unavailable is retriable',
    (grpc, code, exit) => {
      const e = errorFromStatus(grpc, 'says Omni', {
        method: '/cosi.resource.State/Get',
        httpStatus: 500,
        serverDate: 'Tue, 01 Jan 2030 00:00:00 GMT',
      });
      expect(e).toBeInstanceOf(ApiError);
      expect(e).toBeInstanceOf(OmniError);
      expect({ code: e.code, grpcCode: e.grpcCode, retriable: e.retriable, exit: exitCodeFor(e) }).toEqual({
        code,
        grpcCode: grpc,
        retriable: grpc === GrpcCode.Unavailable,
        exit,
      });
      expect(e.name).toBe(e.constructor.name);
      expect((e.constructor as unknown as { CODE: string }).CODE).toBe(code);
      expect(e.serverDate).toBe('Tue, 01 Jan 2030 00:00:00 GMT');
      expect(e.method).toBe('/cosi.resource.State/Get');
      expect(hasCode(e, code as clientErrors.ClientErrorCode)).toBe(true);
      expect(describeError(e)).toMatchObject({ code, exitCode: exit });
    },
  );

  it("the client's own errors: stable codes and exit codes, retriable only when the transport says so", () => {
    const cases: [ApiError, string, number][] = [
      [new ConfigError('bad endpoint'), 'STUB_CONFIG', 2],
      [new KeyError('not base64'), 'STUB_KEY_INVALID', 2],
      [new RedirectError('to /login'), 'STUB_REDIRECTED', 2],
      [new ClockSkewError('a day off'), 'STUB_CLOCK_SKEW', 4],
      [new TransportError('ECONNREFUSED'), 'STUB_TRANSPORT', 5],
      [new TransportError('ECONNRESET', { retriable: true }), 'STUB_TRANSPORT', 5],
      [new ProtocolError('STUB_PROTOCOL', 'not JSON'), 'STUB_PROTOCOL', 5],
      [new ProtocolError('STUB_HTTP_STATUS', 'a 404 page'), 'STUB_HTTP_STATUS', 5],
      [new ProtocolError('STUB_ANSWER_TOO_LARGE', 'big'), 'STUB_ANSWER_TOO_LARGE', 5],
      [new ProtocolError('STUB_LINE_TOO_LONG', 'long'), 'STUB_LINE_TOO_LONG', 5],
      [new ProtocolError('STUB_LIST_TOO_LONG', 'many'), 'STUB_LIST_TOO_LONG', 5],
      [new ProtocolError('STUB_DUPLICATE_ID', 'twice'), 'STUB_DUPLICATE_ID', 5],
      [new SpecOmittedError('no spec'), 'CLIENT_SPEC_OMITTED', 5],
      [new SpecError('STUB_SPEC_DECODE', 'bad bytes'), 'STUB_SPEC_DECODE', 5],
      [new WatchErroredError('buffer overrun'), 'OMNI_WATCH_ERRORED', 1],
    ];
    for (const [e, code, exit] of cases) {
      expect(e, code).toBeInstanceOf(ApiError);
      expect({ code: e.code, exit: exitCodeFor(e), described: describeError(e).code }, code).toEqual({
        code,
        exit,
        described: code,
      });
    }
    expect(cases.map(([e]) => e.retriable)).toEqual(cases.map(([e]) => e.message === 'ECONNRESET'));
    expect(describeError(new Error('a bug'))).toMatchObject({ code: 'STUB_INTERNAL', exitCode: 1 });
  });

  it("every error class of both errors.ts (the API's, the client's) is an ApiError", () => {
    const classes = Object.entries({ ...apiErrors, ...clientErrors }).filter(
      ([k, v]) => typeof v === 'function' && /^[A-Z]\w*Error$/.test(k) && 'prototype' in v,
    );
    expect(classes.length).toBeGreaterThan(20);
    for (const [name, cls] of classes)
      expect((cls as { prototype: unknown }).prototype instanceof ApiError || cls === ApiError, name).toBe(true);
  });

  it('hasCode asks by code, instanceof by class; brokeInTransit says which failures a watch reconnects after', () => {
    const nf = new NotFoundError('gone');
    expect(hasCode(nf, 'OMNI_NOT_FOUND')).toBe(true);
    expect(hasCode(nf, 'OMNI_PERMISSION_DENIED')).toBe(false);
    expect(hasCode({ code: 'OMNI_NOT_FOUND' }, 'OMNI_NOT_FOUND')).toBe(false);
    expect(nf).toBeInstanceOf(NotFoundError);
    expect(nf).not.toBeInstanceOf(PermissionDeniedError);
    expect(new TransportError('x')).not.toBeInstanceOf(OmniError);
    const resumed = [
      new TransportError('reset'),
      errorFromStatus(GrpcCode.Unavailable, ''),
      errorFromStatus(GrpcCode.DeadlineExceeded, ''),
      errorFromStatus(GrpcCode.Aborted, ''),
      errorFromStatus(GrpcCode.Canceled, ''),
    ];
    const thrown = [
      nf,
      new PermissionDeniedError('no'),
      new ProtocolError('STUB_PROTOCOL', 'x'),
      new WatchErroredError('overrun'),
      new RedirectError('x'),
      new Error('plain'),
    ];
    expect(resumed.map(brokeInTransit)).toEqual(resumed.map(() => true));
    expect(thrown.map(brokeInTransit)).toEqual(thrown.map(() => false));
  });
});
