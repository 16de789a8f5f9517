// A model past 4 GiB on WebGPU in a page: the random-weight llama that
// crates/model/examples/large_gguf.rs writes (4.6 GB, more than a wasm32 heap can address) loaded
// through the npm package in headless Chromium (WebGPU on SwiftShader, asked for by name), its
// weights streamed from the download to the GPU, then greedy tokens, next to the native engine
// on the same file (`runahead generate --backend gpu`, lavapipe). Reports the load time, the
// engine thread's WebAssembly memory, and both runs' tokens. Run it through
// scripts/browser-large-model.sh.
//
// Environment: BENCH_LARGE_MODEL (default bench-out/large-model/large.gguf), BENCH_TOKENS
// (default 3), RUNAHEAD_BIN (default target/release/runahead), BENCH_OUT (default
// bench-out/large-model), CHROMIUM.

import { execFile } from 'node:child_process';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { chromiumFlags, root, serve } from '../../tests/e2e/serve.mjs';

const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const OUT = process.env.BENCH_OUT ?? join(root, 'bench-out/large-model');
const MODEL = process.env.BENCH_LARGE_MODEL ?? join(OUT, 'large.gguf');
const TOKENS = Number(process.env.BENCH_TOKENS ?? 3);
const RUNAHEAD = process.env.RUNAHEAD_BIN ?? join(root, 'target/release/runahead');
const PROMPT = 'the cat sat on the mat';
const CONTEXT = 256;

const size = (await stat(MODEL)).size;
const started = performance.now();
const { stdout } = await promisify(execFile)(RUNAHEAD, ['generate', '--model', MODEL, '--backend', 'gpu',
  '--prompt', PROMPT, '--max-tokens', String(TOKENS), '--context', String(CONTEXT), '--json'],
{ maxBuffer: 1 << 24, env: { ...process.env } });
const native = { tokens: JSON.parse(stdout).tokens, seconds: (performance.now() - started) / 1000 };
console.log(`native: ${JSON.stringify(native)}`);

const { base, server } = await serve();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: await chromiumFlags(),
  headless: true,
});
let page;
try {
  const context = await browser.newContext();
  page = await context.newPage();
  await page.goto(`${base}/pkg/README.md`);
  page.setDefaultTimeout(0);
  const url = `/${relative(root, MODEL)}`;
  const result = await page.evaluate(async ([url, context, prompt, maxTokens]) => {
    const { Runahead } = await import('/pkg/index.js');
    const t0 = performance.now();
    const model = await Runahead.load(url, { backend: 'webgpu', context, cache: false, history: false });
    const loadSeconds = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    const out = await model.generate(prompt, { maxTokens, draft: 'none' }).result;
    const generateSeconds = (performance.now() - t1) / 1000;
    const wasm = await model.wasmMemoryBytes();
    const info = model.info();
    model.dispose();
    return { tokens: out.tokens, loadSeconds, generateSeconds, wasm, backend: info.backend, adapter: info.adapter };
  }, [url, CONTEXT, PROMPT, TOKENS]);
  const report = {
    file_bytes: size,
    native,
    page: result,
    same_tokens: JSON.stringify(native.tokens) === JSON.stringify(result.tokens),
  };
  console.log(JSON.stringify(report, null, 2));
  await mkdir(OUT, { recursive: true });
  await writeFile(join(OUT, 'large-model.json'), JSON.stringify(report, null, 2));
} finally {
  await browser.close();
  server.kill();
}
