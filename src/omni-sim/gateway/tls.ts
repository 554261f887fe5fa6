// A fresh self-signed certificate for `stub-provider sim --tls`, so the client's TLS options (custom
// CA, hostname checks, --insecure-skip-tls-verify) are exercised against a real TLS listener.
// Node has no API to create certificates; `selfsigned` (maintained, on @peculiar/x509) does it.

import { generate } from 'selfsigned';

export interface SelfSignedCert {
  /** PEM private key (never written to disk by the sim). */
  key: string;
  /** PEM certificate; also the CA a client must trust. */
  cert: string;
}

/** A P-256 certificate for 127.0.0.1, ::1 and localhost, valid for a day, marked as its own CA. */
export async function generateSelfSignedCert(now: Date = new Date()): Promise<SelfSignedCert> {
  const pems = await generate([{ name: 'commonName', value: 'stub-provider sim' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now.getTime() - 3600_000),
    notAfterDate: new Date(now.getTime() + 24 * 3600_000),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  return { key: pems.private, cert: pems.cert };
}
