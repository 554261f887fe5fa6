// A rate-limiting proxy in front of the simulated Omni (nginx, Traefik, a cloud load balancer): a
// bucket of requests (token-bucket.ts) that answers 429 or 503 with `Retry-After` and a body of its
// own (no gRPC status) once it is empty. Apart from throttle.ts because it is not Omni: it answers
// before the gateway reads the call, whoever the caller is.

import { TokenBucket } from './token-bucket.js';

/** A proxy's request limit: `burst` requests at once, refilled at `requestsPerSecond`. */
export interface ProxyLimitConfig {
  requestsPerSecond: number;
  burst: number;
  /** What the proxy answers once the bucket is empty. Default 429. */
  status?: 429 | 503;
  /** The Retry-After it sends, in seconds; default: until the next request would be let through (at least 1). */
  retryAfterS?: number;
}

export interface ProxyLimitStats {
  passed: number;
  refused: number;
}

export class ProxyLimit {
  private readonly bucket: TokenBucket;
  private readonly counts: ProxyLimitStats = { passed: 0, refused: 0 };

  constructor(
    private readonly cfg: ProxyLimitConfig,
    private readonly now: () => number,
  ) {
    this.bucket = new TokenBucket(cfg.requestsPerSecond, cfg.burst, now());
  }

  stats(): ProxyLimitStats {
    return { ...this.counts };
  }

  /** undefined: let the request through; otherwise what the proxy answers instead. */
  take(): { status: 429 | 503; retryAfterS: number } | undefined {
    if (this.bucket.reserve(this.now(), 1, 0)) {
      this.counts.passed++;
      return undefined;
    }
    this.counts.refused++;
    const untilNext = this.bucket.untilMs(this.now(), 1);
    return {
      status: this.cfg.status ?? 429,
      retryAfterS: this.cfg.retryAfterS ?? (Number.isFinite(untilNext) ? Math.max(1, Math.ceil(untilNext / 1000)) : 1),
    };
  }
}
