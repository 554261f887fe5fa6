// Omni's endpoint as an operator gives it (--omni-api-endpoint / OMNI_ENDPOINT).

import { ConfigError } from '../errors.js';

export interface Endpoint {
  /** What undici connects to: `https://host:443` or `http://host:80`. */
  origin: string;
  tls: boolean;
}

const EXPECTED = 'expected https://host[:port], http://host[:port] or grpc://host:port';

/**
 * Like the Go client: `https://` is TLS (port 443 by default); `http://` and `grpc://` are plaintext
 * (port 80 by default). Omni serves its API at the root of its host (the gateway at `/api/`,
 * docs/omni-wire.md 1), so a path, query or fragment would be dropped: refused, naming it (only that
 * part: the URL may carry a password).
 */
export function normalizeEndpoint(raw: string): Endpoint {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(`invalid Omni endpoint "${raw}": ${EXPECTED}`);
  }
  const scheme = url.protocol.replace(/:$/, '').toLowerCase();
  if (!['https', 'http', 'grpc'].includes(scheme) || url.hostname === '') {
    throw new ConfigError(`invalid Omni endpoint "${raw}": ${EXPECTED}`);
  }
  const extra = `${url.pathname === '/' ? '' : url.pathname}${url.search}${url.hash}`;
  if (extra !== '') {
    throw new ConfigError(
      `the Omni endpoint has a path, query or fragment (${JSON.stringify(extra)}): Omni's API is at the root of its ` +
        `host, so give only ${scheme}://host[:port]`,
    );
  }
  const isTls = scheme === 'https';
  const port = url.port !== '' ? url.port : isTls ? '443' : '80';
  return { origin: `${isTls ? 'https' : 'http'}://${url.hostname}:${port}`, tls: isTls };
}
