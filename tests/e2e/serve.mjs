// What the page-level tests share: the repository served on a free localhost port, and the
// Chromium flags every browser test uses (crates/gpu/webdriver.json).

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

// python3 -m http.server on a free port; resolves to `{ base, server }` once it listens.
export function serve() {
  return new Promise((resolveServer, reject) => {
    const server = spawn('python3', ['-u', '-m', 'http.server', '0', '--bind', '127.0.0.1', '--directory', root], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    server.on('error', reject);
    server.stdout.on('data', (data) => {
      const port = /port (\d+)/.exec(String(data))?.[1];
      if (port) resolveServer({ base: `http://127.0.0.1:${port}`, server });
    });
  });
}

export async function chromiumFlags() {
  const config = JSON.parse(await readFile(join(root, 'crates/gpu/webdriver.json'), 'utf8'));
  return config['goog:chromeOptions'].args;
}
