// The GPU engine's per-forward numbers in the page (`engine.forwardCost` through the package's
// release wasm, WebGPU on SwiftShader) against the native engine's (`runahead bench --backends
// gpu`, lavapipe) for SmolLM2: the page encodes exactly the dispatches the native engine does,
// per decoding forward and per verification block; the WebGPU calls counted at the wasm import
// boundary agree with the engine's own count (one dispatchWorkgroups per dispatch, one submit);
// the engine's per-phase call counts add up to the calls counted by import; times are present
// and finite (no thresholds: this machine's times say nothing).
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then the files here)
//
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';
import { nativeCost, pageCost } from '../../bench/browser/forward-cost.mjs';
import { importName } from '../../bench/browser/import-counter.mjs';

const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT = 'Once upon a time, in a small village by the sea,';
const ROWS = [1, 8];
const SLOW = 900_000;

test('the page encodes the native engine\'s dispatches and counts its wasm -> JS calls', { timeout: SLOW }, async () => {
  const native = await nativeCost(runahead, join(root, MODEL), 1, 8);
  const { base, server } = await serve();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  let page;
  try {
    page = await pageCost(browser, base, { model: MODEL, prompt: PROMPT, rows: ROWS, reps: 1, counting: true });
  } finally {
    await browser.close();
    server.kill();
  }
  assert.equal(page.cost.dispatches_per_forward, native.dispatches_per_forward);
  for (const rows of ROWS) {
    const n = native.host_cost.find((c) => c.rows === rows);
    const p = page.cost.host_cost.find((c) => c.rows === rows);
    assert.equal(p.dispatches, n.dispatches, `dispatches of a ${rows}-row forward`);
    assert.equal(p.dispatches, native.dispatches_per_forward + 1, 'the list and the argmax');
    for (const ms of [p.encode_submit_ms, p.wait_ms]) assert.ok(Number.isFinite(ms) && ms >= 0, `${ms}`);
    assert.ok(p.wait_ms > 0, 'the page waited for the device');
    // Each dispatch is at least one call (dispatchWorkgroups); the wait maps the result back.
    assert.ok(p.calls_encode_submit >= p.dispatches, `${p.calls_encode_submit} calls`);
    assert.ok(p.calls_wait > 0, `${p.calls_wait} calls`);

    const byName = {};
    for (const [name, count] of Object.entries(page.byImport[rows])) {
      byName[importName(name)] = (byName[importName(name)] ?? 0) + count;
    }
    assert.equal(byName.dispatchWorkgroups, p.dispatches, 'dispatchWorkgroups calls of one forward');
    assert.equal(byName.submit, 1, 'one submit a forward');
    // Everything the forward calls happens inside its two phases, plus the engine's four clock
    // readings, which the phases' counts leave out.
    const all = Object.values(byName).reduce((a, b) => a + b, 0);
    assert.equal(byName.now, 4, 'performance.now() readings');
    assert.equal(all - byName.now, p.calls_encode_submit + p.calls_wait, JSON.stringify(byName));
  }
});
