// Every command's own --help is complete: it lists the command's options and shows examples, so an
// operator who types `stub-provider sim --help` learns how to use it without the top-level help.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { commands } from '../src/commands/index.js';
import { ExitCode } from '../src/exit-codes.js';
import { keyFromEnv } from '../src/omni-client/transport/auth.js';
import { helpOf } from './helpers/cli-help.js';
import { runMain } from './helpers/in-process-cli.js';

const names = commands.map((c) => [c.command].flat()[0]!.split(/\s+/)[0]!);

describe('--help of every command', () => {
  it('knows the commands', () => {
    expect(names).toEqual(expect.arrayContaining(['run', 'plan', 'sim']));
  });

  it.each(names)('stub-provider %s --help shows its examples', async (name) => {
    const help = await helpOf([name]);
    expect(help).toMatch(/^Examples:$/m);
    // The examples are this command's: each example line runs it (the default command may omit `run`).
    const examples = help
      .slice(help.indexOf('Examples:'))
      .split('\n')
      .filter((l) => /^ {2}\S/.test(l));
    expect(examples.length).toBeGreaterThan(0);
    if (name !== 'run') expect(examples.some((l) => l.includes(`stub-provider ${name}`))).toBe(true);
  });

  it('stub-provider --help (the default command) shows examples too', async () => {
    expect(await helpOf([])).toMatch(/^Examples:$/m);
  });
});

describe('what is right as it is, and documented where an operator looks', () => {
  const guide = readFileSync(fileURLToPath(new URL('../docs/operator-guide.md', import.meta.url)), 'utf8');
  const flat = (s: string) => s.replace(/\s+/g, ' ');

  it('SIDERO_SERVICE_ACCOUNT_KEY comes before OMNI_SERVICE_ACCOUNT_KEY: the code, --help and the guide', async () => {
    expect(keyFromEnv({ SIDERO_SERVICE_ACCOUNT_KEY: 'a', OMNI_SERVICE_ACCOUNT_KEY: 'b' })?.source).toBe(
      'SIDERO_SERVICE_ACCOUNT_KEY',
    );
    for (const command of [[], ['plan']]) {
      expect(flat(await helpOf(command))).toMatch(/SIDERO_SERVICE_ACCOUNT_KEY, when set, comes first/);
    }
    expect(flat(guide)).toMatch(/`SIDERO_SERVICE_ACCOUNT_KEY` when it is set \(and not empty\), before `OMNI_SERVICE/);
  });

  it("sim --keys-dir names the users' key files too (admin@example.org.key), in --help and the guide", async () => {
    expect(flat(await helpOf(['sim']))).toMatch(/DIR\/<name>\.key for each of the scenario's users/);
    expect(flat(guide)).toMatch(/`<name>\.key` for each user of the scenario/);
  });
});

describe('a command run by its name', () => {
  // yargs lays out the whole help text of a command it ran by a name, to keep it for a later showHelp
  // (~40 ms of CPU on every `stub-provider run`): main() runs the command after yargs is done instead
  // (src/cli.ts, Chosen). The layout measures every line's width with Intl.Segmenter.
  it('does not lay out its help text; --help still does', async () => {
    const segment = vi.spyOn(Intl.Segmenter.prototype, 'segment');
    try {
      // No key in the environment: the command itself refuses, after yargs parsed its flags.
      const r = await runMain(['plan', '--id', 'x', '--omni-api-endpoint', 'http://127.0.0.1:1']);
      expect(r.code).toBe(ExitCode.Usage);
      expect(r.stderr).toMatch(/key/i);
      expect(segment).not.toHaveBeenCalled();
      await helpOf(['plan']);
      expect(segment).toHaveBeenCalled();
    } finally {
      segment.mockRestore();
    }
  });
});
