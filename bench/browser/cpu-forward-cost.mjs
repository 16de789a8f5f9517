// What a forward of each block size costs the CPU engine in headless Chromium (WebGPU off): the
// package's release wasm, the engine on the page's thread (`loadEngine` from /pkg/core.js),
// `engine.forwardCost` behind a prompt. A verification block's cost over a decoding step's is
// what speculative decoding in the page can gain; `forward_cost` (crates/cpu/examples) measures
// the same natively. Prints JSON and a markdown table. Run it through
// scripts/browser-cpu-forward-cost.sh.
//
// Environment: BENCH_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), BENCH_ROWS (block
// sizes, default 1,2,4,8,16), BENCH_REPS (forwards a size, default 15), BENCH_PROMPT_REPEAT (the
// prompt's sentence this many times, default 1; 40 puts ~500 tokens ahead), BENCH_ROUNDS (the
// whole measurement this many times in one page, default 2), BENCH_WASM (`plain`: the build
// without relaxed SIMD; default: what the package picks), CHROMIUM.
import { createRequire } from 'node:module';
import { chromiumFlagsWithoutWebGpu, root, serve } from '../../tests/e2e/serve.mjs';

const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const MODEL = process.env.BENCH_MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const ROWS = (process.env.BENCH_ROWS ?? '1,2,4,8,16').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 15);
const REPEAT = Number(process.env.BENCH_PROMPT_REPEAT ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const PROMPT = Array(REPEAT).fill('Once upon a time, in a small village by the sea,').join(' ');
const CONTEXT = Math.max(512, 64 * Math.ceil((16 * REPEAT + 64) / 64));
const WASM_URL = process.env.BENCH_WASM === 'plain' ? '/pkg/wasm/runahead_bg.wasm' : undefined;

const { base, server } = await serve(root);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlagsWithoutWebGpu(),
  headless: true,
});
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
  const result = await page.evaluate(async ({ url, prompt, rows, reps, rounds, context, wasmUrl }) => {
    const { loadEngine } = await import('/pkg/core.js');
    const { engine, info } = await loadEngine(url, { backend: 'cpu', context, threads: 1, history: false, cache: false, wasmUrl });
    try {
      const runs = [];
      for (let r = 0; r < rounds; r++) runs.push(await engine.forwardCost(prompt, { rows, reps }));
      return { info, runs, userAgent: navigator.userAgent };
    } finally {
      engine.free();
    }
  }, { url: `/${MODEL}`, prompt: PROMPT, rows: ROWS, reps: REPS, rounds: ROUNDS, context: CONTEXT, wasmUrl: WASM_URL });
  const lines = [
    `${MODEL}, ${result.runs[0].kernels} kernels (${result.runs[0].relaxed_simd ? 'relaxed SIMD build' : 'plain SIMD build'}), ` +
      `${result.runs[0].threads} thread, behind ${result.runs[0].prompt_tokens} tokens, ${REPS} forwards a size`,
    '',
    '| round | ' + ROWS.map((r) => `${r} rows ms`).join(' | ') + ' | ' + ROWS.filter((r) => r > 1).map((r) => `${r} / 1`).join(' | ') + ' |',
    '| ---: | ' + ROWS.map(() => '---:').join(' | ') + ' | ' + ROWS.filter((r) => r > 1).map(() => '---:').join(' | ') + ' |',
  ];
  result.runs.forEach((run, i) => {
    const ms = run.forwards.map((f) => f.median_ms.toFixed(2));
    const ratios = run.forwards.filter((f) => f.rows > 1).map((f) => `${(f.median_vs_one_row ?? 0).toFixed(2)}x`);
    lines.push(`| ${i + 1} | ${ms.join(' | ')} | ${ratios.join(' | ')} |`);
  });
  console.log(JSON.stringify({ model: MODEL, wasm: process.env.BENCH_WASM ?? 'auto', ...result }, null, 2));
  console.log(lines.join('\n'));
} finally {
  await browser.close();
  server.close();
}
