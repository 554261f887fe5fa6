// Every command's own --help is complete: it lists the command's options and shows examples, so an
// operator who types `stub-provider sim --help` learns how to use it without the top-level help.

import { describe, expect, it } from 'vitest';
import { commands } from '../src/commands/index.js';
import { helpOf } from './helpers/cli-help.js';

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
