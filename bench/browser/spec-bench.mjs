// Speculative vs plain decoding in headless Chromium, through the npm package as it ships (the
// release wasm in pkg/wasm, the engine in its worker, `backend` as the page would choose it),
// on prompts whose answers copy from their input and on open writing: per prompt, plain and each
// drafter alternating, greedy (so every run gives the same text), the chat template on. Prints
// one JSON object (BENCHMARKS.md records the results). Run it through
// scripts/browser-spec-bench.sh.
//
// Environment: BENCH_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), BENCH_TOKENS (per
// generation, default 64), BENCH_BACKEND ('auto' default, 'cpu', 'webgpu'), BENCH_DRAFTERS
// (default "ngram,suffix,auto"), BENCH_PROMPTS (a file of `runahead bench --suites ...
// --dump-prompts FILE`: the native bench's suites instead of the four prompts below), BENCH_WASM
// (`plain`: the build without relaxed SIMD, by its URL; default: what the package picks),
// CHROMIUM.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromiumFlags, serve } from '../../tests/e2e/serve.mjs';

// The page tests' playwright-core (scripts/setup.sh installs it in tests/e2e).
const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const MODEL = process.env.BENCH_MODEL ?? 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const BACKEND = process.env.BENCH_BACKEND ?? 'auto';
const DRAFTERS = (process.env.BENCH_DRAFTERS ?? 'ngram,suffix,auto').split(',');
const WASM_URL = process.env.BENCH_WASM === 'plain' ? '/pkg/wasm/runahead_bg.wasm' : undefined;

const LIST = 'Paris, Berlin, Madrid, Rome, Lisbon, Vienna, Prague, Warsaw, Dublin, Athens, Oslo';
const CODE = `def total_price(items, tax_rate):
    subtotal = 0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return subtotal + tax
`;
// [suite, prompt text, through the chat template]
const PROMPTS = process.env.BENCH_PROMPTS
  ? JSON.parse(readFileSync(process.env.BENCH_PROMPTS, 'utf8')).flatMap((suite) =>
      suite.prompts.map((p) => [suite.name, p.text, p.chat]))
  : [
      ['copy a list', `Repeat this list of cities exactly, one per line:\n${LIST}`, true],
      ['edit code', `Rename the variable subtotal to net in this function and return the whole function:\n\n${CODE}`, true],
      ['quote and answer', `Text: "${LIST}."\nQuestion: Which cities does the text list? Quote them in order.`, true],
      ['open writing', 'Write a short story about a lighthouse keeper.', true],
    ];

const { base, server } = await serve();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlags(),
  headless: true,
});
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
  const result = await page.evaluate(async ({ url, prompts, tokens, backend, drafters, wasmUrl }) => {
    const { Runahead } = await import('/pkg/index.js');
    // No stored history: each prompt's speedup comes from this visit alone.
    const model = await Runahead.load(url, { backend, history: false, cache: false, wasmUrl });
    const rows = [];
    for (const [suite, prompt, chat] of prompts) {
      // A chat prompt goes through the model's template; a completion prompt as it is.
      const input = chat ? [{ role: 'user', content: prompt }] : prompt;
      const runs = {};
      for (const draft of ['none', ...drafters]) {
        // Forget earlier answers, so no drafter drafts from another prompt's run.
        await model.clearHistory();
        const { stats, tokens: ids } = await model.generate(input, { maxTokens: tokens, draft }).result;
        runs[draft] = {
          tokensPerSecond: stats.tokens_per_second,
          generated: stats.generated_tokens,
          forwardsPerToken: stats.target_forwards_per_token,
          accepted: stats.accepted,
          ids,
        };
      }
      const same = drafters.every((d) => JSON.stringify(runs[d].ids) === JSON.stringify(runs.none.ids));
      for (const run of Object.values(runs)) delete run.ids;
      rows.push({ suite, identicalText: same, runs });
    }
    const info = model.info();
    model.dispose();
    return { backend: info.backend, adapter: info.adapter, rows };
  }, { url: `/${MODEL}`, prompts: PROMPTS, tokens: TOKENS, backend: BACKEND, drafters: DRAFTERS, wasmUrl: WASM_URL });
  for (const row of result.rows) {
    for (const d of DRAFTERS) row.runs[d].speedup = row.runs[d].tokensPerSecond / row.runs.none.tokensPerSecond;
  }
  // Per suite and drafter: the geometric mean of the prompts' speedups, as the native bench reports.
  const suites = {};
  for (const row of result.rows) (suites[row.suite] ??= []).push(row);
  const geomean = (xs) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);
  const summary = Object.entries(suites).map(([suite, rows]) => ({
    suite,
    prompts: rows.length,
    identicalText: rows.every((r) => r.identicalText),
    speedup: Object.fromEntries(DRAFTERS.map((d) => [d, geomean(rows.map((r) => r.runs[d].speedup))])),
  }));
  console.log(JSON.stringify({ model: MODEL, tokens: TOKENS, ...result, summary }, null, 2));
} finally {
  await browser.close();
  server.kill();
}
