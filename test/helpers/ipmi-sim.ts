// A real IPMI peer for tests: ipmi_sim (Debian package `openipmi`) on 127.0.0.1 with a free UDP port
// and a chassis control script that keeps the power state and boot device in files
// (docs/wipe.md, "Verified against ipmi_sim"). ipmi_sim reads commands from stdin and exits at end of file,
// so stdin stays open (a pipe held here) until stop().

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface IpmiSimOptions {
  username: string;
  password: string;
  powerOn?: boolean;
}

async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
  const port = s.address().port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

const CHASSIS_SCRIPT = `#!/bin/sh
# Called by ipmi_sim as: <script> <mc> get <item>... | <script> <mc> set <item> <value>...
dir=$(dirname "$0")
shift
op=$1; shift
if [ "$op" = get ]; then
  for item in "$@"; do
    case $item in
      power) echo "power:$(cat "$dir/power")" ;;
      boot) echo "boot:$(cat "$dir/boot")" ;;
    esac
  done
else
  while [ $# -ge 2 ]; do
    echo "$1=$2" >> "$dir/history"
    case $1 in
      power) echo "$2" > "$dir/power" ;;
      boot) echo "$2" > "$dir/boot" ;;
    esac
    shift 2
  done
fi
`;

export class IpmiSim {
  private stderr = '';

  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(o: IpmiSimOptions): Promise<IpmiSim> {
    const dir = mkdtempSync(join(tmpdir(), 'ipmi-sim-'));
    const port = await freeUdpPort();
    const script = join(dir, 'chassis.sh');
    writeFileSync(script, CHASSIS_SCRIPT);
    chmodSync(script, 0o755);
    writeFileSync(join(dir, 'power'), o.powerOn === false ? '0\n' : '1\n');
    writeFileSync(join(dir, 'boot'), 'none\n');
    mkdirSync(join(dir, 'state'));
    writeFileSync(
      join(dir, 'lan.conf'),
      [
        'name "sim"',
        'set_working_mc 0x20',
        '  startlan 1',
        `    addr 127.0.0.1 ${port}`,
        '    priv_limit admin',
        '    allowed_auths_callback none md5 straight',
        '    allowed_auths_user none md5 straight',
        '    allowed_auths_operator none md5 straight',
        '    allowed_auths_admin none md5 straight',
        '    guid a123456789abcdefa123456789abcdef',
        '  endlan',
        `  chassis_control "${script} 0x20"`,
        `  user 2 true "${o.username}" "${o.password}" admin 10 none md5 straight`,
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'cmds'),
      'mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\nmc_enable 0x20\n',
    );
    const child = spawn('ipmi_sim', ['-c', join(dir, 'lan.conf'), '-f', join(dir, 'cmds'), '-s', join(dir, 'state')], {
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    const sim = new IpmiSim(port, dir, child);
    child.stderr?.setEncoding('utf8').on('data', (c: string) => {
      if (sim.stderr.length < 16_384) sim.stderr += c;
    });
    const spawnError = new Promise<never>((_, reject) => child.on('error', reject));
    spawnError.catch(() => undefined);
    await Promise.race([sim.waitReady(o), spawnError]);
    return sim;
  }

  /** Polls `chassis power status` (bounded) until the simulator answers. */
  private async waitReady(o: IpmiSimOptions): Promise<void> {
    for (let i = 0; i < 40; i++) {
      if (this.child.exitCode !== null)
        throw new Error(`ipmi_sim exited (${this.child.exitCode}): ${this.stderr.slice(0, 500)}`);
      const r = spawnSync(
        'ipmitool',
        [
          '-I',
          'lan',
          '-H',
          '127.0.0.1',
          '-p',
          String(this.port),
          '-U',
          o.username,
          '-E',
          '-N',
          '1',
          '-R',
          '1',
          'chassis',
          'power',
          'status',
        ],
        {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', IPMI_PASSWORD: o.password },
          encoding: 'utf8',
          timeout: 3000,
        },
      );
      if (r.status === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`ipmi_sim did not answer on 127.0.0.1:${this.port}: ${this.stderr.slice(0, 500)}`);
  }

  /** The chassis power as the control script last set it. */
  get powerOn(): boolean {
    return readFileSync(join(this.dir, 'power'), 'utf8').trim() === '1';
  }

  set powerOn(on: boolean) {
    writeFileSync(join(this.dir, 'power'), on ? '1\n' : '0\n');
  }

  /** Every `set` the simulator made, oldest first: e.g. ["boot=pxe", "power=0", "power=1"]. */
  get history(): string[] {
    try {
      return readFileSync(join(this.dir, 'history'), 'utf8').split('\n').filter(Boolean);
    } catch {
      return [];
    }
  }

  get bootDevice(): string {
    return readFileSync(join(this.dir, 'boot'), 'utf8').trim();
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) resolve();
      else this.child.once('exit', () => resolve());
    });
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
