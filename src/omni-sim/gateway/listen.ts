// The gateway on a socket: one node:http or node:https listener (default 127.0.0.1, a free port) whose
// request listener is Gateway.handle, malformed HTTP answered 400 before the gateway sees it, and a
// close that cuts the open streams first. Apart from server.ts, which knows calls and not sockets.

import type { Server } from 'node:http';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Gateway } from './server.js';

export interface ListenOptions {
  host?: string;
  port?: number;
  /** PEM key and certificate: serve HTTPS. */
  tls?: { key: string; cert: string };
}

export interface Listening {
  server: Server;
  /** `http://127.0.0.1:PORT` or `https://...`. */
  endpoint: string;
  close(): Promise<void>;
}

/** Serves the gateway on one listener (default 127.0.0.1, a free port). */
export async function listen(gateway: Gateway, opts: ListenOptions = {}): Promise<Listening> {
  const host = opts.host ?? '127.0.0.1';
  const server: Server = opts.tls
    ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, gateway.handle)
    : createServer(gateway.handle);
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const hostPart = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const endpoint = `${opts.tls ? 'https' : 'http'}://${hostPart}:${addr.port}`;
  return {
    server,
    endpoint,
    close: () =>
      new Promise<void>((resolve) => {
        gateway.breakStreams();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
