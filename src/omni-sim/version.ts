// Omni versions as scenarios name them ("1.3", "1.3.4", "v1.4.0-beta.0"), parsed once and compared by
// major.minor.patch. Omni's behaviour changes at release boundaries (docs/omni-lifecycle.md 8); a
// pre-release counts as the release it leads to, since the changes the sim emulates first shipped
// in v1.4.0-beta.0 and carried on into v1.4.0.

export interface OmniVersion {
  major: number;
  minor: number;
  patch: number;
  /** `beta.0` for `v1.4.0-beta.0`; empty for releases. */
  prerelease: string;
  /** The text it was parsed from. */
  raw: string;
}

export class VersionError extends Error {
  readonly code = 'SIM_VERSION_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'VersionError';
  }
}

const VERSION_RE = /^v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?:-([0-9A-Za-z.-]+))?$/;

export function parseVersion(text: string): OmniVersion {
  const m = VERSION_RE.exec(text.trim());
  if (!m)
    throw new VersionError(
      `not an Omni version: ${JSON.stringify(text)} (expected e.g. "1.3", "1.3.4" or "v1.4.0-beta.0")`,
    );
  return {
    major: Number(m[1]),
    minor: Number(m[2]),
    patch: m[3] === undefined ? 0 : Number(m[3]),
    prerelease: m[4] ?? '',
    raw: text,
  };
}

function asVersion(v: OmniVersion | string): OmniVersion {
  return typeof v === 'string' ? parseVersion(v) : v;
}

/** Negative, zero or positive as `a` is older than, equal to or newer than `b` (pre-release ignored). */
export function compareVersions(a: OmniVersion | string, b: OmniVersion | string): number {
  const x = asVersion(a);
  const y = asVersion(b);
  return x.major - y.major || x.minor - y.minor || x.patch - y.patch;
}

/** True when `v` is `min` or newer: `atLeast('1.4.0-beta.0', '1.4')` is true, `atLeast('1.3.4', '1.4')` false. */
export function atLeast(v: OmniVersion | string, min: OmniVersion | string): boolean {
  return compareVersions(v, min) >= 0;
}
