// The npm package in Debian's headless Chromium (WebGPU on SwiftShader), real SmolLM2: the engine
// runs in a worker by default; a reload reads the model from the cache with zero model bytes over
// the network (counted by this test's server); a corrupt cache entry falls back to the network
// with an event; cancel mid-stream, then the same greedy text as an uncancelled run; the page's
// main thread has no long task while loading and generating; and without WebGPU, `no_webgpu`
// comes before any request for the model when WebGPU is asked for (`backend: 'webgpu'`; 'auto'
// falls back to the CPU engine: tests/e2e/cpu-fallback.test.mjs).
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then the files here)
//
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT = 'The capital of France is';
const MAX_TOKENS = 4;
// Loading uploads ~100 MB and compiles every pipeline on a CPU-emulated GPU.
const SLOW = 240_000;
// The bound for a task on the page's main thread while loading and generating.
const LONG_TASK_MS = 50;

let server;
let base;
let browser;
let page;
let fileBytes;
let reference; // the native CLI's greedy tokens for PROMPT
const pageLog = [];

before(async () => {
  ({ base, server } = await serve());
  fileBytes = (await stat(join(root, MODEL))).size;
  const args = ['generate', '--model', join(root, MODEL), '--prompt', PROMPT,
    '--max-tokens', String(MAX_TOKENS), '--backend', 'cpu', '--draft', 'none', '--json'];
  reference = promisify(execFile)(runahead, args, { maxBuffer: 1 << 20 })
    .then(({ stdout }) => JSON.parse(stdout));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  // One context: its Cache Storage outlives page reloads, as a returning visitor's does.
  const context = await browser.newContext();
  page = await context.newPage();
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

// Loads the model in the page with the package's defaults, recording the main thread's long
// tasks from before the load until `longTasks()` reads them.
function load(p, options = {}) {
  return p.evaluate(async ([url, options]) => {
    const pkg = await import('/pkg/index.js');
    window.longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.longTasks.push(Math.round(e.duration));
    }).observe({ type: 'longtask' });
    const phases = [];
    const events = [];
    const started = performance.now();
    const model = await pkg.Runahead.load(url, {
      context: 64,
      ...options,
      onProgress: (p) => {
        if (phases.at(-1) !== p.phase) phases.push(p.phase);
      },
      onEvent: (e) => events.push(e),
    });
    window.model = model;
    return {
      seconds: (performance.now() - started) / 1000,
      phases,
      events,
      inWorker: model.inWorker,
      from: model.loadedFrom,
      architecture: model.info().architecture,
      pageWasm: await pkg.wasmMemoryBytes(),
      engineWasm: await model.wasmMemoryBytes(),
    };
  }, [url(), options]);
}

const url = () => MODEL;

// Greedy, no drafter; aborts through an AbortSignal after `cancelAfter` chunks when given.
function generate(maxTokens, cancelAfter) {
  return page.evaluate(async ([prompt, maxTokens, cancelAfter]) => {
    const stop = new AbortController();
    const generation = window.model.generate(prompt, { maxTokens, draft: 'none', signal: stop.signal });
    const tokens = [];
    for await (const chunk of generation) {
      tokens.push(chunk.token);
      if (tokens.length === cancelAfter) stop.abort();
    }
    const result = await generation.result;
    return { tokens, text: result.text, stop: result.stats.stop_reason };
  }, [PROMPT, maxTokens, cancelAfter]);
}

const longTasks = () => page.evaluate(() => window.longTasks);

test('the engine runs in a worker by default, and its tokens are the native reference', { timeout: 2 * SLOW }, async () => {
  const loaded = await load(page);
  console.log(`first load: ${loaded.seconds.toFixed(1)} s, phases ${loaded.phases.join(' > ')}`);
  assert.equal(loaded.inWorker, true);
  assert.equal(loaded.from, 'network');
  assert.equal(loaded.architecture, 'llama');
  assert.deepEqual(loaded.phases, ['compile', 'download', 'upload']);
  assert.ok(loaded.events.some((e) => e.type === 'cache_stored'), JSON.stringify(loaded.events));
  // The page never instantiated the engine's WebAssembly: the model lives in the worker's.
  assert.equal(loaded.pageWasm, 0);
  assert.ok(loaded.engineWasm > fileBytes, `worker wasm memory ${loaded.engineWasm}`);
  assert.ok(page.workers().some((w) => w.url().endsWith('/pkg/worker.js')), 'a worker runs pkg/worker.js');
  assert.equal(server.bytesSent(MODEL), fileBytes);

  const out = await generate(MAX_TOKENS);
  const want = await reference;
  assert.deepEqual(out.tokens, want.tokens);
  assert.equal(out.text, want.text);

  const tasks = await longTasks();
  console.log(`main-thread long tasks while loading and generating: [${tasks.join(', ')}] ms`);
  assert.ok(tasks.every((ms) => ms <= LONG_TASK_MS), `long tasks ${tasks} ms`);
  // The observer does see long tasks here: a 120 ms busy loop in a task of the page is recorded
  // (the worker's messages are such tasks; page.evaluate's own script is not one).
  const seen = await page.evaluate(async () => {
    setTimeout(() => {
      const end = performance.now() + 120;
      while (performance.now() < end);
    }, 0);
    await new Promise((r) => setTimeout(r, 300));
    return window.longTasks;
  });
  assert.ok(seen.some((ms) => ms >= 120), `recorded ${seen}`);
});

test("backend 'webgpu' runs the GPU engine in the worker, with the same greedy tokens", { timeout: 2 * SLOW }, async () => {
  // 'auto' takes the CPU engine on this software adapter (SwiftShader); WebGPU asked for by
  // name still works through the package, in the worker.
  const out = await page.evaluate(async ([url, prompt, maxTokens]) => {
    const { Runahead } = await import('/pkg/index.js');
    const model = await Runahead.load(url, { backend: 'webgpu', context: 64, history: false });
    const result = await model.generate(prompt, { maxTokens, draft: 'none' }).result;
    const info = model.info();
    model.dispose();
    return { backend: info.backend, inWorker: model.inWorker, tokens: result.tokens, stats: result.stats.backend };
  }, [MODEL, PROMPT, MAX_TOKENS]);
  assert.equal(out.backend, 'webgpu');
  assert.equal(out.stats, 'gpu');
  assert.equal(out.inWorker, true);
  assert.deepEqual(out.tokens, (await reference).tokens);
});

test('cancel mid-stream, then generating again gives the uncancelled text', { timeout: 2 * SLOW }, async () => {
  const cancelled = await generate(64, 1);
  assert.equal(cancelled.stop, 'cancelled');
  assert.ok(cancelled.tokens.length >= 1 && cancelled.tokens.length < 64, `${cancelled.tokens.length} tokens`);
  const again = await generate(MAX_TOKENS);
  const want = await reference;
  assert.deepEqual(again.tokens, want.tokens);
  assert.equal(again.text, want.text);
  assert.equal(again.stop, 'max_tokens');
});

test('a reload reads the model from the cache: no model byte over the network', { timeout: 2 * SLOW }, async () => {
  const before = server.bytesSent(MODEL);
  const requestsBefore = server.requests(MODEL).length;
  await page.reload();
  const listed = await page.evaluate(async () => (await import('/pkg/index.js')).Runahead.cache.list());
  assert.equal(listed.length, 1);
  assert.equal(new URL(listed[0].url).pathname, MODEL);
  assert.equal(listed[0].size, fileBytes);

  const loaded = await load(page);
  console.log(`cached load: ${loaded.seconds.toFixed(1)} s, phases ${loaded.phases.join(' > ')}`);
  assert.equal(loaded.from, 'cache');
  assert.deepEqual(loaded.phases, ['compile', 'cache', 'upload']);
  assert.equal(server.bytesSent(MODEL) - before, 0);
  // Only a HEAD: the cache is checked against the server's size and Last-Modified.
  assert.deepEqual(server.requests(MODEL).slice(requestsBefore), ['HEAD']);
  const out = await generate(MAX_TOKENS);
  assert.deepEqual(out.tokens, (await reference).tokens);
  const tasks = await longTasks();
  assert.ok(tasks.every((ms) => ms <= LONG_TASK_MS), `long tasks ${tasks} ms`);
});

// One greedy generation with `draft`, for the history test: its text and what was accepted.
function generateWith(prompt, draft, maxTokens) {
  return page.evaluate(async ([prompt, draft, maxTokens]) => {
    const result = await window.model.generate(prompt, { maxTokens, draft, depth: 8 }).result;
    return { tokens: result.tokens, accepted: result.stats.accepted, drafted: result.stats.drafted, stop: result.stats.stop_reason };
  }, [prompt, draft, maxTokens]);
}

test("after a reload the suffix drafter drafts from the previous visit's answers", { timeout: 3 * SLOW }, async () => {
  const prompt = 'Once upon a time, in a small village by the sea,';
  // The previous visit: no history, then one answer (which the engine stores).
  await page.evaluate(() => window.model.clearHistory());
  const fresh = await generateWith(prompt, 'suffix', 24);
  await page.reload();
  const loaded = await load(page);
  const restored = loaded.events.find((e) => e.type === 'history_restored');
  assert.ok(restored && restored.outputs >= 1, JSON.stringify(loaded.events));
  const returning = await generateWith(prompt, 'suffix', 24);
  assert.equal(fresh.stop, 'max_tokens'); // a 24-token answer to draft from
  assert.deepEqual(returning.tokens, fresh.tokens);
  console.log(`suffix drafter, accepted without / with the previous visit: ${fresh.accepted} / ${returning.accepted}`);
  assert.ok(returning.accepted > fresh.accepted && returning.accepted >= 8,
    `accepted ${returning.accepted} after the reload vs ${fresh.accepted} before`);

  // A damaged record is discarded with an event; the load and the drafting go on.
  await page.evaluate(async () => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('runahead-history');
    for await (const [name, handle] of dir.entries()) {
      const writable = await handle.createWritable({ keepExistingData: true });
      await writable.write({ type: 'write', position: 30, data: new Uint8Array([1, 2, 3]) });
      await writable.close();
      console.log(`damaged ${name}`);
    }
  });
  await page.reload();
  const damaged = await load(page);
  assert.ok(damaged.events.some((e) => e.type === 'history_discarded'), JSON.stringify(damaged.events));
  assert.deepEqual((await generateWith(prompt, 'suffix', 24)).tokens, fresh.tokens);

  // clearHistory() forgets it on disk too.
  await page.evaluate(() => window.model.clearHistory());
  await page.reload();
  const cleared = await load(page);
  assert.ok(!cleared.events.some((e) => e.type === 'history_restored'), JSON.stringify(cleared.events));
});

test('a short cache entry falls back to the network, with an event', { timeout: 2 * SLOW }, async () => {
  await page.reload();
  // The stored entry cut to its first MiB, its description (size, Last-Modified) kept.
  await page.evaluate(async (model) => {
    const cache = await caches.open('runahead-models-v1');
    const key = new URL(model, location.href).href;
    const stored = await cache.match(key);
    const head = (await stored.arrayBuffer()).slice(0, 1 << 20);
    await cache.put(key, new Response(head, { headers: stored.headers }));
  }, MODEL);
  const before = server.bytesSent(MODEL);
  const loaded = await load(page);
  assert.equal(loaded.from, 'network');
  const fallback = loaded.events.find((e) => e.type === 'cache_fallback');
  assert.ok(fallback, JSON.stringify(loaded.events));
  assert.match(fallback.reason, /ended after 1048576 of its \d+ bytes/);
  assert.equal(server.bytesSent(MODEL) - before, fileBytes);
  assert.deepEqual(loaded.phases, ['compile', 'cache', 'download', 'upload']);
  const out = await generate(1);
  assert.deepEqual(out.tokens, (await reference).tokens.slice(0, 1));
  // The download stored a whole copy again.
  const listed = await page.evaluate(async () => (await import('/pkg/index.js')).Runahead.cache.list());
  assert.equal(listed[0]?.size, fileBytes);
});

test("without WebGPU, backend 'webgpu' gets no_webgpu before any request for the model", async () => {
  const gpuFlags = /webgpu|vulkan/i;
  const bare = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: (await chromiumFlags()).filter((f) => !gpuFlags.test(f)),
    headless: true,
  });
  try {
    const p = await bare.newPage();
    await p.goto(`${base}/pkg/README.md`);
    const requests = server.requests(MODEL).length;
    const outcome = await p.evaluate(async (url) => {
      const { Runahead, RunaheadError } = await import('/pkg/index.js');
      const codeOf = async (options) => {
        try {
          await Runahead.load(url, options);
          return 'loaded';
        } catch (e) {
          return `${e instanceof RunaheadError} ${e.code}`;
        }
      };
      return {
        worker: await codeOf({ backend: 'webgpu' }),
        page: await codeOf({ backend: 'webgpu', worker: false }),
      };
    }, MODEL);
    assert.deepEqual(outcome, { worker: 'true no_webgpu', page: 'true no_webgpu' });
    assert.equal(server.requests(MODEL).length, requests);
  } finally {
    await bare.close();
  }
});

test('a given sha256 is checked as the bytes arrive, and names the cached copy', { timeout: 2 * SLOW }, async () => {
  const { createHash } = await import('node:crypto');
  const { readFile } = await import('node:fs/promises');
  const sha256 = createHash('sha256').update(await readFile(join(root, MODEL))).digest('hex');
  await page.reload();
  const wrong = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    try {
      await Runahead.load(url, { context: 64, sha256: '0'.repeat(64) });
      return 'loaded';
    } catch (e) {
      return `${e.code}: ${e.message}`;
    }
  }, MODEL);
  assert.match(wrong, /^fetch: the model's sha256 is [0-9a-f]{64}, not the expected 0{64}$/);
  assert.ok(wrong.includes(sha256), wrong);

  // The entry stored without a sha256 does not answer for one: downloaded, stored with it...
  let loaded = await load(page, { sha256 });
  assert.equal(loaded.from, 'network');
  let listed = await page.evaluate(async () => (await import('/pkg/index.js')).Runahead.cache.list());
  assert.deepEqual(listed.map((m) => m.sha256), [sha256]);
  // ...and read from the cache, checked, on the next visit.
  await page.reload();
  const before = server.bytesSent(MODEL);
  loaded = await load(page, { sha256 });
  assert.equal(loaded.from, 'cache');
  assert.equal(server.bytesSent(MODEL) - before, 0);
  assert.equal((await generate(1)).tokens[0], (await reference).tokens[0]);

  // Runahead.cache.delete and clear empty it.
  listed = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    const deleted = await Runahead.cache.delete(url);
    const again = await Runahead.cache.delete(url);
    await Runahead.cache.clear();
    return { deleted, again, left: (await Runahead.cache.list()).length };
  }, MODEL);
  assert.deepEqual(listed, { deleted: true, again: false, left: 0 });
});

test('an AbortSignal stops the load in the download and in the upload phase', { timeout: SLOW }, async () => {
  await page.reload();
  const outcome = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    const abortIn = async (phase, worker) => {
      const stop = new AbortController();
      try {
        await Runahead.load(url, {
          context: 64,
          worker,
          signal: stop.signal,
          onProgress: (p) => {
            if (p.phase === phase && (phase !== 'download' || p.loaded > 0)) stop.abort();
          },
        });
        return 'loaded';
      } catch (e) {
        return e.code;
      }
    };
    const download = await abortIn('download', true);
    const pageDownload = await abortIn('download', false);
    // An aborted download leaves nothing in the cache.
    const cached = (await Runahead.cache.list()).length;
    const upload = await abortIn('upload', true);
    const pageUpload = await abortIn('upload', false);
    // Aborting a load's signal after the load leaves the model alone.
    const late = new AbortController();
    const model = await Runahead.load(url, { context: 64, signal: late.signal });
    late.abort();
    const after = (await model.generate('Hi', { maxTokens: 1 }).result).stats.stop_reason;
    model.dispose();
    return { download, pageDownload, cached, upload, pageUpload, after };
  }, MODEL);
  assert.deepEqual(outcome, {
    download: 'cancelled', pageDownload: 'cancelled', cached: 0, upload: 'cancelled', pageUpload: 'cancelled',
    after: 'max_tokens',
  });
});
