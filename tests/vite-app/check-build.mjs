// After `vite build`: the bundle holds the package's worker as its own chunk and the engine's
// .wasm as an asset, and the worker chunk refers to that .wasm (what a deployed app needs).
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const assets = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'dist/assets');
const files = await readdir(assets);
const wasm = files.filter((f) => f.endsWith('.wasm'));
const workers = files.filter((f) => /^worker-.*\.js$/.test(f));
assert.equal(wasm.length, 1, `one .wasm asset in ${files}`);
assert.equal(workers.length, 1, `one worker chunk in ${files}`);
const worker = await readFile(join(assets, workers[0]), 'utf8');
assert.ok(worker.includes(wasm[0]), `the worker chunk loads ${wasm[0]}`);
const entry = files.filter((f) => /^index-.*\.js$/.test(f));
assert.ok(entry.length === 1, `one entry chunk in ${files}`);
const main = await readFile(join(assets, entry[0]), 'utf8');
assert.ok(main.includes(workers[0]), `the entry starts ${workers[0]}`);
console.log(`vite build: ${entry[0]}, ${workers[0]}, ${wasm[0]}`);
