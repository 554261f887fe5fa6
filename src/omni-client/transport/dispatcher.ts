// The undici dispatchers calls go through: direct (an Agent) or through the HTTP proxy the
// environment names (EnvHttpProxyAgent), one for calls and one for watches.

import type * as tls from 'node:tls';
import { Agent, EnvHttpProxyAgent, type Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Endpoint } from './endpoint.js';

export type DispatcherKind = 'direct' | 'proxy';

export interface DispatcherOptions {
  /** Upper bound of connections of the calls' dispatcher (per origin). */
  connections: number;
  /** Where proxy variables are read from. */
  env: NodeJS.ProcessEnv;
  tls: tls.ConnectionOptions;
  log: Logger;
}

export interface Dispatchers {
  /** Unary calls and Lists. */
  calls: Dispatcher;
  /**
   * Watches. A Watch holds its connection for as long as it is open: watches get connections of
   * their own, as many as are open (one per kind watched), so that they never take the calls'
   * connections (with --concurrency 2 and two watches open, no call could be sent at all).
   */
  watches: Dispatcher;
  kind: DispatcherKind;
  close(): Promise<void>;
}

export function createDispatchers(endpoint: Endpoint, opts: DispatcherOptions): Dispatchers {
  const env = opts.env;
  const httpProxy = env['http_proxy'] ?? env['HTTP_PROXY'] ?? '';
  const httpsProxy = env['https_proxy'] ?? env['HTTPS_PROXY'] ?? '';
  const noProxy = env['no_proxy'] ?? env['NO_PROXY'] ?? '';
  // undici's EnvHttpProxyAgent falls back from the https proxy to the http one, like curl and Go.
  const proxy = endpoint.tls ? httpsProxy || httpProxy : httpProxy;
  const dispatcher = (connections: number | undefined): Dispatcher => {
    const agentOpts: Agent.Options = {
      ...(connections !== undefined ? { connections } : {}),
      // Omni's server sets no idle timeout; keep connections for reuse across bursts of calls.
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      connect: opts.tls,
    };
    // Passed explicitly (empty = none) so that only `env` counts, not whatever process.env holds.
    return proxy
      ? new EnvHttpProxyAgent({ ...agentOpts, httpProxy, httpsProxy, noProxy, requestTls: opts.tls })
      : new Agent(agentOpts);
  };
  const calls = dispatcher(opts.connections);
  const watches = dispatcher(undefined);
  if (proxy) opts.log.debug({ proxy: redactUrl(proxy), noProxy }, 'using an HTTP proxy from the environment for Omni');
  return {
    calls,
    watches,
    kind: proxy ? 'proxy' : 'direct',
    close: async () => {
      await Promise.all([calls.close(), watches.close()]);
    },
  };
}

function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return '(unparsable proxy URL)';
  }
}
