// The sim's endpoint and key, as the benchmark hands them to a process it starts (stub-runner.ts,
// mix-client.ts): in the environment, never on the command line (which `ps` shows); never logged.

export function omniFromEnv(): { endpoint: string; key: string } {
  const endpoint = process.env['BENCH_OMNI_ENDPOINT'];
  const key = process.env['BENCH_OMNI_KEY'];
  if (!endpoint || !key) throw new Error('BENCH_OMNI_ENDPOINT and BENCH_OMNI_KEY must be set');
  return { endpoint, key };
}
