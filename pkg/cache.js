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

/** `Runahead.cache`: what the model cache holds, and removing it. */
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
};
