// A thread of the CPU engine's pool (the threaded build, started by bindings.js's startPool): it
// instantiates the engine thread's module on that thread's shared memory, says so, and joins
// the engine's parallel steps for good (runPoolWorker returns only when the pool is full).

import init, { runPoolWorker } from './wasm-threads/runahead.js';

self.onmessage = async ({ data: { module, memory } }) => {
  await init({ module_or_path: module, memory });
  self.postMessage('started');
  runPoolWorker();
  self.close();
};
