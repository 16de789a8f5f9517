// Runahead.probe on the thread that runs it (a worker by default, like the engine): reads the
// model's first bytes (source.js: HTTP Range requests, the model cache, a Blob slice, bytes)
// until the engine's own parser has the whole header (crates/web/src/probe.rs: probeHeader),
// then adds what this browser offers (the WebGPU adapter and its limits, the backend `auto`
// would choose, by the loader's rule: probeBackend) and whether the model fits, and why not.

import { bindings } from './bindings.js';
import { initialize } from './core.js';
import { RunaheadError, abortError, toRunaheadError } from './errors.js';
import { openPrefix } from './source.js';

// The first read: most small models' headers, and little past a larger one's start.
const FIRST_BYTES = 64 << 10;
// A later read asks for as much as it has read, up to this: what a probe may read past the
// header's end is at most one such step.
const MAX_STEP = 1 << 20;
// The wasm32 memory the CPU engine's WebAssembly build may grow to (scripts/wasm.sh links it
// with --max-memory=4294967296): the file, its KV cache and the parsed header live in it.
export const WASM_MEMORY_LIMIT = 2 ** 32;
// A GPU kernel addresses a weight piece with u32 byte offsets: a piece stays below 2 GiB
// (crates/gpu/src/tensor.rs), whatever the adapter allows.
const PIECE_LIMIT = 2 ** 31;

const MiB = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;

/** The WebGPU adapter this thread gets, as the engine asks for it, or why there is none. */
async function adapterInfo() {
  const gpu = globalThis.navigator?.gpu;
  if (!gpu) return { adapter: null, reason: 'WebGPU is missing (navigator.gpu is undefined)' };
  let adapter;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return { adapter: null, reason: `no WebGPU adapter: ${e.message}` };
  }
  if (!adapter) return { adapter: null, reason: 'no WebGPU adapter' };
  const info = adapter.info ?? {};
  return {
    adapter: {
      vendor: info.vendor ?? '',
      architecture: info.architecture ?? '',
      device: info.device ?? '',
      description: info.description ?? '',
      isFallbackAdapter: Boolean(adapter.isFallbackAdapter ?? info.isFallbackAdapter),
      limits: {
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxBufferSize: adapter.limits.maxBufferSize,
        maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage,
      },
    },
  };
}

// Whether the GPU engine can hold the model on `adapter`, by the engine's own limits: a weight
// matrix is split by rows across bindings (one row must fit one), while one layer's KV cache
// and the logits are one binding each.
function gpuFit(probe, adapter, adapterReason, budget) {
  const shape = probe.shape;
  const need = (probe.weightsBytes ?? probe.tensorBytes) + (shape?.kvCacheBytes ?? 0);
  const out = (fits, reason) => ({ fits, ...(reason ? { reason } : {}), needBytes: need });
  if (!adapter) return out(false, adapterReason);
  const { maxStorageBufferBindingSize: binding, maxBufferSize: buffer } = adapter.limits;
  const limit = Math.min(binding, buffer);
  const which = binding <= buffer ? 'maxStorageBufferBindingSize' : 'maxBufferSize';
  if (probe.maxRowBytes + 3 > Math.min(limit, PIECE_LIMIT)) {
    return out(false, `a tensor's row of ${probe.maxRowBytes} bytes does not fit one storage binding ` +
      `(${which} ${limit}): a matrix is split by rows, not within one`);
  }
  if (shape && shape.kvCacheLayerBytes > limit) {
    return out(false, `one layer's KV cache at ${shape.context} tokens (${MiB(shape.kvCacheLayerBytes)}) ` +
      `is past ${which} (${MiB(limit)}): ask for a smaller context`);
  }
  if (shape && shape.logitsBytes > limit) {
    return out(false, `the logits buffer (${MiB(shape.logitsBytes)}) is past ${which} (${MiB(limit)})`);
  }
  if (budget !== undefined && need > budget) {
    return out(false, `the weights (${MiB(probe.weightsBytes ?? probe.tensorBytes)}) and the KV cache ` +
      `(${MiB(shape?.kvCacheBytes ?? 0)}) need ${MiB(need)}, more than the budget of ${MiB(budget)}`);
  }
  return out(true);
}

// Whether the CPU engine in this page can hold the model: it keeps the whole file, its KV cache
// and the parsed header in WebAssembly memory, which a wasm32 module grows to 4 GiB at most.
function cpuFit(probe, fileSize, budget) {
  const kv = probe.shape?.kvCacheBytes ?? 0;
  const need = fileSize + kv + probe.headerMemory;
  const out = (fits, reason) => ({ fits, ...(reason ? { reason } : {}), needBytes: need });
  if (need > WASM_MEMORY_LIMIT) {
    return out(false, `the CPU engine in the page keeps the file (${MiB(fileSize)}), its KV cache ` +
      `(${MiB(kv)}) and header in WebAssembly memory: ${MiB(need)}, past its 4 GiB limit`);
  }
  if (budget !== undefined && need > budget) {
    return out(false, `the CPU engine needs ${MiB(need)} of WebAssembly memory, more than the budget of ${MiB(budget)}`);
  }
  return out(true);
}

function checkBudget(budget) {
  if (budget !== undefined && !(Number.isFinite(budget) && budget >= 0)) {
    throw new RunaheadError('invalid_option', `memoryBudget must be a number of bytes (got ${budget})`);
  }
}

/**
 * Probes `source` on this thread. Options: `context`, `backend` ('auto', 'webgpu', 'cpu'),
 * `memoryBudget` (bytes the model may take), `cache`, `signal`, `wasmUrl`. See index.js.
 */
export async function probeHere(source, options = {}) {
  const { context, backend = 'auto', memoryBudget, signal } = options;
  if (!['auto', 'webgpu', 'cpu'].includes(backend)) {
    throw new RunaheadError('invalid_option', `backend must be 'auto', 'webgpu' or 'cpu' (got ${backend})`);
  }
  checkBudget(memoryBudget);
  await initialize(options.wasmUrl);
  if (signal?.aborted) throw abortError('the probe');
  const { probeHeader, probeBackend } = bindings();
  const reader = await openPrefix(source, options);
  let probe;
  try {
    let want = FIRST_BYTES;
    for (;;) {
      const bytes = await reader.read(want);
      if (signal?.aborted) throw abortError('the probe');
      const size = reader.size ?? (reader.ended ? bytes.length : undefined);
      try {
        probe = probeHeader(bytes, size, context);
      } catch (e) {
        throw toRunaheadError(e);
      }
      if (probe.complete) break;
      want = Math.max(probe.needBytes, bytes.length + Math.min(bytes.length, MAX_STEP));
      if (size !== undefined) want = Math.min(want, size);
    }
  } finally {
    reader.close();
  }
  const { complete, ...described } = probe;
  const fileSize = reader.size ?? described.dataEnd;
  const { adapter, reason: adapterReason } = await adapterInfo();
  let choice;
  if (backend === 'auto') {
    try {
      choice = await probeBackend();
    } catch (e) {
      throw toRunaheadError(e);
    }
  } else {
    choice = { backend };
  }
  const engines = {
    webgpu: gpuFit(described, adapter, adapterReason, memoryBudget),
    cpu: cpuFit(described, fileSize, memoryBudget),
  };
  const engine = engines[choice.backend];
  const fits = described.supported && engine.fits;
  return {
    ...described,
    fileSize,
    from: reader.from,
    transferredBytes: reader.transferred,
    ...(reader.requests !== undefined ? { rangeRequests: reader.requests } : {}),
    adapter,
    ...(adapter ? {} : { adapterReason }),
    backend: choice.backend,
    ...(choice.reason ? { backendReason: choice.reason } : {}),
    engines,
    fits,
    ...(fits ? {} : { fitsReason: described.supported ? engine.reason : described.reason }),
  };
}
