// Which calls ask Omni for gzip. Omni compresses every /api/ answer when asked (level 6, a deflate
// block per stream message: omni-wire.md 1.3); the client pays an inflate per answer or per message.
// That buys something only where bytes cost time: over a network, not over loopback. Measured with
// the benchmark (docs/performance.md "Compression"): against the sim on loopback, gzip streams cost
// the stub about a tenth of its CPU and saved no time; over a 20 ms, 10 Mbit/s link they are
// what keeps a 10 000-machine List from taking seconds.

import { BlockList, isIP } from 'node:net';

/**
 * - `auto`: `none` when Omni is on this machine (a loopback address or `localhost`,
 *   reached without a proxy), `streams` otherwise.
 * - `streams`: List and Watch, whose bodies are many resources. A unary answer is one resource, and
 *   gzip per small answer cost both sides more CPU than it saved (bench: about a third of the sim's
 *   and a tenth of the client's CPU per call).
 * - `all`: every call, like Omni's own clients.
 * - `none`: no call (no Accept-Encoding header at all, so Omni answers uncompressed).
 *
 * A gzip answer is decoded whatever was asked.
 */
export type CompressionPolicy = 'auto' | 'streams' | 'all' | 'none';

export const COMPRESSION_POLICIES: readonly CompressionPolicy[] = ['auto', 'streams', 'all', 'none'];

/**
 * `auto`: gzip only where it pays. On loopback (Omni on this machine, no proxy) inflating costs the
 * stub more CPU than the bytes cost the link; elsewhere List and Watch, whose bodies are many
 * resources (docs/performance.md, "Compression").
 */
export const DEFAULT_COMPRESSION_POLICY: CompressionPolicy = 'auto';

/** Which kinds of call ask for gzip. */
export interface GzipChoice {
  unary: boolean;
  streams: boolean;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** `localhost`, 127.0.0.0/8, ::1 (IPv4-mapped loopback too): the same machine, whatever the port. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const family = isIP(h);
  return family !== 0 && LOOPBACK.check(h, family === 4 ? 'ipv4' : 'ipv6');
}

/** What `policy` asks for on a connection to `origin` (`http(s)://host:port`), direct or through a proxy. */
export function gzipChoice(policy: CompressionPolicy, origin: string, viaProxy: boolean): GzipChoice {
  const p = policy === 'auto' ? (!viaProxy && isLoopbackHost(new URL(origin).hostname) ? 'none' : 'streams') : policy;
  return { unary: p === 'all', streams: p !== 'none' };
}
