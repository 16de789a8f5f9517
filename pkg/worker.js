// The dedicated module worker that runs the engine (Runahead.load's default): the model's bytes
// are read here, the WebAssembly instance and the WebGPU device live here, and the page only
// receives messages. Protocol (remote.js is the other side): requests `{id, op, ...}`; replies
// `{id, kind: 'progress' | 'event' | 'token' | 'done' | 'error', ...}`.

import { loadEngine, wasmMemoryBytes } from './core.js';
import { bindings } from './bindings.js';
import { probeHere } from './probe.js';
import { serializeError } from './errors.js';

let engine = null;
let clearHistory = null;

const post = (message) => self.postMessage(message);

const ops = {
  async load(id, { source, draft, options }) {
    if (engine) throw new Error('this worker already holds a model');
    const loaded = await loadEngine(source, {
      ...options,
      draft,
      onProgress: (progress) => post({ id, kind: 'progress', progress }),
      onEvent: (event) => post({ id, kind: 'event', event }),
    });
    engine = loaded.engine;
    clearHistory = loaded.clearHistory;
    return { info: loaded.info, from: loaded.from };
  },
  // Runahead.probe: a worker of its own, ended once it answers.
  probe(_id, { source, options }) {
    return probeHere(source, options);
  },
  generate(id, { prompt, options }) {
    return engine.generate(prompt, options, (text, token, fromDraft, info) => {
      post({ id, kind: 'token', chunk: { text, token, fromDraft, info } });
    });
  },
  cancel() {
    engine?.cancel();
  },
  clearHistory() {
    return clearHistory();
  },
  tokenize(_id, { text }) {
    return Array.from(engine.tokenize(text));
  },
  memory() {
    return wasmMemoryBytes();
  },
  cpuPool() {
    return bindings().cpuPoolStats();
  },
};

self.onmessage = async ({ data }) => {
  const { id, op } = data;
  try {
    const value = await ops[op](id, data);
    if (id !== undefined) post({ id, kind: 'done', value });
  } catch (e) {
    if (id !== undefined) post({ id, kind: 'error', error: serializeError(e) });
  }
};
