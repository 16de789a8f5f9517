// The OpenAI SDK's types (the real `openai` package, pinned in package.json) against the
// package's: requests typed with the SDK's ChatCompletionCreateParams go into
// `model.chat.completions.create`, and what comes back is assigned to the SDK's ChatCompletion
// and ChatCompletionChunk, with no cast. `tsc --noEmit -p .` (scripts/test.sh e2e) fails on any
// mismatch; nothing here runs.

import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
import { Runahead, RunaheadError } from '../../pkg/index.js';

declare const model: Runahead;

// Every role, content as text parts, a tool call and its result, `name`, null.
const messages: ChatCompletionMessageParam[] = [
  { role: 'developer', content: [{ type: 'text', text: 'Answer briefly.' }] },
  { role: 'system', content: 'Be exact.', name: 'rules' },
  { role: 'user', content: [{ type: 'text', text: 'Weather in' }, { type: 'text', text: 'Paris?' }], name: 'ann' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
  },
  { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
  { role: 'assistant', content: [{ type: 'refusal', refusal: 'No.' }], refusal: 'No.' },
  { role: 'user', content: 'Thanks.' },
];

// The fields an app sends, with the SDK's own types.
const request: ChatCompletionCreateParamsNonStreaming = {
  model: 'gpt-4o-mini',
  messages,
  temperature: 0.7,
  top_p: null,
  max_completion_tokens: 64,
  max_tokens: undefined,
  seed: 42,
  stop: ['\n\n'],
  n: 1,
  user: 'user-1',
  store: false,
  metadata: { app: 'demo' },
  service_tier: 'auto',
  parallel_tool_calls: false,
  frequency_penalty: 0.5,
  presence_penalty: null,
  logit_bias: { '42': -100 },
  logprobs: true,
  top_logprobs: 3,
  response_format: {
    type: 'json_schema',
    json_schema: { name: 'answer', schema: { type: 'object', properties: { city: { type: 'string' } } }, strict: true },
  },
  stream: false,
};

const jsonObject: ChatCompletionCreateParamsNonStreaming = {
  model: 'gpt-4o-mini',
  messages,
  response_format: { type: 'json_object' },
};

// Tools as the SDK types them; the calls come back in the SDK's message and delta shapes.
const tools: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      strict: true,
    },
  },
];
const toolChoice: ChatCompletionToolChoiceOption = { type: 'function', function: { name: 'weather' } };
const withTools: ChatCompletionCreateParamsNonStreaming = {
  model: 'gpt-4o-mini',
  messages,
  tools,
  tool_choice: toolChoice,
  parallel_tool_calls: true,
};

const streaming: ChatCompletionCreateParamsStreaming = {
  model: 'gpt-4o-mini',
  messages,
  stream: true,
  stream_options: { include_usage: true },
};

export async function completions(signal: AbortSignal): Promise<string> {
  const completion: ChatCompletion = await model.chat.completions.create(request);
  const choice: ChatCompletion.Choice = completion.choices[0];
  let text = choice.message.content ?? '';
  text += completion.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  for (const lp of choice.logprobs?.content ?? []) {
    text += lp.token + lp.logprob + lp.top_logprobs.map((t) => t.token).join();
  }
  text += (await model.chat.completions.create(jsonObject)).choices[0].message.content;
  const called: ChatCompletion = await model.chat.completions.create(withTools);
  for (const call of called.choices[0].message.tool_calls ?? []) {
    if (call.type === 'function') text += call.id + call.function.name + call.function.arguments;
  }
  if (called.choices[0].finish_reason === 'tool_calls') text += '!';
  const toolStream = await model.chat.completions.create({ ...withTools, stream: true });
  for await (const chunk of toolStream) {
    const c: ChatCompletionChunk = chunk;
    for (const call of c.choices[0]?.delta.tool_calls ?? []) text += call.index + (call.function?.name ?? '');
  }

  const stream = await model.chat.completions.create(streaming, { signal });
  for await (const chunk of stream) {
    const c: ChatCompletionChunk = chunk;
    text += c.choices[0]?.delta.content ?? '';
    text += c.choices[0]?.logprobs?.content?.length ?? 0;
    if (c.usage) text += c.usage.total_tokens;
    if (text.length > 100) stream.controller.abort();
  }

  // A request whose `stream` is not known statically.
  const either: ChatCompletionCreateParams = Math.random() < 0.5 ? request : streaming;
  const result = await model.chat.completions.create(either);
  if (Symbol.asyncIterator in result) {
    for await (const chunk of result) {
      const c: ChatCompletionChunk = chunk;
      text += c.choices.length;
    }
  } else {
    const c: ChatCompletion = result;
    text += c.choices.length;
  }

  // runahead's own fields beside OpenAI's.
  text += (await model.chat.completions.create({ ...request, top_k: 40, draft: 'auto' })).runahead.stop_reason;
  return text;
}

// An app's code written against the SDK's create signature takes runahead's.
type Create = (body: ChatCompletionCreateParamsNonStreaming, options?: { signal?: AbortSignal }) => Promise<ChatCompletion>;
type CreateStream = (body: ChatCompletionCreateParamsStreaming) => Promise<AsyncIterable<ChatCompletionChunk>>;
export const create: Create = model.chat.completions.create;
export const createStream: CreateStream = model.chat.completions.create;

// `chat` reads the same messages.
export const generation = model.chat(messages, { maxTokens: 8 });

// Errors carry the SDK error's status and param.
export function describe(e: unknown): string {
  if (e instanceof RunaheadError) return `${e.status ?? 'no status'} ${e.code} ${e.param ?? ''}`;
  return String(e);
}
