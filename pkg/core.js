// The engine on the thread that runs it (the worker by default, or the page): initializes the
// WebAssembly module, checks WebGPU before any model byte is read, reads the model and loads it.

import init, { Engine, ModelBytes, checkWebGpu } from './wasm/runahead.js';
import { keepHistory } from './history.js';
import { abortError, toRunaheadError } from './errors.js';
import { dropCached, readModel } from './source.js';

let wasmReady = null;

/**
 * Loads and instantiates the WebAssembly module on this thread (once). `wasmUrl` overrides where
 * `runahead_bg.wasm` is fetched from (default: next to this package's files).
 */
export function initialize(wasmUrl) {
  wasmReady ??= init(wasmUrl === undefined ? undefined : { module_or_path: wasmUrl }).catch((e) => {
    wasmReady = null;
    throw toRunaheadError(e, 'wasm');
  });
  return wasmReady;
}

/**
 * Bytes of this thread's WebAssembly memory (it only grows: after a load, its peak), or 0
 * before the module is initialized.
 */
export async function wasmMemoryBytes() {
  const exports = await wasmReady;
  return exports?.memory?.buffer.byteLength ?? 0;
}

function throwIfAborted(signal) {
  if (signal?.aborted) throw abortError('loading the model');
}

/**
 * Phases, in order: compile (the WebAssembly module), the WebGPU check, download or cache (the
 * model's bytes), upload (parsing, weights onto the GPU); then the stored history of earlier
 * answers is read back. Resolves to `{engine, info, from, clearHistory}`.
 */
export async function loadEngine(source, options = {}) {
  const { context, backend = 'auto', history = true, historyTokens, onProgress, onEvent, signal, wasmUrl } = options;
  onProgress?.({ phase: 'compile', loaded: 0 });
  await initialize(wasmUrl);
  throwIfAborted(signal);
  if (backend === 'webgpu') {
    try {
      // Before any model byte is read: no WebGPU, no adapter or too small limits end here.
      // ('auto' never fails for want of a GPU: it falls back to the CPU engine.)
      await checkWebGpu();
    } catch (e) {
      throw toRunaheadError(e);
    }
  }
  throwIfAborted(signal);
  const read = await readModel(source, options);
  const engineOptions = { context, backend, historyTokens };
  let loaded;
  try {
    loaded = await upload(read, engineOptions, { onProgress, signal });
  } catch (e) {
    // A cached copy that is not a model (same size, other bytes): forget it and download.
    if (read.from !== 'cache' || e.code !== 'gguf') throw e;
    await dropCached(source);
    onEvent?.({ type: 'cache_fallback', reason: `the cached copy is not a valid model (${e.message}): downloading` });
    const again = await readModel(source, options);
    loaded = await upload(again, engineOptions, { onProgress, signal });
  }
  // The suffix drafter's earlier answers: from and to the origin's storage unless
  // `history: false` (then they last as long as the engine).
  const { engine } = loaded;
  loaded.clearHistory = history ? await keepHistory(engine, onEvent) : async () => engine.clearHistory();
  return loaded;
}

async function upload({ bytes, from }, engineOptions, { onProgress, signal }) {
  const size = bytes instanceof ModelBytes ? bytes.size : bytes.byteLength;
  if (signal?.aborted) {
    if (bytes instanceof ModelBytes) bytes.free();
    throw abortError('loading the model');
  }
  onProgress?.({ phase: 'upload', loaded: 0, total: size });
  let engine;
  try {
    engine = bytes instanceof ModelBytes
      ? await Engine.loadModelBytes(bytes, engineOptions)
      : await Engine.load(bytes, engineOptions);
  } catch (e) {
    throw toRunaheadError(e);
  }
  if (signal?.aborted) {
    engine.free();
    throw abortError('loading the model');
  }
  onProgress?.({ phase: 'upload', loaded: size, total: size });
  return { engine, info: engine.info(), from };
}
