// The JSON extraction suite in headless Chromium, through the npm package as it ships (the
// release wasm in pkg/wasm, the engine in its worker): structured answers from a given text under
// a JSON schema (bench/extraction-tasks.json, the tasks the native suite runs:
// `cargo run --release -p runahead-grammar --example extraction`), greedy, constrained plain
// decoding against constrained speculative decoding per drafter. Per model and engine
// configuration (the CPU engine on 1 thread, on 2 where the threaded build exists, and WebGPU),
// totals over the tasks: tokens, tokens per forward, tokens/s, the ratio to plain, and the grammar
// mask's time (`stats.mask_seconds`) per mask and per generated token, and for plain decoding
// the first mask of each answer apart from the rest (a one-token generation of the same prompt
// times the first mask alone: a fresh grammar's first mask costs more than the rest). Every
// drafter's tokens must equal plain decoding's, task by task. Prints one JSON object; run it
// through scripts/browser-extraction-bench.sh.
//
// Environment: BENCH_MODELS (comma-separated, default SmolLM2-135M and Qwen2.5-Coder-0.5B from
// models/), BENCH_CONFIGS (default "cpu:1,cpu:2,webgpu"; cpu:2 is skipped without
// pkg/wasm-threads), BENCH_WEBGPU_MODELS (the models WebGPU runs, default SmolLM2 only:
// SwiftShader is a CPU emulation), BENCH_TOKENS (default 160), BENCH_DRAFTERS (default
// "ngram,suffix"), BENCH_TASKS (task names, comma-separated; default all), CHROMIUM.

import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromiumFlags, root, serve } from '../../tests/e2e/serve.mjs';

// The page tests' playwright-core (scripts/setup.sh installs it in tests/e2e).
const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const SMOLLM2 = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const QWEN = 'models/Qwen2.5-Coder-0.5B-Instruct.gguf';
const MODELS = (process.env.BENCH_MODELS ?? `${SMOLLM2},${QWEN}`).split(',');
const WEBGPU_MODELS = (process.env.BENCH_WEBGPU_MODELS ?? SMOLLM2).split(',');
const THREADED = existsSync(join(root, 'pkg/wasm-threads/runahead_bg.wasm'));
const CONFIGS = (process.env.BENCH_CONFIGS ?? 'cpu:1,cpu:2,webgpu')
  .split(',')
  .filter((c) => c !== 'cpu:2' || THREADED);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 160);
// `none` or an empty list: plain decoding only.
const DRAFTERS = (process.env.BENCH_DRAFTERS ?? 'ngram,suffix').split(',')
  .filter((d) => d && d !== 'none');

const suite = JSON.parse(readFileSync(join(root, 'bench/extraction-tasks.json'), 'utf8'));
// The prompt the native suite builds (crates/grammar/examples/extraction.rs), as one user message.
const only = process.env.BENCH_TASKS?.split(',');
const TASKS = suite.tasks.filter((t) => !only || only.includes(t.name)).map((t) => ({
  name: t.name,
  prompt: `${suite.instruction}\nText: ${t.text}\nSchema: ${JSON.stringify(t.schema)}`,
  schema: t.schema,
}));

// Cross-origin isolated, so the threaded build can run.
// The machine's load when the run starts and ends: other work on the cores skews the timings.
const loadAtStart = loadavg();
const isolation = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};
const { base, server } = await serve(root, { headers: isolation });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlags(),
  headless: true,
});
const results = [];
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  // Progress, one line a generation (on stderr: stdout is the JSON).
  page.on('console', (m) => console.error(`  ${m.text()}`));
  await page.goto(`${base}/pkg/README.md`);
  for (const model of MODELS) {
    for (const config of CONFIGS) {
      if (config === 'webgpu' && !WEBGPU_MODELS.includes(model)) continue;
      const [backend, threads] = config.split(':');
      const started = Date.now();
      const run = await page.evaluate(async ({ url, backend, threads, tasks, tokens, drafters }) => {
        const { Runahead } = await import('/pkg/index.js');
        const options = { backend, history: false, cache: false, context: 1024 };
        if (threads) options.threads = threads;
        const m = await Runahead.load(url, options);
        const runs = {};
        for (const draft of ['none', ...drafters]) {
          const total = {
            tokens: 0, forwards: 0, decodeSeconds: 0, masks: 0, maskSeconds: 0, forced: 0,
            firstMasks: 0, firstMaskSeconds: 0,
          };
          const ids = [];
          for (const task of tasks) {
            // No drafter drafts from another run's answers (the native suite's fresh drafter).
            await m.clearHistory();
            const r = await m.generate([{ role: 'user', content: task.prompt }], {
              maxTokens: tokens, draft, grammar: { jsonSchema: task.schema },
            }).result;
            const s = r.stats;
            total.tokens += s.generated_tokens;
            total.forwards += s.target_forwards;
            total.decodeSeconds += s.decode_seconds;
            total.masks += s.masks;
            total.maskSeconds += s.mask_seconds;
            total.forced += r.provenance.filter((p) => p === 'forced').length;
            ids.push(r.tokens);
            console.log(`${backend}${threads ? `:${threads}` : ''} ${draft} ${task.name}: ${s.generated_tokens} tokens, `
              + `prefill ${s.prefill_seconds.toFixed(2)} s, decode ${s.decode_seconds.toFixed(2)} s, ${s.masks} masks`);
            if (draft === 'none') {
              total.texts = [...(total.texts ?? []), r.text];
              // The same prompt again for one token: its first mask alone.
              const first = (await m.generate([{ role: 'user', content: task.prompt }], {
                maxTokens: 1, draft, grammar: { jsonSchema: task.schema },
              }).result).stats;
              total.firstMasks += first.masks;
              total.firstMaskSeconds += first.mask_seconds;
            }
          }
          runs[draft] = { total, ids };
        }
        const info = m.info();
        m.dispose();
        return { info: { backend: info.backend, adapter: info.adapter, threads: info.threads, threadsReason: info.threadsReason }, runs };
      }, { url: `/${model}`, backend, threads: threads ? Number(threads) : undefined, tasks: TASKS, tokens: TOKENS, drafters: DRAFTERS });

      const plain = run.runs.none.total;
      const plainRate = plain.tokens / plain.decodeSeconds;
      const drafters = {};
      for (const [draft, { total, ids }] of Object.entries(run.runs)) {
        const rate = total.tokens / total.decodeSeconds;
        drafters[draft] = {
          tokens: total.tokens,
          tokens_per_forward: total.tokens / total.forwards,
          tokens_per_second: rate,
          ratio: rate / plainRate,
          grammar_forced: total.forced,
          // One mask per row picked or verified: a rejected draft token's row has one too.
          mask_us: (total.maskSeconds / total.masks) * 1e6,
          mask_us_per_token: (total.maskSeconds / total.tokens) * 1e6,
          masks_per_token: total.masks / total.tokens,
          ...(total.firstMasks > 0 && {
            first_mask_ms: (total.firstMaskSeconds / total.firstMasks) * 1e3,
            mask_us_after_first: ((total.maskSeconds - total.firstMaskSeconds)
              / (total.masks - total.firstMasks)) * 1e6,
          }),
          same_tokens: ids.every((t, i) => JSON.stringify(t) === JSON.stringify(run.runs.none.ids[i])),
        };
      }
      const row = { model, config, engine: run.info, wall_seconds: (Date.now() - started) / 1000, drafters, outputs: plain.texts };
      results.push(row);
      const line = Object.entries(drafters)
        .map(([d, r]) => `${d} ${r.tokens_per_second.toFixed(1)} tok/s ${r.ratio.toFixed(2)}x ${r.tokens_per_forward.toFixed(2)} tok/fwd mask ${r.mask_us.toFixed(1)} us`
          + `${r.first_mask_ms === undefined ? '' : ` (first ${r.first_mask_ms.toFixed(2)} ms, then ${r.mask_us_after_first.toFixed(1)} us)`}${r.same_tokens ? '' : ' DIFFERS'}`)
        .join('; ');
      console.error(`${model} ${config} (${run.info.adapter}): ${line}`);
    }
  }
} finally {
  await browser.close();
  server.kill();
}
const same = results.every((r) => Object.values(r.drafters).every((d) => d.same_tokens));
console.log(JSON.stringify({
  suite: 'bench/extraction-tasks.json',
  tasks: TASKS.length,
  max_tokens: TOKENS,
  greedy: true,
  same_tokens_as_plain: same,
  date: new Date().toISOString(),
  load_average: { start: loadAtStart, end: loadavg() },
  results,
}, null, 2));
if (!same) process.exitCode = 1;
