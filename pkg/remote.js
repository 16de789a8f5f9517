// The page's side of the worker engine: the same members the page uses of a wasm Engine
// (generate with an onToken callback, cancel, isGenerating, tokenize, free), carried over
// postMessage to pkg/worker.js. Errors arrive as `{code, message}` and become RunaheadErrors.

import { RunaheadError, abortError, deserializeError } from './errors.js';

export class WorkerEngine {
  #worker;
  #pending = new Map(); // id -> {resolve, reject, onMessage}
  #nextId = 1;
  #generating = false;

  constructor() {
    // This exact form lets bundlers (Vite, webpack 5, Rollup plugins) find and bundle the worker.
    this.#worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    this.#worker.onmessage = ({ data }) => {
      const pending = this.#pending.get(data.id);
      if (!pending) return;
      if (data.kind === 'done') {
        this.#pending.delete(data.id);
        pending.resolve(data.value);
      } else if (data.kind === 'error') {
        this.#pending.delete(data.id);
        pending.reject(deserializeError(data.error));
      } else {
        pending.onMessage?.(data);
      }
    };
    // The worker script failed to load or threw outside a request: every request fails.
    this.#worker.onerror = (e) => {
      e.preventDefault?.();
      this.#failAll(new RunaheadError('worker', `the engine's worker failed: ${e.message ?? 'it could not start'}`));
    };
  }

  #failAll(error) {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  #request(op, payload = {}, onMessage, transfer = []) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onMessage });
      try {
        this.#worker.postMessage({ id, op, ...payload }, transfer);
      } catch (e) {
        this.#pending.delete(id);
        // Something in the options cannot be cloned (a function, a DOM node).
        reject(new RunaheadError('invalid_option', `cannot send to the engine's worker: ${e.message}`));
      }
    });
  }

  /**
   * Loads the model (and the `draft` model, when given) in the worker. Aborting `signal` ends
   * the worker at once, whatever phase it is in (download, cache, upload), and rejects with
   * `cancelled`.
   */
  async load(source, options, { draft, onProgress, onEvent, signal }) {
    // Each buffer once (the target and the draft may be the same bytes).
    const transfer = [...new Set([source, draft].filter((s) => s instanceof ArrayBuffer))];
    let stop;
    const aborted = new Promise((_, reject) => {
      stop = () => {
        this.terminate();
        reject(abortError('loading the model'));
      };
    });
    aborted.catch(() => {});
    if (signal?.aborted) stop();
    signal?.addEventListener('abort', stop, { once: true });
    const loading = this.#request('load', { source, draft, options }, (message) => {
      if (message.kind === 'progress') onProgress?.(message.progress);
      else if (message.kind === 'event') onEvent?.(message.event);
    }, transfer);
    try {
      return await Promise.race([loading, aborted]);
    } finally {
      // The signal may be the one the page later passes to generate(): it must not end the
      // loaded engine.
      signal?.removeEventListener('abort', stop);
    }
  }

  /**
   * Runs Runahead.probe in the worker (see probe.js). Aborting `signal` ends the worker and
   * rejects with `cancelled`.
   */
  async probe(source, options, signal) {
    let stop;
    const aborted = new Promise((_, reject) => {
      stop = () => {
        this.terminate();
        reject(abortError('the probe'));
      };
    });
    aborted.catch(() => {});
    if (signal?.aborted) stop();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      return await Promise.race([this.#request('probe', { source, options }), aborted]);
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }

  generate(prompt, options, onToken) {
    if (this.#generating) {
      return Promise.reject(new RunaheadError(
        'busy',
        'a generation is already running: await it or cancel() it first',
      ));
    }
    this.#generating = true;
    return this.#request('generate', { prompt, options }, (message) => {
      if (message.kind === 'token') {
        const { text, token, fromDraft, info } = message.chunk;
        onToken(text, token, fromDraft, info);
      }
    }).finally(() => {
      this.#generating = false;
    });
  }

  cancel() {
    this.#worker.postMessage({ op: 'cancel' });
  }

  get isGenerating() {
    return this.#generating;
  }

  tokenize(text) {
    return this.#request('tokenize', { text });
  }

  clearHistory() {
    return this.#request('clearHistory');
  }

  memoryBytes() {
    return this.#request('memory');
  }

  cpuPool() {
    return this.#request('cpuPool');
  }

  /** Ends the worker: its WebAssembly memory and GPU device go with it. */
  terminate() {
    this.#worker.terminate();
    this.#failAll(new RunaheadError('cancelled', 'the engine was disposed'));
  }
}
