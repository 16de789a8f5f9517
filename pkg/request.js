// What a chat.completions request asks for, read the way the OpenAI SDK's
// `ChatCompletionCreateParams` means it: every field of the SDK is honoured, accepted and
// ignored (it does not change the output), or refused with `invalid_option` naming it and
// saying why (README.md, "Porting from the OpenAI SDK", has the same list). `null` means unset
// and a key set to `undefined` is absent. Conversations in OpenAI's shapes (text parts, the
// `developer` role, tool calls and tool results) become the `{role, content, ...}` messages the
// engine renders through the model's chat template.

import { RunaheadError } from './errors.js';

// Fields read below, and runahead's own (`top_k`, `draft`, `depth`, and `signal`, which the
// SDK passes as create's second argument instead).
const HONOURED = new Set([
  'messages', 'model', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens',
  'temperature', 'top_p', 'seed', 'stop', 'n', 'top_k', 'draft', 'depth', 'signal',
  'response_format', 'grammar', 'logprobs', 'top_logprobs', 'frequency_penalty', 'presence_penalty',
  'logit_bias', 'tools', 'tool_choice', 'parallel_tool_calls',
]);

// Fields that do not change the output: OpenAI's storage, billing, caching and routing
// (nothing leaves the page, so nothing is stored or shared), and a predicted output (a
// latency hint: the text is the same without it).
const IGNORED = new Set([
  'user', 'store', 'metadata', 'service_tier', 'safety_identifier', 'prompt_cache_key',
  'prompt_cache_options', 'prompt_cache_retention', 'prediction',
]);

const isEmptyArray = (v) => Array.isArray(v) && v.length === 0;

// Fields runahead cannot honour: a value that asks for nothing is accepted (the second
// entry), any other is refused with the reason (the third).
const REFUSED = {
  audio: [() => false, 'audio output is not generated: the model writes text'],
  modalities: [(v) => Array.isArray(v) && v.every((m) => m === 'text'), 'only text output is generated'],
  functions: [isEmptyArray, 'deprecated function definitions are not read: give them as tools'],
  function_call: [(v) => v === 'none' || v === 'auto', 'deprecated: use tool_choice'],
  reasoning_effort: [(v) => v === 'none', 'the model takes no reasoning effort (only "none")'],
  verbosity: [() => false, "verbosity is a hint to OpenAI's models that this model does not take"],
  web_search_options: [() => false, 'no web search: the model runs in the page, offline'],
  moderation: [() => false, 'no moderation model runs here'],
};

function invalid(param, message) {
  return new RunaheadError('invalid_option', `${param}: ${message}`, { param });
}

function invalidMessage(param, message) {
  return new RunaheadError('invalid_messages', `${param}: ${message}`, { param });
}

// The request's keys that are set: not undefined, not null.
function present(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new RunaheadError('invalid_option', 'chat.completions.create takes a request object');
  }
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined && v !== null));
}

function number(request, key, { min, max, integer = false }) {
  const v = request[key];
  if (v === undefined) return undefined;
  const kind = integer ? 'an integer' : 'a number';
  if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v))) {
    throw invalid(key, `expected ${kind}, got ${JSON.stringify(v) ?? String(v)}`);
  }
  if (v < min || (max !== undefined && v > max)) {
    throw invalid(key, `expected ${kind} ${max === undefined ? `>= ${min}` : `from ${min} to ${max}`}, got ${v}`);
  }
  return v;
}

function randomSeed() {
  const [hi, lo] = globalThis.crypto.getRandomValues(new Uint32Array(2));
  return (hi & 0x1fffff) * 2 ** 32 + lo;
}

function textParts(content, param, role) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidMessage(param, 'expected a string or an array of content parts');
  return content
    .map((part, j) => {
      if (part?.type === 'text' && typeof part.text === 'string') return part.text;
      if (role === 'assistant' && part?.type === 'refusal' && typeof part.refusal === 'string') return part.refusal;
      const type = typeof part?.type === 'string' ? `'${part.type}'` : 'this';
      throw invalidMessage(`${param}[${j}]`, `${type} parts are not read: the model reads text parts only`);
    })
    .join('\n');
}

// An assistant's tool call as HF chat templates read it: `function.arguments` an object (the
// SDK sends a JSON string; one that is not a JSON object is passed as the string).
function toolCall(call, param) {
  if (call?.type !== undefined && call.type !== 'function') {
    throw invalidMessage(param, `'${call.type}' tool calls are not passed to the chat template: only function calls`);
  }
  const fn = call?.function;
  if (typeof fn?.name !== 'string') throw invalidMessage(param, 'expected {id, type: "function", function: {name, arguments}}');
  let args = fn.arguments;
  if (typeof args === 'string') {
    try {
      const parsed = JSON.parse(args);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed;
    } catch {
      // Not JSON: the template gets the string as it is.
    }
  }
  return { ...(call.id === undefined ? {} : { id: call.id }), type: 'function', function: { name: fn.name, arguments: args } };
}

function message(m, i) {
  const param = `messages[${i}]`;
  if (m === null || typeof m !== 'object' || typeof m.role !== 'string') {
    throw invalidMessage(param, 'expected an object {role, content}');
  }
  const out = { role: m.role };
  const content = m.content ?? undefined;
  switch (m.role) {
    case 'system':
    case 'developer':
    case 'user':
    case 'tool':
      if (content === undefined) throw invalidMessage(`${param}.content`, 'missing');
      out.role = m.role === 'developer' ? 'system' : m.role;
      out.content = textParts(content, `${param}.content`, m.role);
      if (m.role === 'tool' && m.tool_call_id !== undefined && m.tool_call_id !== null) {
        out.tool_call_id = String(m.tool_call_id);
      }
      break;
    case 'assistant': {
      let text = content === undefined ? '' : textParts(content, `${param}.content`, 'assistant');
      if (text === '' && typeof m.refusal === 'string') text = m.refusal;
      out.content = text;
      if (m.tool_calls !== undefined && m.tool_calls !== null) {
        if (!Array.isArray(m.tool_calls)) throw invalidMessage(`${param}.tool_calls`, 'expected an array');
        if (m.tool_calls.length > 0) out.tool_calls = m.tool_calls.map((c, j) => toolCall(c, `${param}.tool_calls[${j}]`));
      }
      if (m.function_call !== undefined && m.function_call !== null) {
        throw invalidMessage(`${param}.function_call`, 'deprecated function calls are not passed to the chat template: use tool_calls');
      }
      if (m.audio !== undefined && m.audio !== null) {
        throw invalidMessage(`${param}.audio`, 'earlier audio answers cannot be read back: give their text as content');
      }
      break;
    }
    case 'function':
      throw invalidMessage(`${param}.role`, "the deprecated 'function' role is not read: send the result as a 'tool' message");
    default:
      throw invalidMessage(`${param}.role`, `'${m.role.slice(0, 40)}' is not a role (system, developer, user, assistant, tool)`);
  }
  if (typeof m.name === 'string') out.name = m.name;
  return out;
}

/**
 * A conversation in OpenAI's shapes as the engine's messages: text parts joined with newlines,
 * `developer` as `system`, an assistant's `tool_calls` and a tool result's `tool_call_id`
 * passed on for the chat template, `name` kept.
 */
export function conversation(messages) {
  if (!Array.isArray(messages)) {
    throw new RunaheadError('invalid_messages', 'messages must be an array of {role, content}', { param: 'messages' });
  }
  return messages.map(message);
}

// `response_format` (and runahead's `grammar`, generate's option) as generate's `grammar`:
// json_object is any JSON object, json_schema its schema (every output matches it whether or
// not `strict` is set: the schema constrains each token).
function grammarOption(request) {
  const format = request.response_format;
  let grammar;
  if (format !== undefined) {
    if (typeof format !== 'object' || Array.isArray(format)) throw invalid('response_format', 'expected an object {type}');
    switch (format.type) {
      case 'text':
        break;
      case 'json_object':
        grammar = { jsonSchema: { type: 'object' } };
        break;
      case 'json_schema': {
        const spec = format.json_schema;
        if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
          throw invalid('response_format.json_schema', 'expected {name, schema, strict}');
        }
        const schema = spec.schema ?? {};
        if (typeof schema !== 'object' || Array.isArray(schema)) {
          throw invalid('response_format.json_schema.schema', 'expected a JSON schema object');
        }
        grammar = { jsonSchema: schema };
        break;
      }
      default:
        throw invalid('response_format.type', `expected 'text', 'json_object' or 'json_schema', got ${JSON.stringify(format.type)}`);
    }
  }
  if (request.grammar !== undefined) {
    if (grammar !== undefined) throw invalid('grammar', 'give response_format or grammar, not both');
    grammar = request.grammar;
  }
  return grammar;
}

/**
 * Reads a chat.completions request: `{messages, options (generate's), stream, includeUsage,
 * logprobs, n (choices, generated one after another with seeds seed, seed + 1, ...), seed (the
 * one sampled with), signal}`. `info` is the model's (its context bounds the
 * default length).
 */
export function requestOptions(body, info) {
  const request = present(body);
  for (const key of Object.keys(request)) {
    if (HONOURED.has(key) || IGNORED.has(key)) continue;
    const refused = REFUSED[key];
    if (refused === undefined) throw invalid(key, 'not a field of chat.completions.create');
    if (!refused[0](request[key])) throw invalid(key, `not supported here: ${refused[1]}`);
  }
  if (request.messages === undefined) {
    throw new RunaheadError('invalid_messages', 'messages: missing', { param: 'messages' });
  }
  const messages = conversation(request.messages);
  if (request.stream !== undefined && typeof request.stream !== 'boolean') throw invalid('stream', 'expected a boolean');
  const n = number(request, 'n', { min: 1, max: 16, integer: true }) ?? 1;
  if (n > 1 && request.stream === true) throw invalid('n', 'more than one choice is not streamed: one stream has one choice');
  const streamOptions = request.stream_options ?? {};
  if (typeof streamOptions !== 'object') throw invalid('stream_options', 'expected an object');
  const temperature = number(request, 'temperature', { min: 0, max: 2 }) ?? 1;
  let topP = number(request, 'top_p', { min: 0, max: 1 });
  let topK = number(request, 'top_k', { min: 0, integer: true });
  // top_p 0 keeps only the most likely token, as top_k 1 does.
  if (topP === 0) {
    topP = undefined;
    topK = 1;
  }
  const maxTokens = number(request, 'max_completion_tokens', { min: 1, integer: true })
    ?? number(request, 'max_tokens', { min: 1, integer: true })
    // As OpenAI's: no limit but the context's.
    ?? info.context;
  let seed = number(request, 'seed', { min: Number.MIN_SAFE_INTEGER, integer: true });
  // The engine's seeds are unsigned: a negative one names another seed of the same range.
  if (seed !== undefined && seed < 0) seed += 2 ** 53;
  seed ??= randomSeed();
  const stop = request.stop;
  if (stop !== undefined && typeof stop !== 'string' && !(Array.isArray(stop) && stop.every((s) => typeof s === 'string'))) {
    throw invalid('stop', 'expected a string or an array of strings');
  }
  if (request.logprobs !== undefined && typeof request.logprobs !== 'boolean') throw invalid('logprobs', 'expected a boolean');
  const logprobs = request.logprobs === true;
  const topLogprobs = number(request, 'top_logprobs', { min: 0, max: 20, integer: true });
  if (topLogprobs > 0 && !logprobs) throw invalid('top_logprobs', 'needs logprobs: true');
  const logitBias = request.logit_bias;
  if (logitBias !== undefined) {
    if (typeof logitBias !== 'object' || Array.isArray(logitBias)) throw invalid('logit_bias', 'expected an object {token id: bias}');
    for (const [token, bias] of Object.entries(logitBias)) {
      if (!/^[0-9]+$/.test(token)) throw invalid('logit_bias', `keys are token ids, got ${JSON.stringify(token)}`);
      if (typeof bias !== 'number' || !(bias >= -100 && bias <= 100)) {
        throw invalid('logit_bias', `expected a bias from -100 to 100 for token ${token}, got ${JSON.stringify(bias)}`);
      }
    }
  }
  const { tools, toolChoice, parallelToolCalls, toolsCalled } = toolOptions(request);
  const options = {
    maxTokens,
    temperature,
    topP,
    topK,
    seed,
    draft: request.draft,
    depth: request.depth,
    stop: stop === undefined ? undefined : Array.isArray(stop) ? stop : [stop],
    grammar: grammarOption(request),
    logprobs: logprobs || undefined,
    topLogprobs: logprobs ? topLogprobs : undefined,
    frequencyPenalty: number(request, 'frequency_penalty', { min: -2, max: 2 }),
    presencePenalty: number(request, 'presence_penalty', { min: -2, max: 2 }),
    logitBias,
    tools,
    toolChoice,
    parallelToolCalls,
  };
  return {
    messages,
    options: Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    stream: request.stream === true,
    includeUsage: streamOptions.include_usage === true,
    logprobs,
    n,
    seed,
    toolsCalled,
    signal: request.signal,
  };
}

// `tools`, `tool_choice` and `parallel_tool_calls` as generate's options (the engine checks
// each definition and renders them through the chat template); `toolsCalled`: whether the
// reply may call one (tools given and tool_choice not 'none'), so it is read as
// `tool_calls`.
function toolOptions(request) {
  const tools = request.tools;
  if (tools !== undefined && !Array.isArray(tools)) {
    throw invalid('tools', 'expected an array of {type: "function", function: {name, description, parameters}}');
  }
  const choice = request.tool_choice;
  if (choice !== undefined && typeof choice !== 'string' && (typeof choice !== 'object' || Array.isArray(choice))) {
    throw invalid('tool_choice', 'expected "auto", "none", "required" or {type: "function", function: {name}}');
  }
  if (typeof choice === 'object' && choice.type !== 'function') {
    throw invalid('tool_choice', `${JSON.stringify(choice.type)} tool choices are not supported: give "auto", "none", "required" or {type: "function", function: {name}}`);
  }
  const parallel = request.parallel_tool_calls;
  if (parallel !== undefined && typeof parallel !== 'boolean') throw invalid('parallel_tool_calls', 'expected a boolean');
  const given = tools !== undefined && tools.length > 0;
  return {
    tools: given ? tools : undefined,
    toolChoice: choice,
    parallelToolCalls: parallel,
    toolsCalled: given && choice !== 'none',
  };
}
