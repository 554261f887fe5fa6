// Every command's own --help is complete: it lists the command's options and shows examples, so an
// operator who types `stub-provider sim --help` learns how to use it without the top-level help.

import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli.js';
import { commands } from '../../src/commands/index.js';

async function helpOf(argv: string[]): Promise<string> {
  const out: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
  const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
  try {
    const code = await main([...argv, '--help']);
    expect(code, `stub-provider ${argv.join(' ')} --help`).toBe(0);
  } finally {
    log.mockRestore();
    write.mockRestore();
    exit.mockRestore();
  }
  return out.join('\n');
}

const names = commands.map((c) => [c.command].flat()[0]!.split(/\s+/)[0]!);

describe('--help of every command', () => {
  it('knows the commands', () => {
    expect(names).toEqual(expect.arrayContaining(['run', 'plan', 'sim']));
  });

  it.each(names)('stub-provider %s --help shows its examples', async (name) => {
    const help = await helpOf([name]);
    expect(help).toMatch(/^Examples:$/m);
    // The examples are this command's: each example line runs it (the default command may omit `run`).
    const examples = help.slice(help.indexOf('Examples:')).split('\n').filter((l) => /^ {2}\S/.test(l));
    expect(examples.length).toBeGreaterThan(0);
    if (name !== 'run') expect(examples.some((l) => l.includes(`stub-provider ${name}`))).toBe(true);
  });

  it('stub-provider --help (the default command) shows examples too', async () => {
    expect(await helpOf([])).toMatch(/^Examples:$/m);
  });
});
