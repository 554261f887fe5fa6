// The TLS options of every connection to Omni (and to a proxy in front of it): which CAs are trusted.

import * as tls from 'node:tls';
import { ConfigError } from '../errors.js';
import { CA_FILE_MAX_BYTES, InputFileError, readBoundedFile } from '../../omni-api/bounded-file.js';

export interface TlsSettings {
  /** A PEM file of CA certificates trusted besides the system's (--ca-file). */
  caFile?: string | undefined;
  /** --insecure-skip-tls-verify: no certificate is checked (test servers only). */
  insecureSkipTlsVerify?: boolean | undefined;
}

export function tlsOptions(opts: TlsSettings): tls.ConnectionOptions {
  const out: tls.ConnectionOptions = {};
  if (opts.insecureSkipTlsVerify) out.rejectUnauthorized = false;
  const getCAs = (tls as unknown as { getCACertificates?: (k: string) => string[] }).getCACertificates;
  // Node >= 22.15 can read the OS store; on Node 20 the default is Node's bundled store (plus
  // NODE_EXTRA_CA_CERTS, or the OS store with --use-openssl-ca).
  const base = (): string[] => {
    if (typeof getCAs !== 'function') return [...tls.rootCertificates];
    let system: string[] = [];
    try {
      system = getCAs('system');
    } catch {
      // no readable OS store
    }
    return [...getCAs('default'), ...system];
  };
  if (opts.caFile !== undefined) {
    let pem: string;
    try {
      pem = readBoundedFile(opts.caFile, { what: '--ca-file', maxBytes: CA_FILE_MAX_BYTES });
    } catch (e) {
      if (e instanceof InputFileError) throw e;
      throw new ConfigError(
        `cannot read the CA file ${opts.caFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    if (!pem.includes('-----BEGIN CERTIFICATE-----'))
      throw new ConfigError(`the CA file ${opts.caFile} holds no PEM certificate`);
    out.ca = [...base(), pem];
  } else if (typeof getCAs === 'function') {
    out.ca = base();
  }
  return out;
}
