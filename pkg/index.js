// The npm package `runahead`: a thin layer over the wasm-bindgen `Engine` (crates/web) that
// reads the model (URL with download progress, File/Blob, or bytes), streams tokens as an async
// iterator, maps AbortSignal to cancel(), and turns every failure into a RunaheadError.

import init, { Engine } from './wasm/runahead.js';

/** An error with a stable `code` (see README.md) and a message a person can act on. */
export class RunaheadError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'RunaheadError';
    this.code = code;
  }
}

// Errors from the wasm side are Errors with a string `code`; anything else is a bug here.
function toRunaheadError(e, fallbackCode = 'internal') {
  if (e instanceof RunaheadError) return e;
  if (e instanceof Error && typeof e.code === 'string') {
    return new RunaheadError(e.code, e.message, { cause: e.cause ?? e });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new RunaheadError(fallbackCode, message, { cause: e });
}

function abortError(what) {
  return new RunaheadError('cancelled', `${what} was cancelled`);
}

let wasmReady = null;

/**
 * Loads and instantiates the WebAssembly module (once; `Runahead.load` calls it). `wasmUrl`
 * overrides where `runahead_bg.wasm` is fetched from (default: next to this package's files).
 */
export function initialize(wasmUrl) {
  wasmReady ??= init(wasmUrl === undefined ? undefined : { module_or_path: wasmUrl }).catch((e) => {
    wasmReady = null;
    throw toRunaheadError(e, 'wasm');
  });
  return wasmReady;
}

// Reads a stream to one Uint8Array, reporting progress after every chunk.
async function readStream(stream, total, onProgress, signal) {
  const reader = stream.getReader();
  const chunks = [];
  let loaded = 0;
  onProgress?.({ loaded, total });
  for (;;) {
    if (signal?.aborted) {
      await reader.cancel();
      throw abortError('loading the model');
    }
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.byteLength;
    onProgress?.({ loaded, total });
  }
  if (chunks.length === 1) return chunks[0];
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return bytes;
}

// The model's bytes from a URL (string or URL), a Blob/File, an ArrayBuffer or a typed array.
async function readSource(source, onProgress, signal) {
  if (typeof source === 'string' || source instanceof URL) {
    let response;
    try {
      response = await fetch(source, { signal });
    } catch (e) {
      if (signal?.aborted) throw abortError('loading the model');
      throw new RunaheadError('fetch', `cannot fetch ${source}: ${e.message}`, { cause: e });
    }
    if (!response.ok || !response.body) {
      throw new RunaheadError('fetch', `cannot fetch ${source}: HTTP ${response.status}`);
    }
    // Content-Length is the compressed size when the server compresses: then it is no total.
    const length = Number(response.headers.get('content-length'));
    const compressed = response.headers.get('content-encoding');
    const total = length > 0 && !compressed ? length : undefined;
    try {
      return await readStream(response.body, total, onProgress, signal);
    } catch (e) {
      if (signal?.aborted) throw abortError('loading the model');
      throw toRunaheadError(e, 'fetch');
    }
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return readStream(source.stream(), source.size, onProgress, signal);
  }
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) {
    return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  }
  throw new RunaheadError(
    'invalid_source',
    'load() takes a URL, a File or Blob, an ArrayBuffer or a Uint8Array',
  );
}

/** One generation: an async iterator of verified tokens, with its final result. */
class Generation {
  #engine;
  #queue = [];
  #wake = null;
  #done = false;

  constructor(engine, prompt, options) {
    const { signal, ...rest } = options ?? {};
    this.#engine = engine;
    const onToken = (text, token, fromDraft) => {
      this.#queue.push({ text, token, fromDraft });
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
      started = engine.generate(String(prompt), rest, onToken);
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
      // The consumer left the loop early (break, return, throw): stop generating.
      this.cancel();
    }
  }
}

/** A model loaded onto the GPU. */
export class Runahead {
  #engine;

  constructor(engine) {
    if (!(engine instanceof Engine)) {
      throw new TypeError('use `await Runahead.load(...)` to create a Runahead');
    }
    this.#engine = engine;
  }

  /**
   * Reads a GGUF model (URL, File/Blob, ArrayBuffer or Uint8Array), opens a WebGPU device and
   * uploads the weights. Options: `context` (KV cache size in tokens), `onProgress({loaded,
   * total})` while reading, `signal` (AbortSignal), `wasmUrl`.
   */
  static async load(source, { context, onProgress, signal, wasmUrl } = {}) {
    await initialize(wasmUrl);
    const bytes = await readSource(source, onProgress, signal);
    if (signal?.aborted) throw abortError('loading the model');
    try {
      return new Runahead(await Engine.load(bytes, { context }));
    } catch (e) {
      throw toRunaheadError(e);
    }
  }

  /** Architecture, sizes, tensor types, special tokens, chat template presence, adapter. */
  info() {
    return this.#engine.info();
  }

  /** Token ids of `text`, tokenized as is. */
  tokenize(text) {
    try {
      return Array.from(this.#engine.tokenize(String(text)));
    } catch (e) {
      throw toRunaheadError(e);
    }
  }

  /** Whether a generation is running (a second one is refused with code "busy"). */
  get generating() {
    return this.#engine.isGenerating;
  }

  /**
   * Starts generating after `prompt`. Options: `maxTokens`, `temperature`, `topK`, `topP`,
   * `seed`, `draft` ("none" | "ngram" | "suffix" | "auto"), `depth` ("auto" | n), `chat`,
   * `signal`. Iterate the result with `for await`
   * to get `{text, token, fromDraft}` chunks; `.stats` and `.result` resolve when it ends.
   */
  generate(prompt, options = {}) {
    return new Generation(this.#engine, prompt, options);
  }

  /** Stops the running generation, if any. */
  cancel() {
    this.#engine.cancel();
  }

  /** Frees the GPU buffers and the wasm-side state; the object is unusable afterwards. */
  dispose() {
    this.#engine.free();
  }
}

export default Runahead;
