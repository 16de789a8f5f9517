// The npm package `runahead`: a thin layer over the wasm-bindgen `Engine` (crates/web) that
// reads the model (URL with download progress, File/Blob, or bytes), streams tokens as an async
// iterator, maps AbortSignal to cancel(), and turns every failure into a RunaheadError.

import init, { Engine, ModelBytes } from './wasm/runahead.js';

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
/**
 * Bytes of the WebAssembly memory (it only grows: after a load, its peak), or 0 before the
 * module is initialized. For measuring what a model costs the page.
 */
export async function wasmMemoryBytes() {
  const exports = await wasmReady;
  return exports?.memory?.buffer.byteLength ?? 0;
}

export function initialize(wasmUrl) {
  wasmReady ??= init(wasmUrl === undefined ? undefined : { module_or_path: wasmUrl }).catch((e) => {
    wasmReady = null;
    throw toRunaheadError(e, 'wasm');
  });
  return wasmReady;
}

// Chunks are read into one reused buffer of this size (where the stream is a byte stream, as
// fetch bodies and Blob streams are) and copied from it into WebAssembly memory.
const CHUNK_BYTES = 1 << 20;

// Reads a stream straight into WebAssembly memory (a ModelBytes of `total` bytes, or growing
// when the total is unknown), reporting progress after every chunk. With a byte stream, every
// read fills the same buffer, so the page holds the model once plus one chunk: a default reader
// would hand out a new buffer per chunk, garbage that piles up faster than it is collected.
async function readStream(stream, total, onProgress, signal) {
  let reader;
  let buffer = null;
  try {
    reader = stream.getReader({ mode: 'byob' });
    buffer = new ArrayBuffer(CHUNK_BYTES);
  } catch {
    reader = stream.getReader();
  }
  let bytes;
  try {
    bytes = new ModelBytes(total ?? 0);
  } catch (e) {
    await reader.cancel();
    throw toRunaheadError(e, 'out_of_memory');
  }
  let loaded = 0;
  onProgress?.({ loaded, total });
  try {
    for (;;) {
      if (signal?.aborted) {
        await reader.cancel();
        throw abortError('loading the model');
      }
      const { done, value } = buffer
        ? await reader.read(new Uint8Array(buffer, 0, buffer.byteLength))
        : await reader.read();
      if (done) break;
      if (total === undefined) bytes.push(value);
      else bytes.write(loaded, value);
      loaded += value.byteLength;
      // The read transferred the buffer into `value`: take it back for the next read.
      if (buffer) buffer = value.buffer;
      onProgress?.({ loaded, total });
    }
  } catch (e) {
    bytes.free();
    throw e;
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

/** A model loaded onto the GPU or the CPU engine. */
export class Runahead {
  #engine;

  constructor(engine) {
    if (!(engine instanceof Engine)) {
      throw new TypeError('use `await Runahead.load(...)` to create a Runahead');
    }
    this.#engine = engine;
  }

  /**
   * Reads a GGUF model (URL, File/Blob, ArrayBuffer or Uint8Array) and loads it onto WebGPU or
   * the CPU engine. Options: `context` (KV cache size in tokens), `backend` ('auto', the
   * default: WebGPU on a hardware adapter, else the CPU engine; 'webgpu'; 'cpu'),
   * `onProgress({loaded, total})` while reading, `signal` (AbortSignal), `wasmUrl`.
   */
  static async load(source, { context, backend = 'auto', onProgress, signal, wasmUrl } = {}) {
    await initialize(wasmUrl);
    if (backend === 'webgpu' && typeof navigator !== 'undefined' && !navigator.gpu) {
      // Before any model byte is fetched.
      throw new RunaheadError(
        'no_webgpu',
        'this browser does not expose WebGPU (navigator.gpu is missing): use a recent Chrome, ' +
          'Edge or Safari, or enable WebGPU in the browser\'s settings',
      );
    }
    const bytes = await readSource(source, onProgress, signal);
    if (signal?.aborted) {
      if (bytes instanceof ModelBytes) bytes.free();
      throw abortError('loading the model');
    }
    try {
      const options = { context, backend };
      const engine = bytes instanceof ModelBytes
        ? await Engine.loadModelBytes(bytes, options)
        : await Engine.load(bytes, options);
      return new Runahead(engine);
    } catch (e) {
      throw toRunaheadError(e);
    }
  }

  /**
   * Architecture, sizes, tensor types, special tokens, chat template presence, backend
   * ('webgpu' or 'cpu', with `backendReason` when 'auto' fell back to the CPU), adapter.
   */
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
