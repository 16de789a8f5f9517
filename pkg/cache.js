// The model cache: a model read from a URL is kept in the Cache API under its URL, with what the
// server said about the file (size, ETag, Last-Modified) or the sha256 the caller gave. A later
// load asks the server for those headers (HEAD: no model byte) and reads the cached bytes only
// when they still describe the same file. The Cache API is shared by the page and its workers,
// so `Runahead.cache` and the worker engine see the same entries.

const CACHE_NAME = 'runahead-models-v1';
// The entry's description, stored as a response header (JSON).
const META_HEADER = 'x-runahead-model';

/** The cache, or null where the Cache API is missing (insecure origins) or refused. */
export async function openModelCache() {
  if (typeof caches === 'undefined') return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;
  }
}

/** What identifies a version of the file: from a response's headers (HEAD or GET). */
export function describe(url, response, sha256) {
  const length = Number(response.headers.get('content-length'));
  const compressed = response.headers.get('content-encoding');
  return {
    url,
    size: length > 0 && !compressed ? length : undefined,
    etag: response.headers.get('etag') ?? undefined,
    lastModified: response.headers.get('last-modified') ?? undefined,
    sha256: sha256?.toLowerCase(),
  };
}

/** Whether an entry may be kept at all: its size and something that tells versions apart. */
export function cacheable(meta) {
  return meta.size !== undefined && Boolean(meta.sha256 || meta.etag || meta.lastModified);
}

/**
 * Whether the stored entry `stored` is the file `remote` describes: same size, and the same
 * sha256 when the caller gave one, else the same ETag, else the same Last-Modified.
 */
export function sameFile(stored, remote) {
  if (!stored || stored.size !== remote.size) return false;
  if (remote.sha256) return stored.sha256 === remote.sha256;
  if (remote.etag) return stored.etag === remote.etag;
  if (remote.lastModified) return stored.lastModified === remote.lastModified;
  return false;
}

export function metaOf(response) {
  try {
    return JSON.parse(response.headers.get(META_HEADER));
  } catch {
    return null;
  }
}

/** A response to store: `body` (a stream) with the description in a header. */
export function entry(body, meta) {
  return new Response(body, {
    headers: {
      'content-type': 'application/octet-stream',
      [META_HEADER]: JSON.stringify({ ...meta, storedAt: new Date().toISOString() }),
    },
  });
}

function absolute(url) {
  return new URL(url, globalThis.location?.href).href;
}

/**
 * `navigator.storage.estimate()` where the browser has it: `{usage, quota}` in bytes for this
 * origin (the browser's estimate, which may round or pad), else `{}`.
 */
export async function storageEstimate() {
  const storage = globalThis.navigator?.storage;
  if (typeof storage?.estimate !== 'function') return {};
  try {
    const { usage, quota } = await storage.estimate();
    return { usage, quota };
  } catch {
    return {};
  }
}

/** Whether an error from a cache write is the storage quota's. */
export function isQuotaError(e) {
  return e?.name === 'QuotaExceededError' || e?.code === 22;
}

/** `Runahead.cache`: what the model cache holds, removing it, and this origin's storage. */
export const modelCache = {
  /** Every cached model: `{url, size, etag?, lastModified?, sha256?, storedAt}`. */
  async list() {
    const cache = await openModelCache();
    if (!cache) return [];
    const out = [];
    for (const request of await cache.keys()) {
      const response = await cache.match(request);
      const meta = response && metaOf(response);
      if (meta) out.push({ ...meta, url: request.url });
    }
    return out;
  },
  /** Removes the model cached for `url`; resolves to whether there was one. */
  async delete(url) {
    const cache = await openModelCache();
    return cache ? cache.delete(absolute(url)) : false;
  },
  /** Removes every cached model; resolves to whether there was a cache. */
  async clear() {
    if (typeof caches === 'undefined') return false;
    return caches.delete(CACHE_NAME);
  },
  /**
   * This origin's storage: `{usage, quota, available}` (bytes, from `navigator.storage.estimate()`,
   * absent where the browser does not say), `models` (bytes of the cached models, as `list()`
   * gives them) and `persisted` (whether the browser keeps this origin's storage under storage
   * pressure: see `persist()`).
   */
  async estimate() {
    const { usage, quota } = await storageEstimate();
    const models = (await modelCache.list()).reduce((n, m) => n + (m.size ?? 0), 0);
    const out = { models, persisted: await modelCache.persisted() };
    if (usage !== undefined) out.usage = usage;
    if (quota !== undefined) out.quota = quota;
    if (usage !== undefined && quota !== undefined) out.available = Math.max(0, quota - usage);
    return out;
  },
  /**
   * Asks the browser to keep this origin's storage (the cached models among it) when space runs
   * low (`navigator.storage.persist()`: the browser may ask the user, or decide by itself);
   * resolves to whether the storage is persistent now.
   */
  async persist() {
    const storage = globalThis.navigator?.storage;
    if (typeof storage?.persist !== 'function') return false;
    try {
      return await storage.persist();
    } catch {
      return false;
    }
  },
  /** Whether this origin's storage is persistent (`navigator.storage.persisted()`). */
  async persisted() {
    const storage = globalThis.navigator?.storage;
    if (typeof storage?.persisted !== 'function') return false;
    try {
      return await storage.persisted();
    } catch {
      return false;
    }
  },
};
