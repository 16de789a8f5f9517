// The model card: load a GGUF (URL or local file, optionally with a draft model) through
// `Runahead.load`, showing each load phase, where the bytes came from (network, the model
// cache, a file), the backend (GPU adapter or why the CPU engine) and the load's events. Before
// the download, `Runahead.probe` reads the file's header: what it says is the first event, and a
// model the engines cannot run, or that does not fit here, is not downloaded.

import { Runahead } from '../pkg/index.js';
import { $, megabytes } from './ui.js';

const PHASE_TEXT = {
  compile: () => 'Compiling the WebAssembly engine…',
  download: (p) => `Downloading ${megabytes(p.loaded)}${p.total ? ` of ${megabytes(p.total)}` : ''}`,
  cache: (p) => `Reading from the model cache: ${megabytes(p.loaded)}${p.total ? ` of ${megabytes(p.total)}` : ''}`,
  upload: (p) => (p.loaded === 0 ? 'Parsing the model and loading the weights…' : 'Weights loaded'),
};

const SOURCE_TEXT = {
  network: 'downloaded',
  cache: 'from the model cache',
  file: 'local file',
  bytes: 'bytes',
};

function describeEvent(event) {
  switch (event.type) {
    case 'cache_hit': return `read from the model cache (${megabytes(event.size)}, no download)`;
    case 'cache_stored': return `stored in the model cache (${megabytes(event.size)}): a reload will not download it`;
    case 'history_restored': return `${event.outputs} earlier answers restored for the suffix drafter`;
    default: return `${event.type.replace(/_/g, ' ')}${event.reason ? `: ${event.reason}` : ''}`;
  }
}

export function setModelStatus(state, text) {
  const status = $('model-status');
  status.dataset.state = state;
  status.textContent = text;
}

function showPhase(progress) {
  for (const span of $('phases').children) {
    const order = ['compile', 'download', 'cache', 'upload'];
    const mine = order.indexOf(span.dataset.phase);
    const now = order.indexOf(progress.phase);
    span.className = mine === now ? 'active' : mine < now ? 'past' : '';
  }
  const bar = $('progress');
  if (progress.total) bar.value = progress.loaded / progress.total;
  else bar.removeAttribute('value');
  // A draft model (the `draft` load option) is read and uploaded after the target.
  const which = progress.model === 'draft' ? 'Draft model: ' : '';
  setModelStatus('loading', which + (PHASE_TEXT[progress.phase]?.(progress) ?? progress.phase));
}

function fact(name, value, title) {
  const row = document.createElement('div');
  const dt = document.createElement('dt');
  const dd = document.createElement('dd');
  dt.textContent = name;
  dd.textContent = value;
  if (title) dd.title = title;
  row.append(dt, dd);
  return row;
}

function badge(id, text, kind) {
  const el = $(id);
  el.textContent = text;
  el.dataset.kind = kind;
  el.hidden = false;
}

function showModel(model) {
  const info = model.info();
  const params = (info.parameters / 1e6).toFixed(0);
  const types = Object.entries(info.tensorTypes).map(([type, count]) => `${count} × ${type}`).join(', ');
  const backend = info.backend === 'cpu'
    ? `${info.adapter}${info.backendReason ? ` (${info.backendReason})` : ''}` +
      `${info.threadsReason ? `; ${info.threadsReason}` : ''}`
    : `GPU: ${info.adapter}`;
  // The summary line keeps the shape the e2e test reads: "name: arch, N parameters, ...".
  setModelStatus('ready', `${info.name ?? info.architecture}: ${info.architecture}, ${params}M parameters, ` +
    `${info.layers} layers, vocabulary ${info.vocab}, context ${info.context}`);
  const facts = $('model-facts');
  facts.replaceChildren(
    fact('engine', backend),
    fact('weights', types),
    fact('chat template', info.chatTemplate ? 'yes' : 'no'),
    fact('loaded', `${SOURCE_TEXT[model.loadedFrom] ?? model.loadedFrom}${model.inWorker ? ', in a worker' : ', on the page'}`),
  );
  if (info.draft) {
    const draft = info.draft;
    facts.append(fact('draft model', `${draft.name ?? draft.architecture}: ${(draft.parameters / 1e6).toFixed(0)}M parameters, ${draft.layers} layers`));
  }
  facts.hidden = false;
  badge('backend-badge', info.backend === 'cpu' ? 'CPU engine' : 'WebGPU', info.backend);
  $('backend-badge').title = backend;
  badge('source-badge', SOURCE_TEXT[model.loadedFrom] ?? model.loadedFrom, model.loadedFrom);
}

// The draft model: a URL field or a file, passed to load as `draft` when given. The drafter
// `model` is offered only when the loaded model reports one (`info().draft`): a package
// without draft-model support ignores the option, and the page says so.
function draftSource() {
  const file = $('draft-file').files[0];
  if (file) return file;
  const url = $('draft-url').value.trim();
  return url ? new URL(url, location.href) : undefined;
}

function showDraftSupport(info, asked) {
  const option = $('draft').querySelector('option[value="model"]');
  option.disabled = !info.draft;
  const note = $('draft-note');
  if (info.draft) {
    note.textContent = 'Draft model loaded: choose the drafter "model" (or "auto").';
  } else if (asked) {
    note.textContent = 'This build of the package does not report a draft model (no draft-model ' +
      'support yet): the drafter "model" stays off.';
  }
  if (option.disabled && $('draft').value === 'model') $('draft').value = 'suffix';
}

// One line of what the probe said: the model, what it needs, where it would run, whether it fits.
function describeProbe(p) {
  const params = `${(p.parameters / 1e6).toFixed(0)}M parameters`;
  const need = p.weightsBytes === undefined ? '' :
    `, weights ${megabytes(p.weightsBytes)} + KV cache ${megabytes(p.shape?.kvCacheBytes ?? 0)} at ${p.shape?.context} tokens`;
  const limits = p.adapter
    ? `; adapter ${p.adapter.description || p.adapter.vendor || 'unnamed'} (binding limit ` +
      `${megabytes(Math.min(p.adapter.limits.maxStorageBufferBindingSize, p.adapter.limits.maxBufferSize))})`
    : '';
  const verdict = p.fits ? `fits on the ${p.backend === 'cpu' ? 'CPU engine' : 'GPU'}` : `does not fit: ${p.fitsReason}`;
  return `probe (${megabytes(p.transferredBytes)} read): ${p.architecture ?? 'unknown'}, ${params}, ` +
    `file ${megabytes(p.fileSize)}${need}${limits}; ${verdict}`;
}

/** Loads `source`; resolves to the model, or rejects with the load's error. */
export async function loadModel(source, name) {
  const events = $('events');
  events.replaceChildren();
  for (const id of ['backend-badge', 'source-badge']) $(id).hidden = true;
  $('model-facts').hidden = true;
  $('load-progress').hidden = false;
  setModelStatus('loading', `Reading ${name}…`);
  const draft = draftSource();
  const context = Number($('context').value) || undefined;
  try {
    // The header first: a model the engines refuse, or too large here, costs no download. A
    // probe that fails (a server that refuses ranges and streams alike) leaves it to the load.
    let probe = null;
    try {
      probe = await Runahead.probe(source, { context });
    } catch (e) {
      if (e.code === 'gguf') throw e;
    }
    if (probe) {
      const item = document.createElement('li');
      item.dataset.type = 'probe';
      item.textContent = describeProbe(probe);
      events.append(item);
      if (!probe.fits) {
        const error = new Error(probe.fitsReason);
        error.code = probe.supported ? 'out_of_memory' : 'unsupported_model';
        throw error;
      }
    }
    const model = await Runahead.load(source, {
      context,
      ...(draft ? { draft } : {}),
      onProgress: showPhase,
      onEvent: (event) => {
        const item = document.createElement('li');
        item.dataset.type = event.type;
        item.textContent = (event.model === 'draft' ? 'draft model: ' : '') + describeEvent(event);
        events.append(item);
      },
    });
    showModel(model);
    showDraftSupport(model.info(), draft !== undefined);
    return model;
  } catch (e) {
    setModelStatus('error', 'No model loaded.');
    throw e;
  } finally {
    $('load-progress').hidden = true;
  }
}
