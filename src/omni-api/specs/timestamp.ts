// google.protobuf.Timestamp <-> RFC 3339, as Omni's gateway (protojson) prints it: UTC with `Z` and
// 0, 3, 6 or 9 fractional digits. Seconds are int64 (the zero Go time is -62135596800), so bigint.

import { SpecError } from './schema.js';

export interface TimestampParts {
  seconds: bigint;
  nanos: number;
}

/** protojson's valid range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z. */
const MIN_SECONDS = -62135596800n;
const MAX_SECONDS = 253402300799n;

export function formatTimestamp(t: TimestampParts): string {
  if (
    t.seconds < MIN_SECONDS ||
    t.seconds > MAX_SECONDS ||
    t.nanos < 0 ||
    t.nanos > 999_999_999 ||
    !Number.isInteger(t.nanos)
  ) {
    throw new SpecError('STUB_SPEC_INVALID', `timestamp out of range: seconds=${t.seconds} nanos=${t.nanos}`);
  }
  const base = new Date(Number(t.seconds) * 1000).toISOString(); // YYYY-MM-DDTHH:MM:SS.000Z for years 1..9999
  let frac = '';
  if (t.nanos !== 0) {
    const digits = String(t.nanos).padStart(9, '0');
    frac = '.' + (t.nanos % 1_000_000 === 0 ? digits.slice(0, 3) : t.nanos % 1000 === 0 ? digits.slice(0, 6) : digits);
  }
  return `${base.slice(0, 19)}${frac}Z`;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

export function parseTimestamp(s: string): TimestampParts {
  const m = RFC3339.exec(s);
  if (!m) throw new SpecError('STUB_SPEC_INVALID', `not an RFC 3339 timestamp: ${JSON.stringify(s)}`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, 0);
  if (
    d.getUTCFullYear() !== year ||
    d.getUTCMonth() !== month - 1 ||
    d.getUTCDate() !== day ||
    hour > 23 ||
    minute > 59 ||
    second > 59
  ) {
    throw new SpecError('STUB_SPEC_INVALID', `not a valid date and time: ${JSON.stringify(s)}`);
  }
  let seconds = BigInt(d.getTime() / 1000);
  if (m[8] === undefined) {
    const offset = (Number(m[10]) * 60 + Number(m[11])) * 60;
    seconds += BigInt(m[9] === '-' ? offset : -offset);
  }
  const nanos = m[7] === undefined ? 0 : Number(m[7].padEnd(9, '0'));
  const t = { seconds, nanos };
  formatTimestamp(t); // range check
  return t;
}
