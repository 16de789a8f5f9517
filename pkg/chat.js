// The chat API of a loaded model: `model.chat(messages, options)` (a Generation, as `generate`
// gives) and the OpenAI-shaped `model.chat.completions.create({messages, stream, ...})`, built on
// the public `generate` method only. The engine keeps the previous turn's tokens in its cache,
// so a follow-up turn (the conversation sent again with the answer appended) prefills only what
// is new: `usage.prompt_tokens_details.cached_tokens` says how much was reused.

import { RunaheadError } from './errors.js';

// OpenAI's request fields this layer understands, with runahead's own extensions.
const REQUEST_FIELDS = new Set([
  'messages', 'stream', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'seed',
  'stop', 'signal', 'model', 'n', 'top_k', 'draft', 'depth',
]);

const FINISH_REASONS = {
  end_of_text: 'stop',
  stop: 'stop',
  max_tokens: 'length',
  context_full: 'length',
  cancelled: 'cancelled',
};

function invalid(message) {
  return new RunaheadError('invalid_option', message);
}

function checkMessages(messages) {
  if (!Array.isArray(messages)) {
    throw new RunaheadError('invalid_messages', 'messages must be an array of {role, content}');
  }
}

// The `generate` options of a chat.completions request.
function generateOptions(request) {
  for (const key of Object.keys(request)) {
    if (!REQUEST_FIELDS.has(key)) throw invalid(`chat.completions.create: unknown field '${key}'`);
  }
  if (request.n !== undefined && request.n !== 1) throw invalid('n: only 1 choice is generated');
  const stop = request.stop;
  const options = {
    maxTokens: request.max_completion_tokens ?? request.max_tokens,
    temperature: request.temperature,
    topP: request.top_p,
    topK: request.top_k,
    seed: request.seed,
    draft: request.draft,
    depth: request.depth,
    stop: stop === undefined || stop === null ? undefined : Array.isArray(stop) ? stop : [stop],
    signal: request.signal,
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

function usage(stats) {
  return {
    prompt_tokens: stats.prompt_tokens,
    completion_tokens: stats.generated_tokens,
    total_tokens: stats.prompt_tokens + stats.generated_tokens,
    prompt_tokens_details: { cached_tokens: stats.cached_tokens },
  };
}

// The non-OpenAI part of a response: the engine's statistics and where each token came from.
function extension(result) {
  return { stats: result.stats, provenance: result.provenance, tokens: result.tokens };
}

function header(model) {
  const id = `chatcmpl-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  return { id, created: Math.floor(Date.now() / 1000), model: model.info().name ?? 'runahead' };
}

async function* chunks(generation, head) {
  const chunk = (delta, finishReason, extra) => ({
    ...head,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finishReason }],
    ...extra,
  });
  yield chunk({ role: 'assistant', content: '' }, null);
  for await (const { text } of generation) {
    if (text) yield chunk({ content: text }, null);
  }
  const result = await generation.result;
  yield chunk({}, FINISH_REASONS[result.stats.stop_reason] ?? 'stop', {
    usage: usage(result.stats),
    runahead: extension(result),
  });
}

async function create(model, request) {
  if (request === null || typeof request !== 'object') {
    throw invalid('chat.completions.create takes a request object');
  }
  checkMessages(request.messages);
  const options = generateOptions(request);
  const generation = model.generate(request.messages, options);
  const head = header(model);
  if (request.stream) return chunks(generation, head);
  const result = await generation.result;
  return {
    ...head,
    object: 'chat.completion',
    choices: [{
      index: 0,
      message: { role: 'assistant', content: result.text },
      finish_reason: FINISH_REASONS[result.stats.stop_reason] ?? 'stop',
    }],
    usage: usage(result.stats),
    runahead: extension(result),
  };
}

/** `model.chat`: a function of `(messages, options)` with `completions.create` attached. */
export function createChat(model) {
  const chat = (messages, options = {}) => {
    checkMessages(messages);
    return model.generate(messages, options);
  };
  chat.completions = { create: (request) => create(model, request) };
  return chat;
}
