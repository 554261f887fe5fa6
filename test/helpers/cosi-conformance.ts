// Runs one top-level test of test/go/cosi-state's test binary (COSI's conformance suite) and reads
// its results per case through `go tool test2json`: each direct subtest of the top-level test is a
// case of COSI's StateSuite (its own subtests are part of it).

import { runCommand } from './child-process.js';

export interface CaseResult {
  action: 'pass' | 'fail' | 'skip';
  /** Everything the case printed, its subtests' output included. */
  output: string;
}

export interface ConformanceRun {
  results: Map<string, CaseResult>;
  /** For TestCases: the suite's cases, in order. */
  cases: string[];
}

interface TestEvent {
  Action: string;
  Test?: string;
  Output?: string;
}

const TIMEOUT_MS = 4 * 60_000;

export async function runConformance(
  binary: string,
  test: 'TestSim' | 'TestServer' | 'TestCases',
  env: Record<string, string>,
): Promise<ConformanceRun> {
  const go = process.env['GO'] ?? 'go';
  const args = [
    'tool',
    'test2json',
    '-t',
    binary,
    '-test.v=test2json',
    `-test.run=^${test}$`,
    '-test.count=1',
    `-test.timeout=${TIMEOUT_MS / 1000 - 10}s`,
  ];
  let stdout: string;
  try {
    stdout = await runCommand(go, args, { env: { ...process.env, ...env }, timeoutMs: TIMEOUT_MS });
  } catch (e) {
    // A failing case makes the binary exit 1: its results are in the output all the same.
    const out = (e as { stdout?: string }).stdout ?? '';
    if (out.trim() === '') throw e;
    stdout = out;
  }
  const results = new Map<string, CaseResult>();
  const output = new Map<string, string[]>();
  const cases: string[] = [];
  const prefix = `${test}/`;
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue;
    let e: TestEvent;
    try {
      e = JSON.parse(line) as TestEvent;
    } catch {
      throw new Error(`go tool test2json printed a line that is not JSON: ${JSON.stringify(line.slice(0, 200))}`);
    }
    if (test === 'TestCases' && e.Action === 'output' && e.Test === test) {
      const m = /\bCASE (Test\w+)/.exec(e.Output ?? '');
      if (m?.[1]) cases.push(m[1]);
    }
    if (!e.Test?.startsWith(prefix)) continue;
    const name = e.Test.slice(prefix.length).split('/')[0] ?? '';
    if (e.Action === 'output') (output.get(name) ?? output.set(name, []).get(name))?.push(e.Output ?? '');
    else if ((e.Action === 'pass' || e.Action === 'fail' || e.Action === 'skip') && e.Test === `${prefix}${name}`) {
      results.set(name, { action: e.Action, output: '' });
    }
  }
  for (const [name, r] of results) r.output = (output.get(name) ?? []).join('');
  if (test === 'TestCases' && cases.length === 0)
    throw new Error(`the conformance binary listed no cases:\n${stdout.slice(0, 2000)}`);
  return { results, cases };
}
