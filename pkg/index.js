// The npm package `runahead`: the wasm-bindgen `Engine` (crates/web) behind a friendlier API.
// By default the engine runs in a dedicated module worker (worker.js, driven by remote.js), so
// reading the model, uploading it and generating never block the page; `worker: false` runs it
// on the page's thread (core.js) with the same API. Tokens stream as an async iterator,
// AbortSignal maps to cancel(), and every failure is a RunaheadError.

import { Engine } from './wasm/runahead.js';
import { createChat } from './chat.js';
import { initialize, loadEngine, wasmMemoryBytes } from './core.js';
import { bindings, relaxedSimd } from './bindings.js';
import { RunaheadError, abortError, toRunaheadError } from './errors.js';
import { checkSource } from './source.js';
import { WorkerEngine } from './remote.js';
import { modelCache } from './cache.js';
import { probeHere } from './probe.js';

export { RunaheadError, initialize, relaxedSimd, wasmMemoryBytes };

/** One generation: an async iterator of verified tokens, with its final result. */
class Generation {
  #engine;
  #queue = [];
  #wake = null;
  #done = false;

  constructor(engine, prompt, options) {
    const { signal, ...rest } = options ?? {};
    this.#engine = engine;
    // `info`: the token's provenance, and its log-probability with `logprobs`.
    const onToken = (text, token, fromDraft, info) => {
      const provenance = info?.provenance ?? (fromDraft ? 'draft' : 'target');
      this.#queue.push({ text, token, fromDraft, provenance, ...(info?.logprob ? { logprob: info.logprob } : {}) });
      this.#notify();
    };
    let started;
    if (signal?.aborted) {
      started = Promise.reject(abortError('the generation'));
    } else {
      // Only a generation that actually started may be cancelled by its signal (a refused
      // one must not cancel the generation that made it busy).
      const wasBusy = engine.isGenerating;
      const cancel = () => engine.cancel();
      started = engine.generate(Array.isArray(prompt) ? prompt : String(prompt), rest, onToken);
      if (!wasBusy) signal?.addEventListener('abort', cancel, { once: true });
      started = started.finally(() => signal?.removeEventListener('abort', cancel));
    }
    /** Resolves to `{tokens, text, stats}`, what `runahead generate --json` prints. */
    this.result = started.then(
      (r) => r,
      (e) => {
        throw toRunaheadError(e);
      },
    );
    this.result
      .catch(() => {})
      .finally(() => {
        this.#done = true;
        this.#notify();
      });
    /** Resolves to the statistics (`stats` of the result). */
    this.stats = this.result.then((r) => r.stats);
    // Failures surface through the iterator, `result` and `stats`: whichever the caller uses.
    this.stats.catch(() => {});
  }

  #notify() {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** Stops after the token being verified; the iterator ends, `stop_reason` is "cancelled". */
  cancel() {
    if (!this.#done) this.#engine.cancel();
  }

  async *[Symbol.asyncIterator]() {
    try {
      for (;;) {
        if (this.#queue.length > 0) {
          yield this.#queue.shift();
        } else if (this.#done) {
          break;
        } else {
          await new Promise((resolve) => {
            this.#wake = resolve;
          });
        }
      }
      await this.result;
    } finally {
      // The consumer left the loop early (break, return, throw): stop generating, and wait
      // until the engine is free, so a request right after the loop is not refused as busy.
      this.cancel();
      await this.result.catch(() => {});
    }
  }
}

// Only Runahead.load makes a Runahead.
const CONSTRUCT = Symbol('Runahead');

// A URL relative to the page means the page's URL, not the worker script's.
function forWorker(source) {
  if (typeof source === 'string' || source instanceof URL) {
    return new URL(source, globalThis.location?.href).href;
  }
  // A view of part of a buffer: send a copy of that part (the whole buffer is transferred).
  if (ArrayBuffer.isView(source)) {
    const whole = source.byteOffset === 0 && source.byteLength === source.buffer.byteLength;
    return whole ? source.buffer : source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength);
  }
  return source;
}

// Bytes the page holds go to a probe's worker as a copy of their first part (a header is at
// most this long in practice), with the whole size: the caller keeps its buffer for load().
const PROBE_BYTES = 32 << 20;

function forProbeWorker(source) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const view = ArrayBuffer.isView(source)
      ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength)
      : new Uint8Array(source);
    return { bytes: view.slice(0, PROBE_BYTES).buffer, size: view.length };
  }
  return forWorker(source);
}

/** A model loaded onto the GPU or the CPU engine. */
export class Runahead {
  #engine;
  #info;
  #inWorker;
  #from;
  #clearHistory = null;

  constructor(token, engine, info, inWorker, from) {
    if (token !== CONSTRUCT) {
      throw new TypeError('use `await Runahead.load(...)` to create a Runahead');
    }
    this.#engine = engine;
    this.#info = info;
    this.#inWorker = inWorker;
    this.#from = from;
    /** `chat(messages, options)` and `chat.completions.create(request)` (see chat.js). */
    this.chat = createChat(this);
  }

  /**
   * The model cache: `list()`, `delete(url)`, `clear()`, `estimate()` (this origin's storage
   * use and quota, the cached models' bytes), `persist()` and `persisted()`.
   */
  static cache = modelCache;

  /**
   * Reads only the GGUF header of `source` (a URL by HTTP Range requests, or from the model
   * cache; a File/Blob by slices; bytes) and answers before any weight is read: whether the
   * engines run the model and why not, its parameters and sizes, the memory its weights and KV
   * cache at `context` need, the WebGPU adapter and its limits, the backend `auto` would choose
   * and whether the model `fits` there (`fitsReason` when not). Options: `context`, `backend`,
   * `memoryBudget` (bytes), `cache`, `worker`, `signal`, `wasmUrl` (see README.md, "Before the
   * download: probe"). Rejects with `gguf` for a file that is not a GGUF model at all.
   */
  static async probe(source, options = {}) {
    const { worker = typeof Worker !== 'undefined', signal, ...rest } = options;
    const settings = {
      context: rest.context,
      backend: rest.backend ?? 'auto',
      memoryBudget: rest.memoryBudget,
      cache: rest.cache,
      wasmUrl: rest.wasmUrl === undefined ? undefined : new URL(rest.wasmUrl, globalThis.location?.href).href,
    };
    checkSource(source, 'the model');
    if (!worker) {
      try {
        return await probeHere(source, { ...settings, signal });
      } catch (e) {
        throw toRunaheadError(e);
      }
    }
    const remote = new WorkerEngine();
    try {
      return await remote.probe(forProbeWorker(source), settings, signal);
    } finally {
      remote.terminate();
    }
  }

  /**
   * Reads a GGUF model (URL, File/Blob, ArrayBuffer or Uint8Array) and loads it onto WebGPU or
   * the CPU engine, in a worker unless `worker: false`. Options: `context`, `backend` ('auto',
   * the default: WebGPU on a hardware adapter, else the CPU engine; 'webgpu'; 'cpu'), `draft`
   * (a second model of any kind `source` may be, with the same tokenizer, loaded on the same
   * engine: `generate(..., {draft: 'model'})` drafts with it), `worker`, `cache`, `sha256`,
   * `onProgress({phase, loaded, total, model})`, `onEvent(event)`, `signal`, `wasmUrl`,
   * `threads` (the CPU engine's; default every core up to 8, more than one only in a worker of a
   * cross-origin isolated page), `wasmThreadsUrl` (see README.md).
   */
  static async load(source, options = {}) {
    const { worker = typeof Worker !== 'undefined', onProgress, onEvent, signal, draft, ...rest } = options;
    const settings = {
      context: rest.context,
      backend: rest.backend ?? 'auto',
      history: rest.history ?? true,
      historyTokens: rest.historyTokens,
      cache: rest.cache,
      sha256: rest.sha256,
      wasmUrl: rest.wasmUrl,
      wasmThreadsUrl: rest.wasmThreadsUrl,
      threads: rest.threads,
    };
    for (const key of ['wasmUrl', 'wasmThreadsUrl']) {
      if (settings[key] !== undefined) settings[key] = new URL(settings[key], globalThis.location?.href).href;
    }
    if (worker) {
      const remote = new WorkerEngine();
      try {
        const { info, from } = await remote.load(forWorker(source), settings, {
          draft: draft === undefined || draft === null ? undefined : forWorker(draft),
          onProgress,
          onEvent,
          signal,
        });
        return new Runahead(CONSTRUCT, remote, info, true, from);
      } catch (e) {
        remote.terminate();
        // A browser with WebGPU on the page but not in workers: run on the page instead.
        const pageHasGpu = typeof navigator !== 'undefined' && Boolean(navigator.gpu);
        if (e.code !== 'no_webgpu' || !pageHasGpu) throw e;
        onEvent?.({ type: 'worker_fallback', reason: `WebGPU is not available in a worker here: ${e.message}` });
      }
    }
    const { engine, info, from, clearHistory } = await loadEngine(source, {
      ...settings,
      draft,
      onProgress,
      onEvent,
      signal,
    });
    const runahead = new Runahead(CONSTRUCT, engine, info, false, from);
    runahead.#clearHistory = clearHistory;
    return runahead;
  }

  /**
   * Architecture, sizes, tensor types, special tokens, chat template presence, backend
   * ('webgpu' or 'cpu', with `backendReason` when 'auto' fell back to the CPU), adapter, and
   * `draft` (name, architecture, parameters, ...) when a draft model was loaded.
   */
  info() {
    return structuredClone(this.#info);
  }

  /** Whether the engine runs in a worker (the default) rather than on the page's thread. */
  get inWorker() {
    return this.#inWorker;
  }

  /** Where the model's bytes came from: "network", "cache", "file" or "bytes". */
  get loadedFrom() {
    return this.#from;
  }

  /** Token ids of `text`, tokenized as is (a promise: the tokenizer may be in the worker). */
  async tokenize(text) {
    try {
      return Array.from(await this.#engine.tokenize(String(text)));
    } catch (e) {
      throw toRunaheadError(e);
    }
  }

  /** Whether a generation is running (a second one is refused with code "busy"). */
  get generating() {
    return this.#engine.isGenerating;
  }

  /** Same as `generating`. */
  get busy() {
    return this.#engine.isGenerating;
  }

  /**
   * Starts generating after `prompt` (a string, or messages `[{role, content}]` rendered by the
   * model's chat template). Options: `maxTokens`, `temperature`, `topK`, `topP`, `seed`, `draft`
   * ("none" | "ngram" | "suffix" | "model" (the draft model loaded with `load(..., {draft})`) |
   * "auto" (the suffix lookup, and the draft model when there is one)), `depth` ("auto" | n),
   * `chat`, `stop` (strings that end the text), `signal`. Iterate the result with `for await`
   * to get `{text, token, fromDraft, provenance, logprob?}` chunks; `.stats` and `.result`
   * resolve when it ends.
   */
  generate(prompt, options = {}) {
    return new Generation(this.#engine, prompt, options);
  }

  /**
   * Forgets the earlier answers the suffix drafter drafts from, in the engine and in the
   * origin's storage (`busy` while a generation runs).
   */
  async clearHistory() {
    try {
      await (this.#inWorker ? this.#engine.clearHistory() : this.#clearHistory());
    } catch (e) {
      throw toRunaheadError(e);
    }
  }

  /** Stops the running generation, if any. */
  cancel() {
    this.#engine.cancel();
  }

  /** Bytes of the WebAssembly memory of the thread that holds this engine (worker or page). */
  async wasmMemoryBytes() {
    return this.#inWorker ? this.#engine.memoryBytes() : wasmMemoryBytes();
  }

  /**
   * The CPU engine's pool in the thread that holds this engine: `{threaded, workers,
   * stepsJoined}`, whether the threaded build runs it, the Web Workers that joined the pool and
   * the parallel steps they took part in (both 0 on one thread).
   */
  async cpuPool() {
    return this.#inWorker ? this.#engine.cpuPool() : bindings().cpuPoolStats();
  }

  /**
   * Frees the GPU buffers and the wasm-side state, the draft model's included (in worker mode:
   * ends the worker); the object is unusable afterwards.
   */
  dispose() {
    if (this.#engine instanceof Engine) this.#engine.free();
    else this.#engine.terminate();
  }
}

export default Runahead;
