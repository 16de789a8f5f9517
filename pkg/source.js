// Reading a model's bytes into WebAssembly memory (a ModelBytes), from a URL (through the model
// cache when it may), a File/Blob, or bytes the caller holds. Every path streams: the thread that
// reads holds the model once, in WebAssembly memory, plus one chunk.

import { bindings } from './bindings.js';
import { RunaheadError, abortError, toRunaheadError } from './errors.js';
import { cacheable, describe, entry, metaOf, openModelCache, sameFile } from './cache.js';
import { Sha256 } from './sha256.js';

// Chunks are read into one reused buffer of this size (where the stream is a byte stream, as
// fetch bodies and Blob streams are) and copied from it into WebAssembly memory.
const CHUNK_BYTES = 1 << 20;

// Reads a stream straight into WebAssembly memory (a ModelBytes of `total` bytes, or growing
// when the total is unknown), reporting progress after every chunk. With a byte stream, every
// read fills the same buffer, so the page holds the model once plus one chunk: a default reader
// would hand out a new buffer per chunk, garbage that piles up faster than it is collected.
// Fails (and frees what it wrote) when the stream ends before `total` bytes. With `copy` (a
// CacheCopy), every chunk is also kept for the model cache. With
// `sha256` (hex), the bytes must hash to it.
async function readStream(stream, total, onProgress, signal, { copy, sha256 } = {}) {
  const hash = sha256 ? new Sha256() : null;
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
    bytes = new (bindings().ModelBytes)(total ?? 0);
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
      hash?.update(value);
      copy?.write(value);
      // The read transferred the buffer into `value`: take it back for the next read.
      if (buffer) buffer = value.buffer;
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
    bytes.free();
    throw e;
  }
  return bytes;
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
 * The model's bytes: `{bytes, from}` where `bytes` is a ModelBytes (or a Uint8Array for bytes the
 * caller passed) and `from` is "network", "cache", "file" or "bytes". Options: `cache` (default
 * true), `sha256`, `onProgress`, `onEvent`, `signal`.
 */
export async function readModel(source, options = {}) {
  const { signal } = options;
  if (typeof source === 'string' || source instanceof URL) {
    const url = new URL(source, globalThis.location?.href).href;
    return readUrl(url, options);
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    const bytes = await readStream(
      source.stream(),
      source.size,
      phase(options.onProgress, 'download'),
      signal,
      { sha256: options.sha256 },
    );
    return { bytes, from: 'file' };
  }
  if (source instanceof ArrayBuffer) return { bytes: new Uint8Array(source), from: 'bytes' };
  if (ArrayBuffer.isView(source)) {
    const view = new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return { bytes: view, from: 'bytes' };
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
async function readCached(cache, url, { sha256, signal, onEvent, onProgress }) {
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
    const bytes = await readStream(stored.body, meta.size, phase(onProgress, 'cache'), signal, { sha256 });
    onEvent?.({ type: 'cache_hit', url, size: meta.size });
    return { bytes, from: 'cache' };
  } catch (e) {
    if (signal?.aborted) throw abortError('loading the model');
    await cache.delete(url).catch(() => {});
    onEvent?.({ type: 'cache_fallback', reason: `the cached copy is unreadable (${e.message}): downloading` });
    return null;
  }
}

// GET, streamed into WebAssembly memory and, chunk by chunk, into a Blob for the cache.
async function download(cache, url, { sha256, signal, onEvent, onProgress }) {
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
    if (cache && cacheable(meta)) {
      copy = new CacheCopy(cache, url, meta);
    } else if (cache) {
      onEvent?.({
        type: 'cache_skipped',
        reason: 'the server sent no size and no ETag or Last-Modified (and no sha256 was given): ' +
          'a cached copy could not be told from a changed file',
      });
    }
    let bytes;
    try {
      bytes = await readStream(response.body, meta.size, phase(onProgress, 'download'), stop.signal, {
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
    if (error) {
      const quota = error.name === 'QuotaExceededError';
      onEvent?.({
        type: 'cache_error',
        reason: quota
          ? 'the storage quota is full: the model was not cached'
          : `the model was not cached: ${error.message}`,
      });
    } else if (copy) {
      onEvent?.({ type: 'cache_stored', url, size: meta.size });
    }
    return { bytes, from: 'network' };
  } finally {
    signal?.removeEventListener('abort', forward);
  }
}

/** Forgets a cached copy that turned out not to be a model (the load falls back to the network). */
export async function dropCached(url) {
  const cache = await openModelCache();
  await cache?.delete(new URL(url, globalThis.location?.href).href);
}
