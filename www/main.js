// The demo page: load a GGUF (local file or URL), stream a generation with drafted tokens
// highlighted, show live speed and drafting statistics. Uses only the npm package's API.

import { Runahead, RunaheadError } from '../pkg/index.js';

const $ = (id) => document.getElementById(id);

// What a person can do about each error code (the message says what happened).
const HINTS = {
  no_webgpu:
    'This browser does not offer WebGPU. Use a recent Chrome or Edge (113+), Safari 26+, or ' +
    'Firefox 141+ on Windows; on Linux Chrome may need chrome://flags/#enable-unsafe-webgpu.',
  adapter_limits: 'Your GPU (or its driver) offers less than this model needs; try a smaller model.',
  device_lost: 'The GPU reset or was taken away. Reload the page and load the model again.',
  out_of_memory: 'The GPU ran out of memory: try a smaller model or a smaller context.',
  gguf: 'The file is not a valid GGUF model file.',
  unsupported_model: 'runahead runs llama and qwen2 models with byte-level BPE tokenizers.',
  fetch: 'The model could not be downloaded from that URL (check it, and CORS on other sites).',
  prompt_too_long: 'Shorten the prompt or load the model with a larger context.',
  busy: 'A generation is already running: stop it first.',
};

let model = null;
let generation = null;

function showError(e) {
  const code = e instanceof RunaheadError ? e.code : 'internal';
  $('error-code').textContent = code;
  $('error-message').textContent = e.message ?? String(e);
  $('error-hint').textContent = HINTS[code] ?? '';
  $('error').hidden = false;
  console.error(e);
}

function clearError() {
  $('error').hidden = true;
}

function setModelStatus(state, text) {
  const status = $('model-status');
  status.dataset.state = state;
  status.textContent = text;
}

function describe(info) {
  const types = Object.entries(info.tensorTypes)
    .map(([type, count]) => `${count} × ${type}`)
    .join(', ');
  const params = (info.parameters / 1e6).toFixed(0);
  return `${info.name ?? info.architecture}: ${info.architecture}, ${params}M parameters, ` +
    `${info.layers} layers, vocabulary ${info.vocab}, context ${info.context}, ${types}; ` +
    `chat template: ${info.chatTemplate ? 'yes' : 'no'}; ` +
    (info.backend === 'cpu'
      ? `${info.adapter}${info.backendReason ? ` (${info.backendReason})` : ''}`
      : `GPU: ${info.adapter}`);
}

async function loadModel(source, name) {
  clearError();
  if (generation) generation.cancel();
  model?.dispose();
  model = null;
  $('generate').disabled = true;
  const progress = $('progress');
  progress.hidden = false;
  progress.removeAttribute('value');
  setModelStatus('loading', `Reading ${name}…`);
  try {
    model = await Runahead.load(source, {
      context: Number($('context').value) || undefined,
      onProgress: ({ loaded, total }) => {
        const mb = (n) => (n / 1e6).toFixed(1);
        if (total) progress.value = loaded / total;
        const of = total ? ` of ${mb(total)}` : '';
        setModelStatus('loading', `Reading ${name}: ${mb(loaded)}${of} MB`);
        if (total && loaded === total) setModelStatus('loading', 'Uploading to the GPU…');
      },
    });
    const info = model.info();
    setModelStatus('ready', describe(info));
    $('chat').checked = info.chatTemplate;
    $('chat').disabled = !info.chatTemplate;
    $('generate').disabled = false;
  } catch (e) {
    setModelStatus('error', 'No model loaded.');
    showError(e);
  } finally {
    progress.hidden = true;
  }
}

function setStat(id, value) {
  $(id).textContent = value;
}

function percent(part, whole) {
  return whole > 0 ? `${((100 * part) / whole).toFixed(0)}%` : '–';
}

async function generate() {
  clearError();
  const output = $('output');
  output.replaceChildren();
  for (const id of ['stat-speed', 'stat-acceptance', 'stat-prefill', 'stat-stop']) setStat(id, '–');
  const stats = $('stats');
  stats.dataset.state = 'generating';
  $('generate').disabled = true;
  $('stop').disabled = false;

  const controller = new AbortController();
  $('stop').onclick = () => controller.abort();
  generation = model.generate($('prompt').value, {
    chat: $('chat').checked,
    maxTokens: Number($('max-tokens').value),
    temperature: Number($('temperature').value),
    draft: $('draft').value,
    signal: controller.signal,
  });
  let count = 0;
  let fromDraft = 0;
  let firstAt = 0;
  try {
    for await (const chunk of generation) {
      // The first token comes out of the prompt's forward pass: speed counts from there.
      if (count === 0) firstAt = performance.now();
      count += 1;
      fromDraft += chunk.fromDraft ? 1 : 0;
      const span = document.createElement('span');
      span.textContent = chunk.text;
      span.dataset.token = chunk.token;
      span.title = `token ${chunk.token}${chunk.fromDraft ? ' (draft)' : ''}`;
      if (chunk.fromDraft) span.className = 'draft';
      output.append(span);
      const seconds = (performance.now() - firstAt) / 1000;
      if (count > 1) setStat('stat-speed', ((count - 1) / seconds).toFixed(1));
      setStat('stat-generated', count);
      setStat('stat-from-draft', `${fromDraft} (${percent(fromDraft, count)})`);
      // Every token the model picked itself, after the first, took one forward pass.
      setStat('stat-forwards', count - fromDraft - 1);
    }
    const s = await generation.stats;
    setStat('stat-speed', s.tokens_per_second.toFixed(1));
    setStat('stat-generated', s.generated_tokens);
    setStat('stat-acceptance', `${s.accepted} of ${s.drafted} (${percent(s.accepted, s.drafted)})`);
    setStat('stat-forwards', s.target_forwards);
    setStat('stat-prefill', `${s.prompt_tokens} tokens, ${s.prefill_seconds.toFixed(2)} s`);
    setStat('stat-stop', s.stop_reason);
    stats.dataset.state = 'done';
  } catch (e) {
    stats.dataset.state = 'error';
    showError(e);
  } finally {
    generation = null;
    $('generate').disabled = false;
    $('stop').disabled = true;
  }
}

$('model-file').addEventListener('change', (event) => {
  const file = event.target.files[0];
  if (file) loadModel(file, file.name);
});
$('model-url-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const url = $('model-url').value.trim() || $('model-url').placeholder;
  loadModel(new URL(url, location.href), url);
});
$('generate').addEventListener('click', generate);

// Without WebGPU, models load onto the CPU engine (Runahead.load's backend 'auto').
