// `stub-provider <args>` in this process: the CLI's main() (src/cli.ts) with in-memory stdout and
// stderr (neither a terminal, as for a Job) and the environment runCli gives a child (cleanEnv), its
// exit code and everything it wrote. For what needs a process of its own (signals, the entry, a
// terminal, the tarball), test/e2e runs the built CLI (cli-process.ts).

import { PassThrough } from 'node:stream';
import { text } from 'node:stream/consumers';
import { main } from '../../src/cli.js';
import { cleanEnv } from './cli-process.js';

export interface MainRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** main(args) with `o.env` (default: cleanEnv()) and streams of its own; resolves once the command has returned. */
export async function runMain(args: readonly string[], o: { env?: NodeJS.ProcessEnv } = {}): Promise<MainRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const written = Promise.all([text(stdout), text(stderr)]);
  const code = await main([...args], o.env ?? cleanEnv(), { stdout, stderr });
  stdout.end();
  stderr.end();
  const [out, err] = await written;
  return { code, stdout: out, stderr: err };
}
