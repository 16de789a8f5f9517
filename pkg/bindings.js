// The wasm-bindgen module this thread runs: the single-threaded build (wasm/), or the threaded
// one (wasm-threads/: shared memory, atomics), which runs the CPU engine on several threads and
// only a worker of a cross-origin isolated page can run (a SharedArrayBuffer exists only on an
// isolated page; its threads block on atomics, which a page's main thread may not).

import * as single from './wasm/runahead.js';

let current = single;

// A module of one function that multiplies with relaxed SIMD's i32x4.relaxed_dot_i8x16_i7x16_add_s
// (three zero constants, then the opcode 0xfd 0x113): it validates only where the engine has
// relaxed SIMD.
const c16 = [0xfd, 0x0c, ...new Array(16).fill(0)];
const probeBody = [0x00, ...c16, ...c16, ...c16, 0xfd, 0x93, 0x02, 0x0b];
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // a type: () -> v128
  0x03, 0x02, 0x01, 0x00, // a function of it
  0x0a, probeBody.length + 2, 0x01, probeBody.length, ...probeBody, // its code
]);

let relaxed = null;

/**
 * Whether this browser runs WebAssembly relaxed SIMD (Chrome 114 on): the package then loads the
 * builds whose CPU kernels multiply with its dot product (runahead_relaxed_bg.wasm, the same
 * results, faster).
 */
export function relaxedSimd() {
  if (relaxed === null) {
    try {
      relaxed = WebAssembly.validate(RELAXED_PROBE);
    } catch {
      relaxed = false;
    }
  }
  return relaxed;
}

/**
 * Instantiates a build with wasm-bindgen's `init`: from `url` when the page gave one, else the
 * relaxed SIMD build beside the package's files (`relaxedUrl`) where the browser runs it, else
 * the plain one (wasm-bindgen's own default, runahead_bg.wasm beside its JavaScript). A relaxed
 * build that does not load (a host that copied only runahead_bg.wasm) falls back to the plain
 * one, which gives the same tokens.
 */
export async function instantiate(init, url, relaxedUrl) {
  if (url !== undefined) return init({ module_or_path: url });
  if (relaxedSimd()) {
    try {
      return await init({ module_or_path: relaxedUrl });
    } catch (e) {
      console.warn(`runahead: the relaxed SIMD build did not load (${e.message ?? e}); loading the plain one`);
    }
  }
  return init();
}

/** The module in use on this thread (the single-threaded one until the threaded one loads). */
export function bindings() {
  return current;
}

/** Whether this thread may run the threaded build. */
export function canRunThreads() {
  return globalThis.crossOriginIsolated === true && typeof WorkerGlobalScope !== 'undefined';
}

/** The `threads` default: every core the browser reports, up to 8. */
export function defaultThreads() {
  return Math.max(1, Math.min(globalThis.navigator?.hardwareConcurrency ?? 1, 8));
}

let threadedReady = null;

/**
 * Loads and instantiates the threaded module on this thread (once) and makes it current;
 * resolves to its exports.
 */
export function initializeThreaded(wasmUrl) {
  threadedReady ??= (async () => {
    const threaded = await import('./wasm-threads/runahead.js');
    // This exact form lets bundlers find the file.
    const relaxedUrl = new URL('./wasm-threads/runahead_relaxed_bg.wasm', import.meta.url);
    const exports = await instantiate(threaded.default, wasmUrl, relaxedUrl);
    current = threaded;
    return exports;
  })().catch((e) => {
    threadedReady = null;
    throw e;
  });
  return threadedReady;
}

const poolWorkers = [];

// How long a pool worker may take to instantiate the module before the engine goes on without
// it (it still joins later steps when it starts).
const POOL_START_MS = 10_000;

/**
 * Starts Web Workers until the CPU engine's pool has `count` (the threaded module only): each
 * instantiates this thread's module on its shared memory and joins the engine's parallel steps
 * for as long as this thread lives. Resolves once they have started (or failed to). A worker
 * that cannot be created (a Content-Security-Policy without `worker-src 'self'`, say) is
 * reported to `onEvent` as `threads_fallback`: the engine's thread does its share.
 */
export async function startPool(count, onEvent) {
  const [module, memory] = current.poolShare();
  const started = [];
  while (poolWorkers.length < count) {
    let worker;
    try {
      // This exact form lets bundlers find and bundle the worker.
      worker = new Worker(new URL('./pool-worker.js', import.meta.url), { type: 'module' });
    } catch (e) {
      onEvent?.({ type: 'threads_fallback', reason: `the CPU engine's pool workers could not start: ${e.message ?? e}` });
      break;
    }
    poolWorkers.push(worker);
    started.push(new Promise((resolve) => {
      worker.onmessage = resolve;
      worker.onerror = resolve;
      setTimeout(resolve, POOL_START_MS);
    }));
    worker.postMessage({ module, memory });
  }
  await Promise.all(started);
}
