// The GPU engine's cost per forward in headless Chromium (WebGPU on SwiftShader) through the
// npm package's release wasm, next to the same engine natively (`runahead bench --backends gpu`,
// wgpu on lavapipe) in the same run: dispatches, host time to encode and submit, host time
// waiting for the device, and the wasm -> JS calls of each phase, for a decoding forward (1 row)
// and a verification block (8 rows). The host times compare (the same engine code, the same
// CPU); the wait times are two different CPU emulations of a GPU and do not. Writes JSON and a
// markdown table. Run it through scripts/browser-forward-cost.sh.
//
// Three phases: native (before), a page that times (the package as it ships), native (after),
// then a page whose wasm imports are wrapped to count calls (import-counter.mjs; the wrapper
// costs time, so that page's times are not reported).
//
// Environment: BENCH_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), BENCH_REPS
// (forwards per size, median; default 10), BENCH_COUNT_REPS (default 2), BENCH_VERIFY (rows of
// the verification block, default 8), RUNAHEAD_BIN (default target/release/runahead),
// BENCH_OUT (directory, default bench-out/forward-cost), CHROMIUM.

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromiumFlags, root, serve } from '../../tests/e2e/serve.mjs';
import { importName, installImportCounter } from './import-counter.mjs';

const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const MODEL = process.env.BENCH_MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const REPS = Number(process.env.BENCH_REPS ?? 10);
const COUNT_REPS = Number(process.env.BENCH_COUNT_REPS ?? 2);
const VERIFY = Number(process.env.BENCH_VERIFY ?? 8);
const RUNAHEAD = process.env.RUNAHEAD_BIN ?? join(root, 'target/release/runahead');
const OUT = process.env.BENCH_OUT ?? join(root, 'bench-out/forward-cost');
// `runahead bench`'s first prompt (crates/cli/src/bench.rs), which its host cost runs behind.
const PROMPT = 'Once upon a time, in a small village by the sea,';
const ROWS = [1, VERIFY];
// Cross-origin isolation: performance.now() ticks in 5 us there, 100 us otherwise.
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

/** `runahead bench --backends gpu` with only its host-cost measurement worth the time. */
export async function nativeCost(bin, model, reps, verify) {
  const dir = await mkdtemp(join(tmpdir(), 'forward-cost-'));
  const json = join(dir, 'native.json');
  const args = ['bench', '--model', model, '--backends', 'gpu', '--prompts', '1', '--max-tokens', '1',
    '--block-sizes', '1', '--block-reps', '1', '--host-reps', String(reps), '--verify-block', String(verify),
    '--json', json];
  const env = { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? dir };
  await promisify(execFile)(bin, args, { env, maxBuffer: 1 << 22 });
  const row = JSON.parse(await readFile(json, 'utf8')).rows.find((r) => r.backend === 'gpu');
  return { device: row.device, dispatches_per_forward: row.dispatches_per_forward, host_cost: row.host_cost };
}

/**
 * Loads the model on WebGPU in a fresh page (the engine on the page's thread) and runs
 * `forwardCost`. With `counting`, the page's wasm imports are wrapped: the engine reads the
 * running count in each phase, and the calls of one forward by import are the difference of
 * two runs of `reps` and `2 * reps` forwards (the prefill and the call's own glue cancel).
 */
export async function pageCost(browser, base, { model, prompt, rows, reps, counting }) {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  try {
    if (counting) await page.addInitScript(installImportCounter);
    await page.goto(`${base}/pkg/README.md`);
    return await page.evaluate(async ({ url, prompt, rows, reps, counting }) => {
      const { loadEngine } = await import('/pkg/core.js');
      const { engine, info } = await loadEngine(url, { backend: 'webgpu', history: false, cache: false });
      try {
        const out = { adapter: info.adapter, crossOriginIsolated: globalThis.crossOriginIsolated === true };
        if (!counting) {
          out.cost = await engine.forwardCost(prompt, { rows, reps });
          return out;
        }
        out.cost = await engine.forwardCost(prompt, { rows, reps }, () => globalThis.__importCalls.total());
        out.byImport = {};
        for (const r of rows) {
          const run = async (n) => {
            const before = globalThis.__importCalls.byName();
            await engine.forwardCost(prompt, { rows: [r], reps: n });
            const after = globalThis.__importCalls.byName();
            return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
          };
          const once = await run(reps);
          const twice = await run(2 * reps);
          const perForward = {};
          for (const [name, n] of Object.entries(twice)) {
            const d = (n - (once[name] ?? 0)) / reps;
            if (d !== 0) perForward[name] = d;
          }
          out.byImport[r] = perForward;
        }
        return out;
      } finally {
        engine.free();
      }
    }, { url: `/${model}`, prompt, rows, reps, counting });
  } finally {
    await page.close();
  }
}

const fmt = (x, digits) => (x === undefined || x === null ? '—' : Number(x).toFixed(digits));
// The least of a size's samples: on a loaded machine the medians carry preemptions (samples
// here are bimodal, natively and in the page), the minimum is the work itself.
const min = (cost) => Math.min(...cost.encode_submit_samples_ms);

function markdown(result) {
  const lines = [];
  const { native, browser } = result;
  lines.push(`Native: ${native[0].device}. Browser: ${browser.adapter} (crossOriginIsolated: ${browser.crossOriginIsolated}).`);
  lines.push('');
  lines.push('| engine | rows | dispatches | encode+submit ms, median | encode+submit ms, min | wait ms, median | wasm->JS calls, encode+submit | wasm->JS calls, wait | staging writes |');
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const rows of ROWS) {
    native.forEach((n, i) => {
      const h = n.host_cost.find((c) => c.rows === rows);
      lines.push(`| native (lavapipe), run ${i + 1} | ${rows} | ${h.dispatches} | ${fmt(h.encode_submit_ms, 3)} | ${fmt(min(h), 3)} | ${fmt(h.wait_ms, 1)} | — | — | ${h.staging_writes} |`);
    });
    const b = browser.cost.host_cost.find((c) => c.rows === rows);
    const c = result.counted.cost.host_cost.find((x) => x.rows === rows);
    lines.push(`| browser (SwiftShader) | ${rows} | ${b.dispatches} | ${fmt(b.encode_submit_ms, 3)} | ${fmt(min(b), 3)} | ${fmt(b.wait_ms, 1)} | ${c.calls_encode_submit} | ${c.calls_wait} | ${b.staging_writes} |`);
  }
  lines.push('');
  lines.push('| rows | browser / native encode+submit, medians | browser / native encode+submit, minima |');
  lines.push('| ---: | ---: | ---: |');
  for (const r of result.ratios) lines.push(`| ${r.rows} | ${fmt(r.median, 2)}x | ${fmt(r.min, 2)}x |`);
  lines.push('');
  lines.push('wasm -> JS calls of one forward by import (differences of two runs; the engine\'s four `performance.now()` readings included):');
  lines.push('');
  lines.push(`| import | ${ROWS.map((r) => `${r} row${r > 1 ? 's' : ''}`).join(' | ')} |`);
  lines.push(`| --- |${' ---: |'.repeat(ROWS.length)}`);
  const names = [...new Set(ROWS.flatMap((r) => Object.keys(result.counted.byImport[r])))];
  const total = (r) => Object.values(result.counted.byImport[r]).reduce((a, b) => a + b, 0);
  names.sort((a, b) => (result.counted.byImport[ROWS[0]][b] ?? 0) - (result.counted.byImport[ROWS[0]][a] ?? 0));
  for (const name of names) {
    lines.push(`| ${importName(name)} | ${ROWS.map((r) => result.counted.byImport[r][name] ?? 0).join(' | ')} |`);
  }
  lines.push(`| **all** | ${ROWS.map(total).join(' | ')} |`);
  return lines.join('\n');
}

async function main() {
  await mkdir(OUT, { recursive: true });
  const model = join(root, MODEL);
  const native = [await nativeCost(RUNAHEAD, model, REPS, VERIFY)];
  const { base, server } = await serve(root, { headers: ISOLATED });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  let timed;
  let counted;
  try {
    const opts = { model: MODEL, prompt: PROMPT, rows: ROWS };
    timed = await pageCost(browser, base, { ...opts, reps: REPS, counting: false });
    native.push(await nativeCost(RUNAHEAD, model, REPS, VERIFY));
    counted = await pageCost(browser, base, { ...opts, reps: COUNT_REPS, counting: true });
  } finally {
    await browser.close();
    server.kill();
  }
  // Against the native runs' mean (medians) and least (minima).
  const ratios = ROWS.map((rows) => {
    const of = (cost) => cost.host_cost.find((c) => c.rows === rows);
    const nativeMedian = native.reduce((a, n) => a + of(n).encode_submit_ms, 0) / native.length;
    const nativeMin = Math.min(...native.map((n) => min(of(n))));
    return { rows, median: of(timed.cost).encode_submit_ms / nativeMedian, min: min(of(timed.cost)) / nativeMin };
  });
  const result = { model: MODEL, prompt: PROMPT, reps: REPS, native, browser: timed, counted, ratios };
  await writeFile(join(OUT, 'forward-cost.json'), `${JSON.stringify(result, null, 2)}\n`);
  const md = markdown(result);
  await writeFile(join(OUT, 'forward-cost.md'), `${md}\n`);
  console.log(md);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
