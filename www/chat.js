// The chat: a conversation with an optional system prompt, sent whole at every turn through the
// package's chat API (`model.chat(messages, options)`). The engine keeps the previous turn's
// tokens, so a follow-up prefills only what is new; each answer says how much was reused.

import { $, appendChunk, rate } from './ui.js';
import { Tracker } from './live.js';
import { forcedCount, showParsed, showSchemaError } from './structured.js';

/** The turns so far, as `{role, content}` (the system prompt is read at each send). */
const history = [];

function bubble(role) {
  $('chat-empty').hidden = true;
  const message = document.createElement('article');
  message.className = `message ${role}`;
  const body = document.createElement('div');
  body.className = 'body';
  message.append(body);
  $('conversation').append(message);
  return { message, body };
}

function scrollToEnd() {
  const conversation = $('conversation');
  conversation.scrollTop = conversation.scrollHeight;
}

// The line under an answer: speed, drafts, and how much of the prompt came from the cache.
function describeTurn(meta, result) {
  const s = result.stats;
  const parts = [
    `${s.generated_tokens} tokens`,
    `${rate(s.tokens_per_second)} tok/s`,
    `prompt ${s.prompt_tokens}: ${s.cached_tokens} cached, ${s.prompt_tokens - s.cached_tokens} prefilled`,
  ];
  if (s.drafted > 0) parts.push(`${s.accepted}/${s.drafted} drafted accepted`);
  const forced = forcedCount(result);
  if (forced > 0) parts.push(`${forced} forced by the schema`);
  if (s.stop_reason === 'cancelled') parts.push('stopped');
  if (s.stop_reason === 'max_tokens' || s.stop_reason === 'context_full') parts.push(s.stop_reason.replaceAll('_', ' '));
  meta.textContent = parts.join(' · ');
  meta.dataset.prompt = s.prompt_tokens;
  meta.dataset.cached = s.cached_tokens;
  meta.dataset.forced = forced;
}

/** Forgets the conversation (the engine's cache is reused as far as the new one matches it). */
export function newChat() {
  history.length = 0;
  for (const message of $('conversation').querySelectorAll('.message')) message.remove();
  $('chat-empty').hidden = false;
}

/**
 * Sends `text` as the next user turn and streams the answer; resolves when it ends. A
 * cancelled answer stays in the conversation as far as it got; a failed turn is taken back.
 * With a `grammar` in `options` (the structured-output mode) the parsed answer, or why it
 * does not parse, is shown under it, and a schema the package refuses under the failed turn.
 */
export async function sendTurn(model, text, options, plot, signal) {
  const structured = options.grammar !== undefined;
  const system = $('system').value.trim();
  history.push({ role: 'user', content: text });
  const asked = bubble('user');
  asked.body.textContent = text;
  const { message, body } = bubble('assistant');
  message.classList.add('streaming');
  body.classList.add('output');
  const meta = document.createElement('p');
  meta.className = 'meta';
  message.append(meta);
  scrollToEnd();

  const messages = system ? [{ role: 'system', content: system }, ...history] : [...history];
  plot.clear();
  const turn = history.filter((m) => m.role === 'user').length;
  const tracker = new Tracker(plot, 'chat', `chat turn ${turn}`);
  const generation = model.chat(messages, { ...options, signal });
  try {
    for await (const chunk of generation) {
      appendChunk(body, chunk);
      tracker.token(chunk);
      scrollToEnd();
    }
    const result = await generation.result;
    history.push({ role: 'assistant', content: result.text });
    describeTurn(meta, result);
    if (structured) showParsed(message, result);
    tracker.done(result.stats);
  } catch (e) {
    history.pop();
    message.classList.add('failed');
    asked.message.classList.add('failed');
    meta.textContent = 'failed: not part of the conversation';
    if (structured && e?.code === 'grammar') showSchemaError(message, e);
    tracker.failed();
    throw e;
  } finally {
    message.classList.remove('streaming');
    scrollToEnd();
  }
}
