// Preloaded into the stub's process by the benchmark (`node --import`): when the process exits,
// writes its own resource usage (peak RSS, CPU time) to BENCH_USAGE_FILE. Nothing else changes.

import { writeFileSync } from 'node:fs';

const file = process.env['BENCH_USAGE_FILE'];
if (file) {
  process.on('exit', () => {
    const ru = process.resourceUsage();
    writeFileSync(file, JSON.stringify({ cpu_s: (ru.userCPUTime + ru.systemCPUTime) / 1e6, peak_rss_mb: ru.maxRSS / 1024 }));
  });
}
