// The demo page: load a GGUF (URL or local file), chat with it in several turns, compare the same
// prompt with speculation off and on, and watch speed and accepted drafts live. It uses only the
// npm package's public API (pkg/index.js); each part of the page is a module of its own.

import { Runahead } from '../pkg/index.js';
import { $, clearError, decodingOptions, showError } from './ui.js';
import { loadModel } from './load.js';
import { newChat, sendTurn } from './chat.js';
import { initStructured, structuredOptions } from './structured.js';
import { runCompare } from './compare.js';
import { LivePlot } from './plot.js';

const plot = new LivePlot($('plot'));
initStructured();
let model = null;
// The AbortController of the generation running now (a chat turn or a compare), if any.
let running = null;

function updateButtons() {
  const idle = model !== null && running === null;
  $('generate').disabled = !idle || !model.info().chatTemplate;
  $('compare-run').disabled = !idle;
  $('stop').disabled = running === null;
  $('compare-stop').disabled = running === null;
  $('clear-history').disabled = !idle;
  // A new model or a new chat would pull the conversation from under a running answer.
  $('model-url-load').disabled = running !== null;
  $('model-file').disabled = running !== null;
  $('new-chat').disabled = running !== null;
}

async function load(source, name) {
  clearError();
  running?.abort();
  model?.dispose();
  model = null;
  updateButtons();
  try {
    model = await loadModel(source, name);
    const { chatTemplate } = model.info();
    $('chat').checked = chatTemplate;
    $('chat').disabled = !chatTemplate;
    if (!chatTemplate) $('prompt').placeholder = 'This model has no chat template: use Compare.';
  } catch (e) {
    showError(e);
  }
  updateButtons();
}

// Runs `work(signal)` as the one generation of the page, with the Stop buttons wired to it.
async function generating(work) {
  clearError();
  running = new AbortController();
  updateButtons();
  try {
    await work(running.signal);
  } catch (e) {
    showError(e);
  } finally {
    running = null;
    updateButtons();
  }
}

function options() {
  return { ...decodingOptions(), draft: $('draft').value };
}

$('model-url-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const url = $('model-url').value.trim() || $('model-url').placeholder;
  load(new URL(url, location.href), url);
});
$('model-file').addEventListener('change', (event) => {
  const file = event.target.files[0];
  if (file) load(file, file.name);
});

$('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  const text = $('prompt').value;
  if ($('generate').disabled || text.trim() === '') return;
  generating(async (signal) => {
    $('prompt').value = '';
    await sendTurn(model, text, { ...options(), ...structuredOptions() }, plot, signal);
  });
});
// Enter sends, Shift+Enter is a new line.
$('prompt').addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $('composer').requestSubmit();
  }
});
$('new-chat').addEventListener('click', () => {
  newChat();
  plot.clear();
});
$('compare-run').addEventListener('click', () => {
  generating((signal) => runCompare(model, options(), plot, signal));
});
for (const id of ['stop', 'compare-stop']) $(id).addEventListener('click', () => running?.abort());

// A line in the model card's list of events.
function note(text) {
  const item = document.createElement('li');
  item.textContent = text;
  $('events').append(item);
}

$('clear-history').addEventListener('click', async () => {
  try {
    await model.clearHistory();
    note('earlier answers forgotten, in the engine and in this origin\'s storage');
  } catch (e) {
    showError(e);
  }
});
$('clear-cache').addEventListener('click', async () => {
  try {
    const cached = await Runahead.cache.list();
    await Runahead.cache.clear();
    note(`model cache cleared (${cached.length} ${cached.length === 1 ? 'model' : 'models'}): the next load downloads`);
  } catch (e) {
    showError(e);
  }
});
$('error-close').addEventListener('click', clearError);

function selectTab(name) {
  for (const tab of ['chat', 'compare']) {
    const selected = tab === name;
    $(`tab-${tab}`).setAttribute('aria-selected', String(selected));
    $(`${tab}-panel`).hidden = !selected;
  }
}
$('tab-chat').addEventListener('click', () => selectTab('chat'));
$('tab-compare').addEventListener('click', () => selectTab('compare'));
