// After `vite build`: the bundle holds the package's worker and the CPU pool's worker as their
// own chunks and both engine builds' .wasm as assets, each in its plain and its relaxed SIMD form
// (the single-threaded build, and the threaded one whose glue creates a shared memory); the
// worker chunk loads the single-threaded .wasm, names both relaxed ones (it picks them where the
// browser validates relaxed SIMD), reaches the threaded glue and starts the pool worker, which
// loads the threaded .wasm (what a deployed app needs).
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const assets = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'dist/assets');
const files = await readdir(assets);
const read = (f) => readFile(join(assets, f), 'utf8');
const one = (pattern, what) => {
  const found = files.filter((f) => pattern.test(f));
  assert.equal(found.length, 1, `one ${what} in ${files}`);
  return found[0];
};
const wasm = files.filter((f) => /^runahead_bg-.*\.wasm$/.test(f));
const relaxed = files.filter((f) => /^runahead_relaxed_bg-.*\.wasm$/.test(f));
assert.equal(wasm.length, 2, `two plain .wasm assets (single-threaded, threaded) in ${files}`);
assert.equal(relaxed.length, 2, `two relaxed SIMD .wasm assets in ${files}`);
assert.equal(files.filter((f) => f.endsWith('.wasm')).length, 4, `four .wasm assets in ${files}`);
const worker = one(/^worker-.*\.js$/, 'worker chunk');
const poolWorker = one(/^pool-worker-.*\.js$/, 'pool worker chunk');
const entry = one(/^index-.*\.js$/, 'entry chunk');

// The threaded .wasm is the one the pool worker's glue (a shared memory) loads.
const pool = await read(poolWorker);
assert.match(pool, /shared:\s*(!0|true)/, 'the pool worker instantiates a shared memory');
const threaded = wasm.find((w) => pool.includes(w));
assert.ok(threaded, `the pool worker loads one of ${wasm}`);
const single = wasm.find((w) => w !== threaded);

const workerCode = await read(worker);
assert.ok(workerCode.includes(single), `the worker chunk loads ${single}`);
assert.ok(workerCode.includes(poolWorker), `the worker chunk starts ${poolWorker}`);
for (const r of relaxed) assert.ok(workerCode.includes(r), `the worker chunk names ${r}`);
const threadedGlue = files.filter((f) => f.endsWith('.js') && workerCode.includes(f) && f !== poolWorker);
const glues = await Promise.all(threadedGlue.map(read));
assert.ok(glues.some((g) => g.includes(threaded)), `the worker chunk reaches the glue of ${threaded}`);
const main = await read(entry);
assert.ok(main.includes(worker), `the entry starts ${worker}`);
console.log(`vite build: ${entry}, ${worker}, ${poolWorker}, ${single}, ${threaded} (threaded), ${relaxed}`);
