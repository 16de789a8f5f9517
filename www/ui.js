// What every part of the demo shares: element lookup, the error banner with its hints, the
// decoding options read from the settings card, and number formats.

import { RunaheadError } from '../pkg/index.js';

export const $ = (id) => document.getElementById(id);

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
  prompt_too_long: 'Shorten the prompt, start a new chat, or load the model with a larger context.',
  busy: 'A generation is already running: stop it first.',
  draft_mismatch: 'A draft model needs the target\'s tokenizer: a smaller model of the same family ' +
    '(e.g. Qwen2.5-Coder-0.5B for the 1.5B).',
  chat_template: 'This model has no chat template: use Compare with "chat template" off.',
  grammar: 'The JSON schema box holds something the package cannot compile: fix the schema ' +
    '(valid JSON, a JSON Schema object) or turn the structured output off.',
  invalid_sampling: 'Temperature must be 0 or more, top-p above 0 and at most 1.',
  invalid_option: 'Check the decoding settings (drafter, depth, top-k, seed, max tokens).',
  empty_prompt: 'Type something to send.',
};

export function showError(e) {
  const code = e instanceof RunaheadError ? e.code : 'internal';
  $('error-code').textContent = code;
  $('error-message').textContent = e.message ?? String(e);
  $('error-hint').textContent = HINTS[code] ?? '';
  $('error').hidden = false;
  console.error(e);
}

export function clearError() {
  $('error').hidden = true;
}

// A number field's value; an empty or unparsable field is the package's default (undefined).
function number(id) {
  const value = $(id).value.trim();
  return value === '' ? undefined : Number(value);
}

/** The `generate` options of the settings card (the drafter is the caller's). */
export function decodingOptions() {
  const depth = $('depth').value;
  const options = {
    maxTokens: number('max-tokens'),
    temperature: number('temperature'),
    topK: number('top-k'),
    topP: number('top-p'),
    seed: number('seed'),
    depth: depth === 'auto' ? 'auto' : Number(depth),
  };
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

export function percent(part, whole) {
  return whole > 0 ? `${((100 * part) / whole).toFixed(0)}%` : '–';
}

export function megabytes(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** A tokens/s figure: one decimal below 100. */
export function rate(value) {
  if (!Number.isFinite(value)) return '–';
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

// How a token's span is marked and titled, by where the token came from.
const PROVENANCE = {
  draft: { className: 'draft', note: ' (from a draft)' },
  forced: { className: 'forced', note: ' (forced by the schema)' },
};

/**
 * Appends a streamed chunk to `container`: a span per token (its id in data-token, its
 * provenance in data-provenance; drafted and grammar-forced ones highlighted, each their own
 * way); text released without a token is plain text.
 */
export function appendChunk(container, chunk) {
  if (chunk.token === undefined) {
    if (chunk.text) container.append(chunk.text);
    return;
  }
  const span = document.createElement('span');
  span.textContent = chunk.text;
  span.dataset.token = chunk.token;
  const provenance = chunk.provenance ?? (chunk.fromDraft ? 'draft' : 'target');
  span.dataset.provenance = provenance;
  const mark = PROVENANCE[provenance];
  span.title = `token ${chunk.token}${mark?.note ?? ''}`;
  if (mark) span.className = mark.className;
  container.append(span);
}
