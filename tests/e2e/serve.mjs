// What the page-level tests share: the repository served on a free localhost port (a small
// static server in this process, so a test can count the bytes it sent for a path), and the
// Chromium flags every browser test uses (crates/gpu/webdriver.json).

import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.md': 'text/plain; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/**
 * Serves `dir` (default: the repository) on 127.0.0.1, and `/models/` from the repository's
 * models/ whatever `dir` is; resolves to `{ base, server }` once it
 * listens. `server.bytesSent(path)` is the body bytes sent for a URL path so far, and
 * `server.requests(path)` the requests for it (`[method, ...]`); `server.kill()` stops it.
 * Sends Content-Length and Last-Modified (what the model cache keys on), answers HEAD.
 * `headers` go with every file (e.g. COOP/COEP for a cross-origin isolated page).
 */
export function serve(dir = root, { headers = {} } = {}) {
  const sent = new Map();
  const requests = new Map();
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    requests.set(path, [...(requests.get(path) ?? []), req.method]);
    const base = path.startsWith('/models/') ? root : dir;
    let file = resolve(base, `.${path}`);
    if (file !== base && !file.startsWith(base + sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      let info = await stat(file);
      if (info.isDirectory()) {
        file = join(file, 'index.html');
        info = await stat(file);
      }
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'content-length': info.size,
        'last-modified': info.mtime.toUTCString(),
        'cache-control': 'no-cache',
        ...headers,
      });
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      const stream = createReadStream(file);
      stream.on('data', (chunk) => sent.set(path, (sent.get(path) ?? 0) + chunk.length));
      stream.pipe(res);
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    }
  });
  server.bytesSent = (path) => sent.get(path) ?? 0;
  server.requests = (path) => requests.get(path) ?? [];
  server.kill = () => {
    server.closeAllConnections?.();
    server.close();
  };
  return new Promise((resolveServer, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolveServer({ base: `http://127.0.0.1:${server.address().port}`, server });
    });
  });
}

export async function chromiumFlags() {
  const config = JSON.parse(await readFile(join(root, 'crates/gpu/webdriver.json'), 'utf8'));
  return config['goog:chromeOptions'].args;
}

/** The flags every browser test uses, minus the ones that switch WebGPU on: a browser where the
 * package must fall back to the CPU engine. */
export async function chromiumFlagsWithoutWebGpu() {
  const webgpu = /webgpu|vulkan|swiftshader/i;
  return (await chromiumFlags()).filter((flag) => !webgpu.test(flag));
}
