// Preloaded into the stub's process by the benchmark (`node --import`): when the process exits,
// writes its own resource usage (peak RSS, CPU time) to BENCH_USAGE_FILE, with what the process held
// at the sample of its highest RSS (process.memoryUsage() every 50 ms: V8's heap, used and reserved,
// and the memory outside it, such as Buffers). Nothing else changes.

import { writeFileSync } from 'node:fs';

const file = process.env['BENCH_USAGE_FILE'];
if (file) {
  const MB = 1024 * 1024;
  let peak = process.memoryUsage();
  const sample = setInterval(() => {
    const m = process.memoryUsage();
    if (m.rss > peak.rss) peak = m;
  }, 50);
  sample.unref();
  process.on('exit', () => {
    const ru = process.resourceUsage();
    const atPeak = Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, Math.round((v / MB) * 10) / 10]));
    writeFileSync(
      file,
      JSON.stringify({
        cpu_s: (ru.userCPUTime + ru.systemCPUTime) / 1e6,
        peak_rss_mb: ru.maxRSS / 1024,
        at_peak_mb: atPeak,
      }),
    );
  });
}
