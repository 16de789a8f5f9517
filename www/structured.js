// The chat's structured-output mode: with "JSON schema" on, every answer is constrained to the
// schema in the box (the package's `grammar` option, `{jsonSchema}`, given the box's text as
// it is, so a schema the package cannot compile is its own `grammar` error), and under the
// answer the page shows what the text parses to, or why it does not. The tokens the schema
// forced (its keys, quotes and separators, verified as free drafts) are marked apart from the
// drafted ones.

import { $ } from './ui.js';

/** The box's starting schema: a small object every answer must fill in. */
export const DEFAULT_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    tags: { type: 'array', items: { type: 'string', maxLength: 24 }, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
};

/** Fills the schema box with the default schema (once, at start). */
export function initStructured() {
  $('schema').value = JSON.stringify(DEFAULT_SCHEMA, null, 2);
  const sync = () => {
    $('schema').disabled = !$('structured').checked;
    $('structured-section').dataset.on = String($('structured').checked);
  };
  $('structured').addEventListener('change', sync);
  sync();
}

/** The `generate` options of the mode: `{grammar: {jsonSchema}}` when it is on, else none. */
export function structuredOptions() {
  if (!$('structured').checked) return {};
  return { grammar: { jsonSchema: $('schema').value } };
}

function block(message, kind, title, text) {
  const box = document.createElement('div');
  box.className = `parsed ${kind}`;
  box.dataset.state = kind;
  const head = document.createElement('div');
  head.className = 'parsed-title';
  head.textContent = title;
  const pre = document.createElement('pre');
  pre.textContent = text;
  box.append(head, pre);
  message.querySelector('.body').after(box);
}

/**
 * Under a finished answer of the mode: the parsed value pretty-printed, or the parse error
 * (an answer cut by max tokens is incomplete JSON).
 */
export function showParsed(message, result) {
  let value;
  try {
    value = JSON.parse(result.text);
  } catch (e) {
    const cut = result.stats.stop_reason === 'max_tokens' || result.stats.stop_reason === 'cancelled'
      ? ` (the answer stopped early: ${result.stats.stop_reason.replaceAll('_', ' ')})`
      : '';
    block(message, 'invalid', `not valid JSON${cut}`, e.message);
    return;
  }
  block(message, 'valid', 'parsed JSON', JSON.stringify(value, null, 2));
}

/** Under an answer the schema made fail: the package's error, its code first. */
export function showSchemaError(message, error) {
  const code = error?.code ?? 'internal';
  block(message, 'error', `schema error (${code})`, error?.message ?? String(error));
}

/** How many of a result's tokens the schema forced. */
export function forcedCount(result) {
  return result.provenance?.filter((p) => p === 'forced').length ?? 0;
}
