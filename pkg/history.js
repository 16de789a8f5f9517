// The suffix drafter's memory of earlier answers, kept per origin across visits: one file per
// model in the origin private file system (OPFS), named by the engine's `historyKey` (its
// tokenizer's fingerprint, so two models never read each other's), holding the versioned,
// checksummed record `exportHistory()` writes (bounded by the `historyTokens` load option).
// Runs in the thread that holds the engine (the worker, or the page with `worker: false`).
// Nothing here fails a load or a generation: an unreadable record is deleted with a
// `history_discarded` event; a failed write is reported by a warning in the console.

const DIR = 'runahead-history';

function available() {
  return typeof navigator !== 'undefined' && typeof navigator.storage?.getDirectory === 'function';
}

async function directory() {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(DIR, { create: true });
}

const fileName = (key) => `${key}.bin`;

/** Reads this model's record into the engine; events say what happened. */
async function restore(engine, onEvent) {
  if (!available()) {
    onEvent?.({ type: 'history_unavailable', reason: 'this browser has no origin private file system' });
    return;
  }
  let bytes;
  try {
    const handle = await (await directory()).getFileHandle(fileName(engine.historyKey));
    bytes = new Uint8Array(await (await handle.getFile()).arrayBuffer());
  } catch (e) {
    if (e?.name === 'NotFoundError') return; // a first visit
    onEvent?.({ type: 'history_discarded', reason: `cannot read the stored history: ${e?.message ?? e}` });
    await remove(engine.historyKey);
    return;
  }
  try {
    const outputs = engine.importHistory(bytes);
    onEvent?.({ type: 'history_restored', outputs, bytes: bytes.byteLength });
  } catch (e) {
    await remove(engine.historyKey);
    onEvent?.({ type: 'history_discarded', reason: e?.message ?? String(e) });
  }
}

/** Deletes the record stored under `key` (no error when there is none). */
async function remove(key) {
  if (!available()) return;
  try {
    await (await directory()).removeEntry(fileName(key));
  } catch (e) {
    if (e?.name !== 'NotFoundError') console.warn(`runahead: cannot delete the stored history: ${e?.message ?? e}`);
  }
}

/**
 * Restores the engine's stored history, then saves it after every generation that ends (in
 * order: each save waits for the one before), before that generation's promise resolves: when
 * a page sees an answer, the answer is stored (a reload right after it loses nothing).
 * Returns `clear()`, which forgets the history in the engine and on disk.
 */
export async function keepHistory(engine, onEvent) {
  await restore(engine, onEvent);
  let saving = Promise.resolve();
  const save = () => {
    let bytes;
    try {
      bytes = engine.exportHistory();
    } catch {
      return saving; // another generation already holds the engine: it saves when it ends
    }
    saving = saving.then(async () => {
      try {
        const handle = await (await directory()).getFileHandle(fileName(engine.historyKey), { create: true });
        const writable = await handle.createWritable();
        await writable.write(bytes);
        await writable.close();
      } catch (e) {
        console.warn(`runahead: cannot store the history of earlier answers: ${e?.message ?? e}`);
      }
    });
    return saving;
  };
  const generate = engine.generate.bind(engine);
  // Every generation the engine runs, whoever calls it, ends with a save.
  engine.generate = async (...args) => {
    const result = await generate(...args);
    await save();
    return result;
  };
  return async () => {
    engine.clearHistory();
    await saving;
    await remove(engine.historyKey);
  };
}
