// Preloaded into the stub's process by the benchmark (`node --import`): when the process exits,
// writes its own resource usage (peak RSS, CPU time) to BENCH_USAGE_FILE, with what the process held
// near its highest RSS (process.memoryUsage(): V8's heap, used and reserved, and the memory outside
// it, such as Buffers). The peak RSS is the kernel's (getrusage at exit); the breakdown is sampled:
// process.memoryUsage.rss() every 250 ms, the full process.memoryUsage() only at a new peak, at most
// once a second (taken every 50 ms, process.memoryUsage() showed as 2.4 s of a 10 000-machine run's
// profile on a loaded machine).

import { writeFileSync } from 'node:fs';

const file = process.env['BENCH_USAGE_FILE'];
if (file) {
  const MB = 1024 * 1024;
  let peakRss = 0;
  let atPeak = process.memoryUsage();
  let lastFull = 0;
  const sample = setInterval(() => {
    const rss = process.memoryUsage.rss();
    if (rss <= peakRss) return;
    peakRss = rss;
    const now = performance.now();
    if (now - lastFull < 1000) return;
    lastFull = now;
    atPeak = process.memoryUsage();
  }, 250);
  sample.unref();
  process.on('exit', () => {
    const ru = process.resourceUsage();
    const full = Object.fromEntries(Object.entries(atPeak).map(([k, v]) => [k, Math.round((v / MB) * 10) / 10]));
    writeFileSync(
      file,
      JSON.stringify({
        cpu_s: (ru.userCPUTime + ru.systemCPUTime) / 1e6,
        peak_rss_mb: ru.maxRSS / 1024,
        at_peak_mb: full,
      }),
    );
  });
}
