// --max-list-items (env STUB_PROVIDER_MAX_LIST_ITEMS): the cap on the items of one List answer is the
// client's default unless the operator raises or lowers it, and nonsense is a usage error.

import { describe, expect, it } from 'vitest';
import { CliUsageError } from '../../src/cli-args.js';
import { UsageError } from '../../src/exit-codes.js';
import { DEFAULT_READ_LIMITS } from '../../src/omni-client/transport/body.js';
import { planConfigFrom, runConfigFrom } from '../helpers/cli-config.js';

const base = ['--id', 'bare-metal', '--omni-api-endpoint', 'http://127.0.0.1:1'];

describe('--max-list-items', () => {
  it("defaults to the client's limit, high enough for 100 000 machines", () => {
    expect(runConfigFrom(base).maxListItems).toBe(DEFAULT_READ_LIMITS.listItems);
    expect(planConfigFrom(base).maxListItems).toBe(DEFAULT_READ_LIMITS.listItems);
    expect(DEFAULT_READ_LIMITS.listItems).toBeGreaterThanOrEqual(200_000);
  });

  it('takes a whole number of at least 1, from the command line or the environment', () => {
    expect(runConfigFrom([...base, '--max-list-items', '1000000']).maxListItems).toBe(1_000_000);
    expect(runConfigFrom([...base, '--max-list-items', '1']).maxListItems).toBe(1);
    expect(runConfigFrom(base, { STUB_PROVIDER_MAX_LIST_ITEMS: '5' }).maxListItems).toBe(5);
  });

  it.each(['0', '-5', '1.5', 'NaN', 'lots'])('refuses %s with a usage error naming the flag', (v) => {
    expect(() => runConfigFrom([...base, `--max-list-items=${v}`])).toThrow(UsageError);
    expect(() => runConfigFrom([...base, `--max-list-items=${v}`])).toThrow(/--max-list-items/);
  });

  it('refuses a value of the environment that is no number, naming the variable', () => {
    expect(() => runConfigFrom(base, { STUB_PROVIDER_MAX_LIST_ITEMS: 'lots' })).toThrow(CliUsageError);
    expect(() => runConfigFrom(base, { STUB_PROVIDER_MAX_LIST_ITEMS: 'lots' })).toThrow(
      /STUB_PROVIDER_MAX_LIST_ITEMS="lots": expected a number/,
    );
  });
});
