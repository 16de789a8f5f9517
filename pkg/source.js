// Reading a model's bytes into the engine, from a URL (through the model cache when it may), a
// File/Blob, or bytes the caller holds. Every path streams chunk by chunk into a ModelStream
// (`open(size)`: Engine.streamModel or engine.streamDraft), which on WebGPU sends each chunk on
// to the GPU buffers it belongs to (the thread that reads never holds the file), and for the CPU
// engine gathers the file in WebAssembly memory, once.

import { RunaheadError, abortError, toRunaheadError } from './errors.js';
import { cacheable, describe, entry, isQuotaError, metaOf, openModelCache, sameFile, storageEstimate } from './cache.js';
import { Sha256 } from './sha256.js';

// Chunks are read into one reused buffer of this size (where the stream is a byte stream, as
// fetch bodies and Blob streams are) and handed from it to the engine.
const CHUNK_BYTES = 1 << 20;

// Reads a stream into the engine (`open(total)`, a ModelStream; `total` undefined when unknown),
// reporting progress after every chunk. Each write is awaited: the engine resolves it once the
// chunk is where it goes, which keeps a fast download from queueing more than the GPU takes.
// With a byte stream, every read fills the same buffer: a default reader would hand out a new
// buffer per chunk, garbage that piles up faster than it is collected. Fails (and frees the
// ModelStream) when the stream ends before `total` bytes. With `copy` (a CacheCopy), every chunk
// is also kept for the model cache. With `sha256` (hex), the bytes must hash to it (before the
// engine is finished with them).
async function readStream(stream, total, open, onProgress, signal, { copy, sha256 } = {}) {
  const hash = sha256 ? new Sha256() : null;
  let reader;
  let buffer = null;
  try {
    reader = stream.getReader({ mode: 'byob' });
    buffer = new ArrayBuffer(CHUNK_BYTES);
  } catch {
    reader = stream.getReader();
  }
  let sink;
  try {
    sink = open(total);
  } catch (e) {
    await reader.cancel();
    throw toRunaheadError(e, 'invalid_option');
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
      // The chunk is copied out of `value` before the write returns its promise.
      const written = sink.write(loaded, value);
      loaded += value.byteLength;
      hash?.update(value);
      copy?.write(value);
      // The read transferred the buffer into `value`: take it back for the next read.
      if (buffer) buffer = value.buffer;
      await written;
      onProgress?.({ loaded, total });
    }
    if (total !== undefined && loaded !== total) {
      throw new RunaheadError('fetch', `the model ended after ${loaded} of its ${total} bytes`);
    }
    const digest = hash?.hex();
    if (hash && digest !== sha256.toLowerCase()) {
      throw new RunaheadError('fetch', `the model's sha256 is ${digest}, not the expected ${sha256}`);
    }
  } catch (e) {
    sink.free();
    throw e;
  }
  return sink;
}

// Bytes the caller holds, handed to the engine in chunks (views: no copy but the engine's own).
async function readBytes(view, open, signal) {
  const sink = open(view.length);
  try {
    for (let at = 0; at < view.length; at += CHUNK_BYTES) {
      if (signal?.aborted) throw abortError('loading the model');
      await sink.write(at, view.subarray(at, at + CHUNK_BYTES));
    }
  } catch (e) {
    sink.free();
    throw e;
  }
  return sink;
}

// The model cache's side of a download: every chunk is copied into a Blob as it arrives (the
// browser keeps Blob bytes outside the JavaScript heap, spilling big ones to disk), and the Blob
// of all of them goes into the cache once the download is whole. Passing copies as ArrayBuffers
// to a stream the cache reads (or a ReadableStream tee) leaves every copy as garbage in the
// loading thread's heap until V8 collects it: 53 to 85 MiB of SmolLM2's 94 measured on the
// page's thread. A failed store (a full quota) is reported, never thrown: the load goes on.
class CacheCopy {
  #cache;
  #url;
  #meta;
  #parts = [];

  constructor(cache, url, meta) {
    this.#cache = cache;
    this.#url = url;
    this.#meta = meta;
  }

  write(chunk) {
    // Blob copies the bytes now: the download's buffer is reused for the next read.
    this.#parts.push(new Blob([chunk]));
  }

  /** Stores the whole file; resolves to null, or to the error that kept it from being stored. */
  async finish() {
    const body = new Blob(this.#parts, { type: 'application/octet-stream' });
    this.#parts = [];
    try {
      await this.#cache.put(this.#url, entry(body, this.#meta));
      return null;
    } catch (e) {
      return e;
    }
  }

  abort() {
    this.#parts = [];
  }
}

const phase = (onProgress, name) => (p) => onProgress?.({ phase: name, ...p });

/**
 * The model read into the engine: `{stream, from}` where `stream` is the ModelStream
 * `options.open(size)` made, every byte written, and `from` is "network", "cache", "file" or
 * "bytes". Options: `open` (required), `cache` (default true), `sha256`, `onProgress`,
 * `onEvent`, `signal`.
 */
export async function readModel(source, options = {}) {
  const { signal, open } = options;
  if (typeof source === 'string' || source instanceof URL) {
    const url = new URL(source, globalThis.location?.href).href;
    return readUrl(url, options);
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    const stream = await readStream(
      source.stream(),
      source.size,
      open,
      phase(options.onProgress, 'download'),
      signal,
      { sha256: options.sha256 },
    );
    return { stream, from: 'file' };
  }
  if (source instanceof ArrayBuffer) {
    return { stream: await readBytes(new Uint8Array(source), open, signal), from: 'bytes' };
  }
  if (ArrayBuffer.isView(source)) {
    const view = new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return { stream: await readBytes(view, open, signal), from: 'bytes' };
  }
  checkSource(source);
}

/** Throws `invalid_source` unless `source` is something `readModel` reads (`what` names it). */
export function checkSource(source, what = 'the model') {
  const readable = typeof source === 'string' || source instanceof URL ||
    (typeof Blob !== 'undefined' && source instanceof Blob) ||
    source instanceof ArrayBuffer || ArrayBuffer.isView(source);
  if (!readable) {
    throw new RunaheadError(
      'invalid_source',
      `load(): ${what} must be a URL, a File or Blob, an ArrayBuffer or a Uint8Array`,
    );
  }
}

async function readUrl(url, options) {
  const { signal, onEvent } = options;
  const cache = options.cache === false ? null : await openModelCache();
  if (cache) {
    const fromCache = await readCached(cache, url, options);
    if (fromCache) return fromCache;
  }
  return download(cache, url, options);
}

// The cached copy when it is still the file the server has; null (after an event saying why,
// where something was wrong with it) to download instead.
async function readCached(cache, url, { sha256, signal, onEvent, onProgress, open }) {
  const stored = await cache.match(url).catch(() => undefined);
  const meta = stored && metaOf(stored);
  if (!meta) return null;
  let usable;
  try {
    const head = await fetch(url, { method: 'HEAD', signal });
    // A server that refuses HEAD: download and compare what the GET says.
    usable = head.ok && sameFile(meta, describe(url, head, sha256));
  } catch (e) {
    if (signal?.aborted) throw abortError('loading the model');
    // Offline: the cached copy is the best there is (unless it is not the sha256 asked for).
    usable = !sha256 || meta.sha256 === sha256.toLowerCase();
    if (usable) {
      onEvent?.({
        type: 'cache_unverified',
        reason: `cannot reach ${url} (${e.message}): using the cached copy unchecked`,
      });
    }
  }
  if (!usable) return null;
  try {
    const stream = await readStream(stored.body, meta.size, open, phase(onProgress, 'cache'), signal, { sha256 });
    onEvent?.({ type: 'cache_hit', url, size: meta.size });
    return { stream, from: 'cache' };
  } catch (e) {
    if (signal?.aborted) throw abortError('loading the model');
    // The engine refused the model (unsupported, too large, no device): not the copy's fault.
    if (typeof e.code === 'string' && e.code !== 'gguf' && e.code !== 'fetch') throw toRunaheadError(e);
    await cache.delete(url).catch(() => {});
    onEvent?.({ type: 'cache_fallback', reason: `the cached copy is unreadable (${e.message}): downloading` });
    return null;
  }
}

// GET, streamed into WebAssembly memory and, chunk by chunk, into a Blob for the cache.
async function download(cache, url, { sha256, signal, onEvent, onProgress, open }) {
  // Its own controller: a failed read must also stop the cache's branch of the tee.
  const stop = new AbortController();
  const forward = () => stop.abort();
  signal?.addEventListener('abort', forward, { once: true });
  try {
    let response;
    try {
      response = await fetch(url, { signal: stop.signal });
    } catch (e) {
      if (signal?.aborted) throw abortError('loading the model');
      throw new RunaheadError('fetch', `cannot fetch ${url}: ${e.message}`, { cause: e });
    }
    if (!response.ok || !response.body) {
      throw new RunaheadError('fetch', `cannot fetch ${url}: HTTP ${response.status}`);
    }
    const meta = describe(url, response, sha256);
    let copy = null;
    const room = cache && cacheable(meta) ? await roomFor(meta.size) : null;
    if (room) {
      onEvent?.({ type: 'cache_skipped', reason: room, quota: true });
    } else if (cache && cacheable(meta)) {
      copy = new CacheCopy(cache, url, meta);
    } else if (cache) {
      onEvent?.({
        type: 'cache_skipped',
        reason: 'the server sent no size and no ETag or Last-Modified (and no sha256 was given): ' +
          'a cached copy could not be told from a changed file',
      });
    }
    let stream;
    try {
      stream = await readStream(response.body, meta.size, open, phase(onProgress, 'download'), stop.signal, {
        copy,
        sha256,
      });
    } catch (e) {
      stop.abort();
      copy?.abort();
      if (signal?.aborted) throw abortError('loading the model');
      throw toRunaheadError(e, 'fetch');
    }
    const error = await copy?.finish();
    if (error && isQuotaError(error)) {
      // The model runs from the downloaded copy; only the cache went without it.
      onEvent?.({
        type: 'cache_skipped',
        reason: `the storage quota is full (${error.message}): the model was not cached`,
        quota: true,
      });
    } else if (error) {
      onEvent?.({ type: 'cache_error', reason: `the model was not cached: ${error.message}` });
    } else if (copy) {
      onEvent?.({ type: 'cache_stored', url, size: meta.size });
    }
    return { stream, from: 'network' };
  } finally {
    signal?.removeEventListener('abort', forward);
  }
}

// Why a model of `size` bytes cannot go into the cache (this origin's storage has less room
// than that left, by the browser's estimate), or null when it may: a copy that would not fit is
// not made at all.
async function roomFor(size) {
  const { usage, quota } = await storageEstimate();
  if (usage === undefined || quota === undefined || quota - usage >= size) return null;
  const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `the model (${MiB(size)}) is larger than the storage left to this origin ` +
    `(${MiB(Math.max(0, quota - usage))} of ${MiB(quota)}): the model was not cached`;
}

/** Forgets a cached copy that turned out not to be a model (the load falls back to the network). */
export async function dropCached(url) {
  const cache = await openModelCache();
  await cache?.delete(new URL(url, globalThis.location?.href).href);
}

// The first bytes of a model, for Runahead.probe: a reader whose `read(n)` resolves to the
// file's first `n` bytes (fewer at its end), fetching only what it has not read yet. `size` is
// the file's size where known, `ended` whether the last read reached the end, `transferred`
// the model bytes read so far (network or cache), `from` where they come from.

// Bytes a probe holds: read as they come, grown to what is asked.
class Prefix {
  bytes = new Uint8Array(0);

  append(chunk) {
    const grown = new Uint8Array(this.bytes.length + chunk.length);
    grown.set(this.bytes);
    grown.set(chunk, this.bytes.length);
    this.bytes = grown;
  }
}

// A stream read until it has given `n` bytes; `close()` cancels the rest (the download of a
// server that ignored the range ends there). A byte stream (fetch bodies, the cache's) is read
// into a buffer of just the bytes still wanted, so no more than `n` are taken from it.
class StreamPrefix extends Prefix {
  #reader;
  #byob = false;
  #stop;

  constructor(stream, { size, from, stop }) {
    super();
    try {
      this.#reader = stream.getReader({ mode: 'byob' });
      this.#byob = true;
    } catch {
      this.#reader = stream.getReader();
    }
    this.#stop = stop;
    this.size = size;
    this.from = from;
    this.ended = false;
    this.transferred = 0;
  }

  async read(n) {
    while (this.bytes.length < n && !this.ended) {
      const want = Math.min(n - this.bytes.length, 1 << 20);
      const { done, value } = this.#byob
        ? await this.#reader.read(new Uint8Array(want))
        : await this.#reader.read();
      if (done) {
        this.ended = true;
        this.size ??= this.bytes.length;
      } else {
        this.append(value);
        this.transferred += value.length;
      }
    }
    return this.bytes.subarray(0, Math.min(n, this.bytes.length));
  }

  close() {
    this.#reader.cancel().catch(() => {});
    this.#stop?.();
  }
}

// A URL read by HTTP Range requests (`bytes=have-(n-1)`), each asking only for bytes it has
// not read; a server that answers a range with the whole file (200) is read as a stream and
// cut off once the header is read.
class RangePrefix extends Prefix {
  #url;
  #signal;
  #stream = null;

  constructor(url, signal) {
    super();
    this.#url = url;
    this.#signal = signal;
    this.size = undefined;
    this.from = 'network';
    this.ended = false;
    this.transferred = 0;
    this.requests = 0;
  }

  async #fromStream(n) {
    const out = await this.#stream.read(n);
    this.size = this.#stream.size;
    this.ended = this.#stream.ended;
    this.transferred = this.#stream.transferred;
    return out;
  }

  async read(n) {
    if (this.#stream) return this.#fromStream(n);
    const end = this.size === undefined ? n : Math.min(n, this.size);
    if (this.bytes.length >= end) {
      this.ended = this.size !== undefined && this.bytes.length >= this.size;
      return this.bytes.subarray(0, end);
    }
    const stop = new AbortController();
    const forward = () => stop.abort();
    this.#signal?.addEventListener('abort', forward, { once: true });
    let response;
    try {
      response = await fetch(this.#url, {
        headers: { range: `bytes=${this.bytes.length}-${end - 1}` },
        signal: stop.signal,
      });
    } catch (e) {
      this.#signal?.removeEventListener('abort', forward);
      if (this.#signal?.aborted) throw abortError('the probe');
      throw new RunaheadError('fetch', `cannot fetch ${this.#url}: ${e.message}`, { cause: e });
    }
    this.requests += 1;
    const range = /^bytes (?:(\d+)-\d+|\*)\/(\d+|\*)\s*$/.exec(response.headers.get('content-range') ?? '');
    if (range && range[2] !== '*') this.size = Number(range[2]);
    if (response.status === 206 && range?.[1] !== undefined && Number(range[1]) !== this.bytes.length) {
      this.#signal?.removeEventListener('abort', forward);
      stop.abort();
      throw new RunaheadError('fetch', `cannot fetch ${this.#url}: asked for bytes from ${this.bytes.length}, ` +
        `the server sent ${response.headers.get('content-range')}`);
    }
    if (response.status === 416) {
      // Nothing at or past the first byte asked for: the file ends there.
      this.#signal?.removeEventListener('abort', forward);
      this.ended = true;
      this.size ??= this.bytes.length;
      return this.bytes;
    }
    if (response.status === 200 && response.body) {
      // The server ignores ranges: the whole file comes; read what is needed, then cut it off.
      this.#stream = new StreamPrefix(response.body, {
        size: describe(this.#url, response).size,
        from: 'network',
        stop: () => {
          stop.abort();
          this.#signal?.removeEventListener('abort', forward);
        },
      });
      this.#stream.transferred = this.transferred;
      return this.#fromStream(n);
    }
    this.#signal?.removeEventListener('abort', forward);
    if (response.status !== 206 || !response.body) {
      throw new RunaheadError('fetch', `cannot fetch ${this.#url}: HTTP ${response.status}`);
    }
    const asked = end - this.bytes.length;
    const chunk = new Uint8Array(await response.arrayBuffer());
    this.append(chunk);
    this.transferred += chunk.length;
    // A range shorter than asked for (and no size said) means the file ends there.
    if (chunk.length < asked) {
      this.ended = true;
      this.size ??= this.bytes.length;
    }
    this.ended ||= this.size !== undefined && this.bytes.length >= this.size;
    return this.bytes.subarray(0, Math.min(n, this.bytes.length));
  }

  close() {
    this.#stream?.close();
  }
}

// A Blob (File) read by slices; bytes the caller holds, as they are.
class BlobPrefix extends Prefix {
  #blob;

  constructor(blob, from) {
    super();
    this.#blob = blob;
    this.size = blob.size;
    this.from = from;
    this.ended = false;
    this.transferred = 0;
  }

  async read(n) {
    const end = Math.min(n, this.size);
    if (end > this.bytes.length) {
      const chunk = new Uint8Array(await this.#blob.slice(this.bytes.length, end).arrayBuffer());
      this.append(chunk);
      this.transferred += chunk.length;
    }
    this.ended = this.bytes.length >= this.size;
    return this.bytes.subarray(0, end);
  }

  close() {}
}

class BytesPrefix {
  constructor(bytes, size) {
    this.bytes = bytes;
    this.size = size;
    this.from = 'bytes';
    this.ended = false;
    this.transferred = 0;
  }

  async read(n) {
    if (n > this.bytes.length && this.bytes.length < this.size) {
      throw new RunaheadError(
        'invalid_source',
        `probe(): the model's header is longer than the ${this.bytes.length} bytes sent to the ` +
          "engine's thread: probe the File or URL, or pass `worker: false`",
      );
    }
    this.ended = n >= this.size;
    this.transferred = Math.min(n, this.bytes.length);
    return this.bytes.subarray(0, Math.min(n, this.bytes.length));
  }

  close() {}
}

/**
 * A reader of the first bytes of `source` (see the classes above). A URL is read from the model
 * cache when it holds the file the server has (as `load` would read it), else by range
 * requests. `{bytes, size}` (what the package sends a worker for bytes the page holds: a copy
 * of their first part) reads `bytes` as the first part of a file of `size` bytes.
 */
export async function openPrefix(source, { cache: useCache, signal } = {}) {
  if (typeof source === 'string' || source instanceof URL) {
    const url = new URL(source, globalThis.location?.href).href;
    const cache = useCache === false ? null : await openModelCache();
    const stored = cache && (await cache.match(url).catch(() => undefined));
    const meta = stored && metaOf(stored);
    if (meta && stored.body) {
      let usable;
      try {
        const head = await fetch(url, { method: 'HEAD', signal });
        usable = head.ok && sameFile(meta, describe(url, head));
      } catch {
        if (signal?.aborted) throw abortError('the probe');
        usable = true; // offline: the cached copy is what a load would read
      }
      if (usable) return new StreamPrefix(stored.body, { size: meta.size, from: 'cache' });
      stored.body.cancel().catch(() => {});
    }
    return new RangePrefix(url, signal);
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) return new BlobPrefix(source, 'file');
  if (source instanceof ArrayBuffer) return new BytesPrefix(new Uint8Array(source), source.byteLength);
  if (ArrayBuffer.isView(source)) {
    const view = new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return new BytesPrefix(view, view.length);
  }
  if (source?.bytes instanceof ArrayBuffer && typeof source.size === 'number') {
    return new BytesPrefix(new Uint8Array(source.bytes), source.size);
  }
  checkSource(source);
}
