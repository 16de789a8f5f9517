// The chat API of a loaded model: `model.chat(messages, options)` (a Generation, as `generate`
// gives) and `model.chat.completions.create(body, {signal})`, which keeps the OpenAI SDK's
// contract (README.md, "Porting from the OpenAI SDK"), built on the public `generate` method
// only. The engine keeps the previous turn's tokens in its cache, so a follow-up turn (the
// conversation sent again with the answer appended) prefills only what is new:
// `usage.prompt_tokens_details.cached_tokens` says how much was reused.

import { RunaheadError, abortError, toRunaheadError } from './errors.js';
import { conversation, requestOptions } from './request.js';

// OpenAI's finish_reason for each of the engine's stop reasons (the engine's own is kept in
// the response's `runahead.stop_reason`).
const FINISH_REASONS = {
  end_of_text: 'stop',
  stop: 'stop',
  cancelled: 'stop',
  max_tokens: 'length',
  context_full: 'length',
};

function finishReason(result) {
  if (result.tool_calls?.length > 0) return 'tool_calls';
  return FINISH_REASONS[result.stats.stop_reason] ?? 'stop';
}

// The calls a reply made in OpenAI's shape, each with an id the next turn's `tool` message
// answers (`tool_call_id`).
function toolCalls(result) {
  return result.tool_calls.map((c) => ({
    id: `call_${Math.random().toString(36).slice(2, 12)}`,
    type: 'function',
    function: { name: c.name, arguments: c.arguments },
  }));
}

// The assistant's message of a result: with tools, the reply's text without its calls and the
// calls; `content` is null when the reply is calls only, as OpenAI's.
function assistantMessage(result) {
  if (result.tool_calls === undefined) return { role: 'assistant', content: result.text, refusal: null };
  const calls = result.tool_calls.length > 0 ? { tool_calls: toolCalls(result) } : {};
  const content = result.content === '' && calls.tool_calls ? null : result.content;
  return { role: 'assistant', content, refusal: null, ...calls };
}

function usage(stats) {
  return {
    prompt_tokens: stats.prompt_tokens,
    completion_tokens: stats.generated_tokens,
    total_tokens: stats.prompt_tokens + stats.generated_tokens,
    prompt_tokens_details: { cached_tokens: stats.cached_tokens },
  };
}

// The non-OpenAI part of a response: why it stopped, the seed it sampled with, the engine's
// statistics and where each token came from.
function extension(result, seed) {
  return {
    stop_reason: result.stats.stop_reason,
    seed,
    stats: result.stats,
    provenance: result.provenance,
    tokens: result.tokens,
  };
}

// The engine's `logprobs` in OpenAI's shape: `{content: [{token, logprob, bytes,
// top_logprobs}], refusal: null}`, the end token that ended the text left out (it is not in
// the content either).
function openaiLogprobs(result) {
  let entries = result.logprobs ?? [];
  if (result.stats.stop_reason === 'end_of_text') entries = entries.slice(0, -1);
  return { content: entries.map(openaiLogprob), refusal: null };
}

// One of the engine's logprobs entries as OpenAI's ChatCompletionTokenLogprob.
function openaiLogprob(e) {
  const one = (x) => ({ token: x.text, logprob: x.logprob, bytes: x.bytes });
  return { ...one(e), top_logprobs: e.top_logprobs.map(one) };
}

function header(model) {
  const id = `chatcmpl-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  return { id, created: Math.floor(Date.now() / 1000), model: model.info().name ?? 'runahead' };
}

// Engine errors name the option they are about first ("draft: ...", "stop: ..."): the request
// field it came from is the error's `param`.
const PARAMS = {
  draft: 'draft', depth: 'depth', stop: 'stop', temperature: 'temperature', 'top-p': 'top_p',
  frequency_penalty: 'frequency_penalty', presence_penalty: 'presence_penalty', logit_bias: 'logit_bias',
  top_logprobs: 'top_logprobs', tools: 'tools', toolChoice: 'tool_choice',
};

function requestError(e, grammarParam) {
  const error = toRunaheadError(e);
  if (error.code === 'grammar' && grammarParam !== undefined) {
    // The schema or grammar the request gave cannot be compiled: the request's fault.
    error.status = 400;
    error.param ??= grammarParam;
  }
  if (error.param === null && error.status === 400) {
    const name = /^([a-zA-Z_-]+)(?:\[\d+\])?[:.]/.exec(error.message)?.[1];
    if (name in PARAMS) error.param = PARAMS[name];
    else if (error.code === 'invalid_messages' || error.code === 'chat_template') error.param = 'messages';
  }
  return error;
}

// One AbortController per request: aborted by the caller's signals (the `signal` of
// create's options, or runahead's `signal` field) and by `stream.controller.abort()`.
function controllerFor(signals) {
  const controller = new AbortController();
  const abort = () => controller.abort();
  for (const s of signals) s.addEventListener('abort', abort, { once: true });
  const release = () => {
    for (const s of signals) s.removeEventListener('abort', abort);
  };
  return { controller, release };
}

/**
 * What `create({stream: true})` resolves to: an async iterable of chat.completion.chunk
 * objects, as the SDK's Stream is, with its `controller` (aborting it cancels the
 * generation). Leaving a `for await` loop over it early (break, return, throw) cancels the
 * generation and waits until the engine is free, so the next request is not refused as busy.
 */
class ChatCompletionStream {
  #chunks;

  constructor(chunks, controller) {
    this.#chunks = chunks;
    /** Aborting it stops the generation after the token being verified. */
    this.controller = controller;
  }

  [Symbol.asyncIterator]() {
    const chunks = this.#chunks;
    if (chunks === null) throw new RunaheadError('invalid_option', 'this stream was iterated already');
    this.#chunks = null;
    return chunks;
  }
}

async function* streamChunks({ generation, iterator, first, head, includeUsage, logprobs, toolsCalled, seed, release }) {
  const chunk = (delta, finish, lp = null) => ({
    ...head,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, logprobs: lp, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  });
  let finished = false;
  try {
    yield chunk({ role: 'assistant', content: '', refusal: null }, null);
    // With logprobs, a content chunk carries those of the tokens whose text it releases: a
    // token that releases no text (part of a character, text held back for a stop string)
    // waits for the next chunk that has text. What no content chunk carried comes with the
    // finish_reason, so the chunks' `logprobs.content` concatenated is the whole list.
    let waiting = [];
    let sent = 0;
    for (let step = first; !step.done; step = await iterator.next()) {
      // A reply that may call tools is read whole before it is known to be text or calls:
      // its content and calls arrive with the last chunks.
      if (toolsCalled) continue;
      const { text, logprob } = step.value;
      if (logprobs && logprob) waiting.push(logprob);
      if (!text) continue;
      let lp = null;
      if (logprobs && waiting.length > 0) {
        lp = { content: waiting.map(openaiLogprob), refusal: null };
        sent += waiting.length;
        waiting = [];
      }
      yield chunk({ content: text }, null, lp);
    }
    const result = await generation.result;
    finished = true;
    if (toolsCalled) {
      if (result.content) yield chunk({ content: result.content }, null);
      if (result.tool_calls.length > 0) {
        yield chunk({ tool_calls: toolCalls(result).map((call, index) => ({ index, ...call })) }, null);
      }
    }
    // The finish chunk's: those no content chunk carried (all of them when none did, as for a
    // reply with tools); null when the content chunks carried every one.
    let lp = null;
    if (logprobs) {
      const rest = openaiLogprobs(result).content.slice(sent);
      if (rest.length > 0 || sent === 0) lp = { content: rest, refusal: null };
    }
    yield { ...chunk({}, finishReason(result), lp), runahead: extension(result, seed) };
    if (includeUsage) {
      yield { ...head, object: 'chat.completion.chunk', choices: [], usage: usage(result.stats) };
    }
  } finally {
    if (!finished) {
      // The consumer left the loop (or the generation failed): stop generating and wait
      // for the engine to be free.
      generation.cancel();
      await iterator.return?.();
      await generation.result.catch(() => {});
    }
    release();
  }
}

async function create(model, body, requestOptionsArg) {
  const { messages, options, stream, includeUsage, logprobs, n, seed, toolsCalled, signal: bodySignal } = requestOptions(body, model.info());
  const grammarParam = options.grammar === undefined ? undefined : body.grammar == null ? 'response_format' : 'grammar';
  const signals = [requestOptionsArg?.signal, bodySignal].filter((s) => s !== undefined && s !== null);
  for (const s of signals) {
    if (typeof s?.addEventListener !== 'function') {
      throw new RunaheadError('invalid_option', 'signal must be an AbortSignal', { param: 'signal' });
    }
  }
  if (signals.some((s) => s.aborted)) throw abortError('the request');
  if (model.busy) {
    throw new RunaheadError('busy', 'a generation is already running: await it or cancel it first');
  }
  const { controller, release } = controllerFor(signals);
  const head = header(model);
  if (!stream) {
    // n choices, one after another, with seeds seed, seed + 1, ...: each after the first
    // reuses the prompt's cache entries the one before left.
    const results = [];
    try {
      for (let i = 0; i < n; i++) {
        const seedI = (seed + i) % 2 ** 53;
        const generation = model.generate(messages, { ...options, seed: seedI, signal: controller.signal });
        const result = await generation.result;
        if (result.stats.stop_reason === 'cancelled') throw abortError('the request');
        results.push({ result, seed: seedI });
      }
    } catch (e) {
      throw e.code === 'cancelled' ? e : requestError(e, grammarParam);
    } finally {
      release();
    }
    const first = results[0].result;
    const total = usage(first.stats);
    for (const { result } of results.slice(1)) {
      total.completion_tokens += result.stats.generated_tokens;
      total.total_tokens += result.stats.generated_tokens;
    }
    return {
      ...head,
      object: 'chat.completion',
      choices: results.map(({ result }, index) => ({
        index,
        message: assistantMessage(result),
        logprobs: logprobs ? openaiLogprobs(result) : null,
        finish_reason: finishReason(result),
      })),
      usage: total,
      runahead: { ...extension(first, seed), ...(n > 1 ? { choices: results.map(({ result, seed: s }) => extension(result, s)) } : {}) },
    };
  }
  const generation = model.generate(messages, { ...options, signal: controller.signal });
  // The stream is handed over once the first token is out, so whatever fails before it (a
  // bad value, the chat template, a prompt too long, a busy engine) rejects create() itself.
  const iterator = generation[Symbol.asyncIterator]();
  let first;
  try {
    first = await iterator.next();
  } catch (e) {
    release();
    throw requestError(e, grammarParam);
  }
  if (controller.signal.aborted) {
    await iterator.return?.();
    await generation.result.catch(() => {});
    release();
    throw abortError('the request');
  }
  const chunks = streamChunks({ generation, iterator, first, head, includeUsage, logprobs, toolsCalled, seed, release });
  return new ChatCompletionStream(chunks, controller);
}

/** `model.chat`: a function of `(messages, options)` with `completions.create` attached. */
export function createChat(model) {
  const chat = (messages, options = {}) => model.generate(conversation(messages), options);
  chat.completions = { create: (body, options) => create(model, body, options) };
  return chat;
}
