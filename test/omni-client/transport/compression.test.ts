// Which calls ask Omni for gzip (src/omni-client/transport/compression.ts): none where Omni is on this machine,
// streams elsewhere, and whatever an explicit policy says.

import { describe, expect, it } from 'vitest';
import { gzipChoice, isLoopbackHost } from '../../../src/omni-client/transport/compression.js';

describe('isLoopbackHost', () => {
  it.each(['127.0.0.1', '127.5.6.7', 'localhost', 'LOCALHOST', 'omni.localhost', '[::1]', '::1', '[::ffff:7f00:1]'])(
    '%s is this machine',
    (h) => {
      expect(isLoopbackHost(h)).toBe(true);
    },
  );
  it.each(['10.0.0.1', '128.0.0.1', 'omni.example.org', 'localhost.example.org', '[::2]', '[fe80::1]', '0.0.0.0'])(
    '%s is not',
    (h) => {
      expect(isLoopbackHost(h)).toBe(false);
    },
  );
});

describe('gzipChoice', () => {
  it('auto: nothing compressed on loopback, streams elsewhere and through a proxy', () => {
    expect(gzipChoice('auto', 'http://127.0.0.1:8080', false)).toEqual({ unary: false, streams: false });
    expect(gzipChoice('auto', 'http://[::1]:8080', false)).toEqual({ unary: false, streams: false });
    expect(gzipChoice('auto', 'https://omni.example.org:443', false)).toEqual({ unary: false, streams: true });
    // A proxy may carry a loopback name anywhere (and what it connects to is not ours to know).
    expect(gzipChoice('auto', 'http://127.0.0.1:8080', true)).toEqual({ unary: false, streams: true });
  });

  it('an explicit policy holds wherever Omni is', () => {
    for (const origin of ['http://127.0.0.1:8080', 'https://omni.example.org:443']) {
      expect(gzipChoice('streams', origin, false)).toEqual({ unary: false, streams: true });
      expect(gzipChoice('all', origin, false)).toEqual({ unary: true, streams: true });
      expect(gzipChoice('none', origin, false)).toEqual({ unary: false, streams: false });
    }
  });
});
