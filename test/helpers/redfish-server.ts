// A Redfish BMC on loopback for wipe tests, following the DMTF schema for what a wipe touches:
// ServiceRoot, the Systems collection, one ComputerSystem (PowerState, Boot override, the
// #ComputerSystem.Reset action with its allowable values) and SessionService sessions. Served over
// HTTPS with a self-signed certificate made at test time (or plain HTTP). Also: a BMC that accepts
// connections and never answers.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { generate } from 'selfsigned';

export interface FakeBmcOptions {
  username: string;
  password: string;
  /** 'session': sessions and basic auth (like most BMCs); 'basic': no SessionService at all. */
  auth: 'session' | 'basic';
  powerState?: 'On' | 'Off';
  /** PEM key and certificate; plain HTTP without them. */
  tls?: { key: string; cert: string };
  /** Refuse a PATCH without a matching If-Match (some BMCs do). */
  requireEtag?: boolean;
  /** Override the system's id (a path segment), to check the client follows Members. */
  systemId?: string;
}

export interface BmcRequest {
  method: string;
  path: string;
  auth: 'token' | 'basic' | 'none';
  body?: unknown;
}

const RESET_TYPES = ['On', 'ForceOff', 'GracefulShutdown', 'GracefulRestart', 'ForceRestart', 'PowerCycle', 'ForceOn'];
const SESSIONS = '/redfish/v1/SessionService/Sessions';

export class FakeRedfishBmc {
  powerState: 'On' | 'Off';
  boot = { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' };
  readonly resets: string[] = [];
  readonly requests: BmcRequest[] = [];
  readonly sessions = new Map<string, string>(); // token -> session path
  sessionsCreated = 0;
  sessionsDeleted = 0;
  private etagCounter = 1;
  private readonly server: http.Server;
  private readonly systemPath: string;

  private constructor(private readonly o: FakeBmcOptions) {
    this.powerState = o.powerState ?? 'On';
    this.systemPath = `/redfish/v1/Systems/${o.systemId ?? 'System.Embedded.1'}`;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (raw += c));
      req.on('end', () => this.handle(req, raw, res));
    };
    this.server = o.tls
      ? https.createServer({ key: o.tls.key, cert: o.tls.cert }, handler)
      : http.createServer(handler);
  }

  static async start(o: FakeBmcOptions): Promise<FakeRedfishBmc> {
    const bmc = new FakeRedfishBmc(o);
    await new Promise<void>((resolve) => bmc.server.listen(0, '127.0.0.1', resolve));
    return bmc;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private etag(): string {
    return `W/"${this.etagCounter}"`;
  }

  private authOf(req: http.IncomingMessage): BmcRequest['auth'] | 'bad' {
    const token = req.headers['x-auth-token'];
    if (typeof token === 'string') return this.o.auth === 'session' && this.sessions.has(token) ? 'token' : 'bad';
    const a = req.headers.authorization;
    if (a?.startsWith('Basic ')) {
      const [u, ...p] = Buffer.from(a.slice(6), 'base64').toString('utf8').split(':');
      return u === this.o.username && p.join(':') === this.o.password ? 'basic' : 'bad';
    }
    return 'none';
  }

  private handle(req: http.IncomingMessage, raw: string, res: http.ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://x').pathname.replace(/\/$/, '');
    const method = req.method ?? 'GET';
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return send(res, 400, error('Base.1.8.MalformedJSON', 'The request body is not JSON.'));
    }
    const auth = this.authOf(req);
    this.requests.push({ method, path, auth: auth === 'bad' ? 'none' : auth, body });

    if (method === 'GET' && path === '/redfish/v1') return send(res, 200, this.serviceRoot());
    if (this.o.auth === 'session' && method === 'POST' && path === SESSIONS) return this.createSession(body, res);
    if (auth === 'bad' || auth === 'none') {
      res.setHeader('www-authenticate', 'Basic realm="BMC"');
      return send(
        res,
        401,
        error('Base.1.8.NoValidSession', 'There is no valid session established with the implementation.'),
      );
    }
    if (method === 'DELETE' && path.startsWith(`${SESSIONS}/`) && this.o.auth === 'session') {
      for (const [t, p] of this.sessions) {
        if (p === path) {
          this.sessions.delete(t);
          this.sessionsDeleted++;
          return send(res, 204);
        }
      }
      return send(res, 404, error('Base.1.8.ResourceMissingAtURI', 'No such session.'));
    }
    if (method === 'GET' && path === '/redfish/v1/Systems') {
      return send(res, 200, {
        '@odata.type': '#ComputerSystemCollection.ComputerSystemCollection',
        '@odata.id': '/redfish/v1/Systems',
        Name: 'Computer System Collection',
        Members: [{ '@odata.id': this.systemPath }],
        'Members@odata.count': 1,
      });
    }
    if (path === this.systemPath && method === 'GET') {
      res.setHeader('etag', this.etag());
      return send(res, 200, this.system());
    }
    if (path === this.systemPath && method === 'PATCH') return this.patchSystem(req, body, res);
    if (path === `${this.systemPath}/Actions/ComputerSystem.Reset` && method === 'POST') return this.reset(body, res);
    if (method === 'POST' && path === SESSIONS)
      return send(res, 405, error('Base.1.8.OperationNotAllowed', 'Sessions are not supported.'));
    return send(res, 404, error('Base.1.8.ResourceMissingAtURI', `No resource at ${path}.`));
  }

  private serviceRoot(): object {
    const root: Record<string, unknown> = {
      '@odata.type': '#ServiceRoot.v1_5_0.ServiceRoot',
      '@odata.id': '/redfish/v1',
      Id: 'RootService',
      Name: 'Root Service',
      RedfishVersion: '1.6.0',
      Systems: { '@odata.id': '/redfish/v1/Systems' },
    };
    if (this.o.auth === 'session') {
      root.SessionService = { '@odata.id': '/redfish/v1/SessionService' };
      root.Links = { Sessions: { '@odata.id': SESSIONS } };
    }
    return root;
  }

  private system(): object {
    return {
      '@odata.type': '#ComputerSystem.v1_10_0.ComputerSystem',
      '@odata.id': this.systemPath,
      Id: this.systemPath.split('/').pop(),
      Name: 'System',
      SystemType: 'Physical',
      PowerState: this.powerState,
      Boot: {
        ...this.boot,
        'BootSourceOverrideTarget@Redfish.AllowableValues': ['None', 'Pxe', 'Hdd', 'Cd', 'BiosSetup'],
      },
      Actions: {
        '#ComputerSystem.Reset': {
          target: `${this.systemPath}/Actions/ComputerSystem.Reset`,
          'ResetType@Redfish.AllowableValues': RESET_TYPES,
        },
      },
    };
  }

  private createSession(body: unknown, res: http.ServerResponse): void {
    const b = body as { UserName?: unknown; Password?: unknown } | undefined;
    if (b?.UserName !== this.o.username || b?.Password !== this.o.password) {
      return send(res, 401, error('Base.1.8.InsufficientPrivilege', 'Invalid username or password.'));
    }
    const id = String(++this.sessionsCreated);
    const token = randomBytes(16).toString('hex');
    const path = `${SESSIONS}/${id}`;
    this.sessions.set(token, path);
    res.setHeader('x-auth-token', token);
    res.setHeader('location', path);
    send(res, 201, {
      '@odata.type': '#Session.v1_0_0.Session',
      '@odata.id': path,
      Id: id,
      Name: 'User Session',
      UserName: this.o.username,
    });
  }

  private patchSystem(req: http.IncomingMessage, body: unknown, res: http.ServerResponse): void {
    if (this.o.requireEtag && req.headers['if-match'] !== this.etag()) {
      return send(res, 412, error('Base.1.8.PreconditionFailed', 'The ETag supplied did not match.'));
    }
    const boot = (body as { Boot?: Record<string, unknown> } | undefined)?.Boot;
    if (!boot) return send(res, 400, error('Base.1.8.PropertyUnknown', 'Only Boot may be patched here.'));
    if (boot.BootSourceOverrideTarget !== undefined) {
      if (!['None', 'Pxe', 'Hdd', 'Cd', 'BiosSetup'].includes(String(boot.BootSourceOverrideTarget))) {
        return send(res, 400, error('Base.1.8.PropertyValueNotInList', 'BootSourceOverrideTarget value not allowed.'));
      }
      this.boot.BootSourceOverrideTarget = String(boot.BootSourceOverrideTarget);
    }
    if (boot.BootSourceOverrideEnabled !== undefined) {
      if (!['Disabled', 'Once', 'Continuous'].includes(String(boot.BootSourceOverrideEnabled))) {
        return send(res, 400, error('Base.1.8.PropertyValueNotInList', 'BootSourceOverrideEnabled value not allowed.'));
      }
      this.boot.BootSourceOverrideEnabled = String(boot.BootSourceOverrideEnabled);
    }
    this.etagCounter++;
    send(res, 204);
  }

  private reset(body: unknown, res: http.ServerResponse): void {
    const type = (body as { ResetType?: unknown } | undefined)?.ResetType;
    if (typeof type !== 'string' || !RESET_TYPES.includes(type)) {
      return send(
        res,
        400,
        error('Base.1.8.ActionParameterValueNotInList', `ResetType ${String(type)} is not allowed.`),
      );
    }
    this.resets.push(type);
    this.powerState = type === 'ForceOff' || type === 'GracefulShutdown' ? 'Off' : 'On';
    this.etagCounter++;
    send(res, 204);
  }
}

function send(res: http.ServerResponse, status: number, body?: object): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'odata-version': '4.0' }).end(text);
}

function error(messageId: string, message: string): object {
  return { error: { code: messageId, message, '@Message.ExtendedInfo': [{ MessageId: messageId, Message: message }] } };
}

/** A self-signed certificate for 127.0.0.1, made now (EC P-256: fast). */
export async function selfSignedCert(): Promise<{ key: string; cert: string }> {
  const pems = await generate([{ name: 'commonName', value: 'bmc.test' }], {
    keyType: 'ec',
    curve: 'P-256',
    notAfterDate: new Date(Date.now() + 24 * 3600 * 1000),
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  return { key: pems.private, cert: pems.cert };
}

/** A "BMC" that accepts TCP connections and never says a word. */
export class SilentBmc {
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((s) => {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => undefined);
  });

  static async start(): Promise<SilentBmc> {
    const b = new SilentBmc();
    await new Promise<void>((resolve) => b.server.listen(0, '127.0.0.1', resolve));
    return b;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get connections(): number {
    return this.sockets.size;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
