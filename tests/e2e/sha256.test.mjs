// The package's streaming SHA-256 (pkg/sha256.js, which checks the `sha256` load option) against
// node's, on seeded random inputs of odd sizes fed in odd chunks (no browser needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Sha256 } from '../../pkg/sha256.js';

// xorshift32: the same bytes every run.
function bytes(n, seed) {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

test('streamed SHA-256 equals node:crypto for odd sizes and chunkings', () => {
  for (const n of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000, 65_537, 300_001]) {
    const data = bytes(n, n + 1);
    for (const chunk of [1, 7, 64, 97, 4096, n + 1]) {
      const h = new Sha256();
      for (let i = 0; i < n; i += chunk) h.update(data.subarray(i, i + chunk));
      assert.equal(h.hex(), createHash('sha256').update(data).digest('hex'), `n=${n} chunk=${chunk}`);
    }
  }
});
