// The engine on the thread that runs it (the worker by default, or the page): initializes the
// WebAssembly module (the threaded build where it can run and more than one thread is asked
// for: bindings.js), checks WebGPU before any model byte is read, reads the model and loads it.

import init from './wasm/runahead.js';
import { bindings, canRunThreads, defaultThreads, initializeThreaded, instantiate, startPool } from './bindings.js';
import { keepHistory } from './history.js';
import { abortError, toRunaheadError } from './errors.js';
import { checkSource, dropCached, readModel } from './source.js';

let wasmReady = null;

/**
 * Loads and instantiates the WebAssembly module on this thread (once). `wasmUrl` overrides where
 * it is fetched from (default: next to this package's files, `runahead_relaxed_bg.wasm` where the
 * browser runs relaxed SIMD, else, or when that one does not load, `runahead_bg.wasm`).
 */
export function initialize(wasmUrl) {
  // This exact form lets bundlers find the file.
  const relaxedUrl = new URL('./wasm/runahead_relaxed_bg.wasm', import.meta.url);
  wasmReady ??= instantiate(init, wasmUrl, relaxedUrl).catch((e) => {
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
  const exports = await (threadsReady ?? wasmReady);
  return exports?.memory?.buffer.byteLength ?? 0;
}

let threadsReady = null;

// The threaded module when this thread can run it and `threads` asks for more than one, else
// the single-threaded one (a threaded build that fails to load is reported, then skipped).
async function initializeFor(threads, { wasmUrl, wasmThreadsUrl, onEvent }) {
  if (threads > 1 && canRunThreads()) {
    try {
      threadsReady ??= initializeThreaded(wasmThreadsUrl);
      return await threadsReady;
    } catch (e) {
      threadsReady = null;
      onEvent?.({ type: 'threads_fallback', reason: `the threaded WebAssembly did not load: ${e.message ?? e}` });
    }
  }
  return initialize(wasmUrl);
}

function throwIfAborted(signal) {
  if (signal?.aborted) throw abortError('loading the model');
}

/**
 * Phases, in order: compile (the WebAssembly module), the WebGPU check, download or cache (the
 * model's bytes, which on WebGPU go on to the GPU as they arrive), upload (the last checks, and
 * for the CPU engine its weights' layout); with a `draft` source, download or cache and upload
 * again for the draft model (progress and cache events name the model they are
 * about: `model: 'target'` or `'draft'`); then the stored history of earlier answers is read
 * back. Resolves to `{engine, info, from, clearHistory}`.
 */
export async function loadEngine(source, options = {}) {
  const { context, backend = 'auto', history = true, historyTokens, draft, onProgress, onEvent, signal, wasmUrl } =
    options;
  const threads = options.threads ?? defaultThreads();
  // Both sources are checked before the first byte of either is read.
  checkSource(source, 'the model');
  if (draft !== undefined && draft !== null) checkSource(draft, 'draft');
  onProgress?.({ phase: 'compile', loaded: 0 });
  await initializeFor(threads, { wasmUrl, wasmThreadsUrl: options.wasmThreadsUrl, onEvent });
  throwIfAborted(signal);
  const { Engine, checkWebGpu } = bindings();
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
  const engineOptions = { context, backend, historyTokens, threads };
  const { value: engine, from } = await readAndLoad(
    source,
    options,
    'target',
    (size) => Engine.streamModel(size ?? 0, engineOptions),
    (stream) => stream.finish(),
  );
  if (signal?.aborted) {
    engine.free();
    throw abortError('loading the model');
  }
  if (draft !== undefined && draft !== null) {
    // On the target's engine (its WebGPU device, or the CPU engine), its tokenizer checked
    // against the target's before its weights are loaded. The target goes if the draft fails.
    try {
      // The sha256 option names the target's file, not the draft's.
      await readAndLoad(
        draft,
        { ...options, sha256: undefined },
        'draft',
        (size) => engine.streamDraft(size ?? 0),
        (stream) => stream.finishDraft(),
      );
      throwIfAborted(signal);
    } catch (e) {
      engine.free();
      throw e;
    }
  }
  const info = engine.info();
  // The CPU engine's other threads (the threaded module only grants more than one).
  if (info.threads > 1) await startPool(info.threads - 1, onEvent);
  const loaded = { engine, info, from };
  // The suffix drafter's earlier answers: from and to the origin's storage unless
  // `history: false` (then they last as long as the engine).
  loaded.clearHistory = history ? await keepHistory(engine, onEvent) : async () => engine.clearHistory();
  return loaded;
}

// Progress and events of reading one of the models, tagged with which.
function tagged(options, model) {
  const tag = (f) => f && ((x) => f({ ...x, model }));
  return { ...options, onProgress: tag(options.onProgress), onEvent: tag(options.onEvent) };
}

// Reads a model into the engine through `open(size)` (a ModelStream) and ends it with
// `finish(stream)`; resolves to `{value, from}` (what `finish` returned, where the bytes came
// from).
async function readAndLoad(source, options, model, open, finish) {
  const opts = tagged(options, model);
  const read = await readModel(source, { ...opts, open });
  try {
    return finishLoad(read, finish, opts);
  } catch (e) {
    // A cached copy that is not a model (same size, other bytes): forget it and download.
    if (read.from !== 'cache' || e.code !== 'gguf') throw e;
    await dropCached(source);
    opts.onEvent?.({ type: 'cache_fallback', reason: `the cached copy is not a valid model (${e.message}): downloading` });
    const again = await readModel(source, { ...opts, open });
    return finishLoad(again, finish, opts);
  }
}

function finishLoad({ stream, from }, finish, { onProgress, signal }) {
  const size = stream.received;
  if (signal?.aborted) {
    stream.free();
    throw abortError('loading the model');
  }
  onProgress?.({ phase: 'upload', loaded: 0, total: size });
  let value;
  try {
    value = finish(stream);
  } catch (e) {
    throw toRunaheadError(e);
  }
  onProgress?.({ phase: 'upload', loaded: size, total: size });
  return { value, from };
}
