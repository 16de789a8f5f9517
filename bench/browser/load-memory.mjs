// What loading a model costs a page's memory, in headless Chromium (WebGPU on SwiftShader asked
// for by name, and the CPU engine) through the npm package as it ships: the renderer
// process's resident memory (the page, its worker and their WebAssembly heaps: VmRSS of every
// `--type=renderer` process of this browser, other browsers on the machine left out) and the
// GPU process's, after the load and a short generation, against the same page with no model:
// the engine on the page's thread (`worker: false`), its WebAssembly module already compiled and
// instantiated (what a page pays once, whatever the model); with BENCH_WORKER=1 the engine in
// its worker instead, whose start (a thread, a V8 isolate, the module compiled again) then counts
// too. Also the engine thread's WebAssembly memory (its peak: it only grows) and the page's JS
// heap peak while loading. A fresh browser per row, so no row sees another's memory. Writes JSON
// and a markdown table. Run it through scripts/browser-load-memory.sh.
//
// Environment: BENCH_MODELS (comma-separated paths, default SmolLM2 and Qwen2.5-Coder-0.5B),
// BENCH_BACKENDS (default webgpu,cpu), BENCH_CONTEXT (default 256), BENCH_WORKER (default 0),
// BENCH_OUT (directory, default bench-out/load-memory), CHROMIUM.

import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromiumFlags, root, serve } from '../../tests/e2e/serve.mjs';

const { chromium } = createRequire(new URL('../../tests/e2e/package.json', import.meta.url))('playwright-core');

const MODELS = (process.env.BENCH_MODELS ??
  'models/SmolLM2-135M-Instruct.Q4_1.gguf,models/Qwen2.5-Coder-0.5B-Instruct.gguf').split(',');
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'webgpu,cpu').split(',');
const CONTEXT = Number(process.env.BENCH_CONTEXT ?? 256);
const WORKER = process.env.BENCH_WORKER === '1';
const OUT = process.env.BENCH_OUT ?? join(root, 'bench-out/load-memory');
const MiB = (bytes) => bytes / 2 ** 20;

/** The ids of `root` and every process below it (other browsers on the machine do not count). */
async function family(root) {
  const parent = new Map();
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      // The parent id is the field after the parenthesized command name.
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      parent.set(Number(pid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  const ids = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parent) {
      if (!ids.has(pid) && ids.has(ppid)) { ids.add(pid); grew = true; }
    }
  }
  return ids;
}

/** Resident bytes of the processes of this browser whose command line has `--type=<type>`. */
async function residentOf(ids, type) {
  let total = 0;
  for (const pid of ids) {
    try {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmdline.includes(`--type=${type}`)) continue;
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      total += Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return total;
}

async function resident(browserPid) {
  const ids = await family(browserPid);
  return { renderer: await residentOf(ids, 'renderer'), gpu: await residentOf(ids, 'gpu-process') };
}

async function measure(base, model, backend) {
  // A browser server, for the id of the browser's process: only its own processes are counted.
  const browserServer = await chromium.launchServer({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [...(await chromiumFlags()), '--enable-precise-memory-info'],
    headless: true,
  });
  const browser = await chromium.connect(browserServer.wsEndpoint());
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/pkg/README.md`);
    await page.evaluate(async (worker) => {
      window.pkg = await import('/pkg/index.js');
      if (!worker) await window.pkg.initialize();
    }, WORKER);
    const browserPid = browserServer.process().pid;
    const before = await resident(browserPid);
    const m = await page.evaluate(async ([url, backend, context, worker]) => {
      const heap = () => performance.memory.usedJSHeapSize;
      const heap0 = heap();
      let peak = heap0;
      const sample = () => { peak = Math.max(peak, heap()); };
      const timer = setInterval(sample, 10);
      const started = performance.now();
      window.model = await window.pkg.Runahead.load(url, { backend, context, worker, cache: false, history: false, onProgress: sample });
      const seconds = (performance.now() - started) / 1000;
      clearInterval(timer);
      const result = await window.model.generate('The capital of France is', { maxTokens: 8, draft: 'none' }).result;
      return {
        seconds,
        heapPeak: peak - heap0,
        wasm: await window.model.wasmMemoryBytes(),
        used: window.model.info().backend,
        tokens: result.tokens.length,
      };
    }, [`/${model}`, backend, CONTEXT, WORKER]);
    const after = await resident(browserPid);
    await page.evaluate(() => window.model.dispose());
    const file = (await stat(join(root, model))).size;
    return {
      model,
      backend: m.used,
      worker: WORKER,
      file_mib: MiB(file),
      load_seconds: m.seconds,
      renderer_growth_mib: MiB(after.renderer - before.renderer),
      gpu_process_growth_mib: MiB(after.gpu - before.gpu),
      wasm_memory_mib: MiB(m.wasm),
      page_heap_peak_mib: MiB(m.heapPeak),
      tokens: m.tokens,
    };
  } finally {
    await browser.close();
    await browserServer.close();
  }
}

const { base, server } = await serve();
const rows = [];
try {
  for (const model of MODELS) {
    for (const backend of BACKENDS) {
      const row = await measure(base, model, backend);
      console.log(JSON.stringify(row));
      rows.push(row);
    }
  }
} finally {
  server.kill();
}
await mkdir(OUT, { recursive: true });
await writeFile(join(OUT, 'load-memory.json'), JSON.stringify({ context: CONTEXT, worker: WORKER, rows }, null, 2));
const f = (x) => x.toFixed(1);
const table = [
  '| model | backend | file MiB | renderer +MiB | GPU process +MiB | wasm memory MiB | page heap peak +MiB | load s |',
  '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map((r) => `| ${r.model.replace('models/', '')} | ${r.backend} | ${f(r.file_mib)} | ` +
    `${f(r.renderer_growth_mib)} | ${f(r.gpu_process_growth_mib)} | ${f(r.wasm_memory_mib)} | ` +
    `${f(r.page_heap_peak_mib)} | ${f(r.load_seconds)} |`),
].join('\n');
await writeFile(join(OUT, 'load-memory.md'), `${table}\n`);
console.log(table);
