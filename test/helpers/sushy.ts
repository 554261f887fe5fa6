// sushy-tools' Redfish emulator (sushy-emulator, OpenStack's, from the test venv of
// test/helpers/peers.ts) on loopback with its fake system driver, which drives no virtual machine:
// each emulator gets its own systems, state folder and port, optionally HTTPS (a certificate made at
// test time) and basic auth (a bcrypt htpasswd file, as sushy-tools wants). sushy-tools 2.2.0 has no
// SessionService: basic auth is all it offers.
//
// Its fake driver applies a power change 1 to 11 s after the request (by design: "hardware actions are
// not immediate"), so tests wait for the state with waitFor. What it did is also in its log: the
// emulator logs every reset it accepts (`System "<uuid>" power state set to "<ResetType>"`) and every
// boot device it sets.

import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { Agent, request } from 'undici';
import { pythonEnv } from './peers.js';

export interface FakeSystem {
  name: string;
  power_state: 'On' | 'Off';
}

export interface SushyOptions {
  systems: FakeSystem[];
  /** Basic auth for everything but the service root; no auth without it. */
  user?: { name: string; password: string };
  /** PEM key and certificate: HTTPS; plain HTTP without. */
  tls?: { key: string; cert: string };
}

export interface ComputerSystem {
  PowerState?: string;
  Boot?: { BootSourceOverrideTarget?: string; BootSourceOverrideEnabled?: string };
}

const START_TIMEOUT_MS = 30_000;
/** The fake driver's longest delay is 11 s. */
export const POWER_CHANGE_TIMEOUT_MS = 20_000;

function bcryptHash(python: string, password: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // Cost 4, the least bcrypt allows: the emulator checks it on every request.
    const child = execFile(
      python,
      ['-c', 'import bcrypt, sys; print(bcrypt.hashpw(sys.stdin.buffer.read(), bcrypt.gensalt(rounds=4)).decode())'],
      { timeout: 30_000 },
      (err, stdout) => (err ? reject(err) : resolve(stdout.trim())),
    );
    child.stdin!.end(password);
  });
}

export class SushyEmulator {
  /** The systems' UUIDs, in the order of the options. */
  readonly uuids: string[];
  private output = '';
  private settles = 0;
  private readonly agent = new Agent({ connect: { rejectUnauthorized: false } });

  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly scheme: 'http' | 'https',
    uuids: string[],
    private readonly user: SushyOptions['user'],
  ) {
    this.uuids = uuids;
  }

  port = 0;

  static async start(o: SushyOptions): Promise<SushyEmulator> {
    const env = pythonEnv();
    const dir = mkdtempSync(join(tmpdir(), 'stub-provider-sushy-'));
    const uuids = o.systems.map(() => randomUUID());
    const systems = o.systems.map((s, i) => ({
      uuid: uuids[i],
      name: s.name,
      power_state: s.power_state,
      external_notifier: false,
      nics: [],
    }));
    writeFileSync(join(dir, 'systems.json'), JSON.stringify(systems));
    const conf: string[] = [
      'import json, logging',
      // Flask logs what the emulator did at INFO; without this only warnings would show.
      "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')",
      "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
      'SUSHY_EMULATOR_LISTEN_PORT = 0',
      'SUSHY_EMULATOR_FAKE_DRIVER = True',
      `SUSHY_EMULATOR_FAKE_SYSTEMS = json.load(open(${JSON.stringify(join(dir, 'systems.json'))}))`,
      // Its own state folder: by default every emulator on the machine shares one in /tmp.
      `SUSHY_EMULATOR_STATE_DIR = ${JSON.stringify(join(dir, 'state'))}`,
    ];
    if (o.user) {
      writeFileSync(join(dir, 'htpasswd'), `${o.user.name}:${await bcryptHash(env.python, o.user.password)}\n`);
      conf.push(`SUSHY_EMULATOR_AUTH_FILE = ${JSON.stringify(join(dir, 'htpasswd'))}`);
    }
    if (o.tls) {
      writeFileSync(join(dir, 'key.pem'), o.tls.key, { mode: 0o600 });
      writeFileSync(join(dir, 'cert.pem'), o.tls.cert);
      conf.push(
        `SUSHY_EMULATOR_SSL_CERT = ${JSON.stringify(join(dir, 'cert.pem'))}`,
        `SUSHY_EMULATOR_SSL_KEY = ${JSON.stringify(join(dir, 'key.pem'))}`,
      );
    }
    writeFileSync(join(dir, 'emulator.conf'), conf.join('\n') + '\n');

    const child = spawn(join(env.bin, 'sushy-emulator'), ['--config', join(dir, 'emulator.conf')], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const emu = new SushyEmulator(child, dir, o.tls ? 'https' : 'http', uuids, o.user);
    const onData = (c: Buffer): void => {
      emu.output += c.toString('utf8');
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    try {
      emu.port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`sushy-emulator did not start within ${START_TIMEOUT_MS / 1000} s:\n${emu.output}`)),
          START_TIMEOUT_MS,
        );
        const check = (): void => {
          const m = /Running on https?:\/\/127\.0\.0\.1:(\d+)/.exec(emu.output);
          if (m) {
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        };
        child.stdout!.on('data', check);
        child.stderr!.on('data', check);
        child.on('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`sushy-emulator exited with ${code} before it listened:\n${emu.output}`));
        });
      });
    } catch (e) {
      await emu.close();
      throw e;
    }
    return emu;
  }

  /**
   * What the emulator logged for every request answered before this call. Its log reaches us through
   * a pipe, later than its answers: a request of our own (to the service root, which needs no auth)
   * is sent after them, and the log is read until that request's line is in it.
   */
  async log(): Promise<string> {
    const marker = `/redfish/v1/?settled=${++this.settles}`;
    await this.get(marker, false);
    const deadline = Date.now() + 10_000;
    for (;;) {
      // Werkzeug colours its request lines whatever the output is; the colours go.
      const text = stripVTControlCharacters(this.output);
      if (text.includes(`"GET ${marker} HTTP/1.1"`)) return text;
      if (Date.now() >= deadline) throw new Error(`sushy-emulator's log never showed ${marker}:\n${text}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The ResetTypes the emulator accepted for a system, in order, from its log. */
  async resets(uuid: string): Promise<string[]> {
    return [...(await this.log()).matchAll(/System "([^"]+)" power state set to "([^"]+)"/g)]
      .filter((m) => m[1] === uuid)
      .map((m) => m[2]!);
  }

  /** The boot devices the emulator set for a system, in order, from its log. */
  async bootDevicesSet(uuid: string): Promise<string[]> {
    return [...(await this.log()).matchAll(/Set boot device to "([^"]+)" for system "([^"]+)"/g)]
      .filter((m) => m[2] === uuid)
      .map((m) => m[1]!);
  }

  /**
   * Requests the emulator answered, as `METHOD path status` (Werkzeug's request log), ours to settle the log left out.
   */
  async requests(): Promise<string[]> {
    return [...(await this.log()).matchAll(/"(GET|POST|PATCH|DELETE|PUT) ([^ "]+) HTTP\/1\.1" (\d{3})/g)]
      .map((m) => `${m[1]} ${m[2]} ${m[3]}`)
      .filter((q) => !q.includes('?settled='));
  }

  /** The Systems collection's members, in the order the emulator lists them. */
  async members(): Promise<string[]> {
    const body = (await this.get('/redfish/v1/Systems')) as { Members: Array<{ '@odata.id': string }> };
    return body.Members.map((m) => m['@odata.id']);
  }

  async system(uuid: string): Promise<ComputerSystem> {
    return (await this.get(`/redfish/v1/Systems/${uuid}`)) as ComputerSystem;
  }

  /** Polls the system (every 250 ms, at most `timeoutMs`) until `ok` holds; answers its last state. */
  async waitFor(
    uuid: string,
    ok: (s: ComputerSystem) => boolean,
    timeoutMs = POWER_CHANGE_TIMEOUT_MS,
  ): Promise<ComputerSystem> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.system(uuid);
      if (ok(s) || Date.now() >= deadline) return s;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private async get(path: string, withAuth = true): Promise<unknown> {
    const auth =
      this.user && withAuth
        ? { authorization: `Basic ${Buffer.from(`${this.user.name}:${this.user.password}`).toString('base64')}` }
        : {};
    const res = await request(`${this.scheme}://127.0.0.1:${this.port}${path}`, {
      dispatcher: this.agent,
      headers: auth,
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new Error(`sushy-emulator GET ${path}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`);
    return JSON.parse(text);
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
