// Structured output in the page, through the package and the engine on SmolLM2: `generate`'s
// `grammar` (a JSON schema, a Lark grammar, a regex) and chat.completions' `response_format`
// (json_object, json_schema). Every output under a schema parses and validates; greedy
// constrained speculative decoding gives the plain constrained tokens, token for token, with the
// grammar's forced tokens verified as free drafts; on the CPU engine (`backend: 'auto'` on
// SwiftShader's fallback adapter) and on WebGPU (`backend: 'webgpu'`, SwiftShader). A schema
// that cannot be compiled rejects before any token. Tools through chat.completions: the calls
// in OpenAI's shapes (streamed and not), their arguments valid under the tool's schema, and the
// next turn reading the call and its result back. Streamed tokens carry their provenance and
// log-probabilities, which equal plain decoding's.
//
//   scripts/test.sh e2e      (builds pkg/wasm, runs npm ci, then the files here)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { chromiumFlags, serve } from './serve.mjs';

const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SLOW = 900_000;

// Nested object, an array, an enum, bounded numbers and strings, an optional field.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    colour: { enum: ['red', 'green', 'blue'] },
    address: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 16 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      required: ['city', 'zip'],
      additionalProperties: false,
    },
    tags: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 },
    nickname: { type: 'string', maxLength: 10 },
  },
  required: ['name', 'age', 'colour', 'address', 'tags'],
  additionalProperties: false,
};

// A JSON Schema check of what the schemas here use.
function validate(value, schema, at = '$') {
  if (schema.enum) {
    if (!schema.enum.includes(value)) return `${at}: ${JSON.stringify(value)} not in the enum`;
    return null;
  }
  switch (schema.type) {
    case 'object': {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return `${at}: not an object`;
      for (const key of schema.required ?? []) if (!(key in value)) return `${at}: missing ${key}`;
      for (const [key, v] of Object.entries(value)) {
        const sub = schema.properties?.[key];
        if (sub === undefined) {
          if (schema.additionalProperties === false) return `${at}: extra key ${key}`;
          continue;
        }
        const e = validate(v, sub, `${at}.${key}`);
        if (e) return e;
      }
      return null;
    }
    case 'array':
      if (!Array.isArray(value)) return `${at}: not an array`;
      if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${at}: too many items`;
      for (const [i, v] of value.entries()) {
        const e = validate(v, schema.items, `${at}[${i}]`);
        if (e) return e;
      }
      return null;
    case 'string':
      if (typeof value !== 'string') return `${at}: not a string`;
      if (schema.minLength !== undefined && value.length < schema.minLength) return `${at}: too short`;
      if (schema.maxLength !== undefined && value.length > schema.maxLength) return `${at}: too long`;
      if (schema.pattern && !new RegExp(schema.pattern).test(value)) return `${at}: does not match ${schema.pattern}`;
      return null;
    case 'integer':
      if (!Number.isInteger(value)) return `${at}: not an integer`;
      if (schema.minimum !== undefined && value < schema.minimum) return `${at}: below the minimum`;
      if (schema.maximum !== undefined && value > schema.maximum) return `${at}: above the maximum`;
      return null;
    default:
      return null;
  }
}

function checkJson(text, schema) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`not JSON (${e.message}): ${text}`);
  }
  const error = validate(value, schema);
  assert.equal(error, null, `${error}: ${text}`);
  return value;
}

test('the validator catches what it checks', () => {
  const good = { name: 'Ann', age: 30, colour: 'red', address: { city: 'Oslo', zip: '01234' }, tags: [] };
  assert.equal(validate(good, PERSON), null);
  for (const bad of [
    { ...good, age: 1.5 },
    { ...good, colour: 'pink' },
    { ...good, address: { city: 'Oslo', zip: '123' } },
    { ...good, tags: ['a', 'b', 'c', 'd'] },
    { ...good, extra: 1 },
    { name: 'Ann' },
  ]) {
    assert.notEqual(validate(bad, PERSON), null, JSON.stringify(bad));
  }
});

let server;
let browser;
let page;

before(async () => {
  let base;
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
  await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    window.Runahead = Runahead;
    window.url = url;
    window.model = await Runahead.load(url, { context: 512, history: false });
    window.failure = async (f) => {
      try {
        await f();
        return { code: 'no error' };
      } catch (e) {
        return { code: e.code, status: e.status, param: e.param, message: e.message };
      }
    };
    // Greedy constrained generations with each drafter: tokens, text, provenance, counts.
    window.byDrafter = async (model, prompt, grammar, drafters, maxTokens) => {
      const out = {};
      for (const draft of drafters) {
        const r = await model.generate(prompt, { chat: true, maxTokens, grammar, draft, depth: 6 }).result;
        out[draft] = {
          tokens: r.tokens,
          text: r.text,
          forced: r.provenance.filter((p) => p === 'forced').length,
          forwards: r.stats.target_forwards,
          stop: r.stats.stop_reason,
          backend: r.stats.backend,
        };
      }
      return out;
    };
  }, `/${MODEL}`);
});

after(async () => {
  await browser?.close();
  server?.kill();
});

const ASK = 'Describe a made-up person as JSON: name, age, favourite colour, address and tags.';

test('generate under a JSON schema: the output validates, and speculative equals plain on the CPU engine', { timeout: SLOW }, async () => {
  const runs = await page.evaluate(
    ({ ask, schema }) => window.byDrafter(window.model, ask, { jsonSchema: schema }, ['none', 'suffix', 'ngram', 'auto'], 120),
    { ask: ASK, schema: PERSON },
  );
  const plain = runs.none;
  assert.equal(plain.backend, 'cpu');
  assert.equal(plain.stop, 'end_of_text', JSON.stringify(plain));
  checkJson(plain.text, PERSON);
  for (const [draft, run] of Object.entries(runs)) {
    assert.deepEqual(run.tokens, plain.tokens, draft);
    if (draft !== 'none') {
      // The schema's keys and separators came as free drafts, in fewer forwards.
      assert.ok(run.forced > 0, `${draft}: ${JSON.stringify(run)}`);
      assert.ok(run.forwards < plain.forwards, `${draft}: ${run.forwards} vs ${plain.forwards}`);
    }
  }
});

test('under a schema, chunks carry their provenance and log-probabilities, the same with and without speculation', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async ({ ask, schema }) => {
    const m = window.model;
    const options = { chat: true, maxTokens: 120, grammar: { jsonSchema: schema }, depth: 6, logprobs: true, topLogprobs: 2 };
    const generation = m.generate(ask, { ...options, draft: 'suffix' });
    const chunks = [];
    for await (const c of generation) if (c.token !== undefined) chunks.push(c);
    const result = await generation.result;
    const format = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
    const request = {
      messages: [{ role: 'user', content: ask }], temperature: 0, max_tokens: 120, response_format: format,
      logprobs: true, top_logprobs: 2,
    };
    const plain = await m.chat.completions.create({ ...request, draft: 'none' });
    const streamed = [];
    let provenance = [];
    for await (const chunk of await m.chat.completions.create({ ...request, stream: true, draft: 'suffix' })) {
      const choice = chunk.choices[0];
      if (choice) streamed.push({ content: choice.delta.content, logprobs: choice.logprobs });
      if (chunk.runahead) provenance = chunk.runahead.provenance;
    }
    return {
      chunks: chunks.map((c) => ({ token: c.token, provenance: c.provenance, fromDraft: c.fromDraft, logprob: c.logprob })),
      result: { tokens: result.tokens, provenance: result.provenance, logprobs: result.logprobs },
      plain: { content: plain.choices[0].message.content, logprobs: plain.choices[0].logprobs.content },
      streamed,
      streamedForced: provenance.filter((p) => p === 'forced').length,
    };
  }, { ask: ASK, schema: PERSON });
  // generate's chunks: each token's provenance and log-probability, as the result has them.
  assert.deepEqual(r.chunks.map((c) => c.token), r.result.tokens);
  assert.deepEqual(r.chunks.map((c) => c.provenance), r.result.provenance);
  assert.deepEqual(r.chunks.map((c) => c.fromDraft), r.result.provenance.map((p) => p !== 'target'));
  assert.deepEqual(r.chunks.map((c) => c.logprob), r.result.logprobs);
  assert.ok(r.result.provenance.includes('forced'));
  // The stream (speculative, with forced tokens) against plain decoding not streamed.
  checkJson(r.plain.content, PERSON);
  assert.ok(r.streamedForced > 0);
  assert.equal(r.streamed.map((c) => c.content ?? '').join(''), r.plain.content);
  const joined = r.streamed.flatMap((c) => c.logprobs?.content ?? []);
  assert.deepEqual(joined.map((e) => e.token), r.plain.logprobs.map((e) => e.token));
  for (const [a, b] of joined.map((e, i) => [e, r.plain.logprobs[i]])) {
    assert.ok(Math.abs(a.logprob - b.logprob) < 1e-5, `${a.logprob} vs ${b.logprob}`);
    assert.deepEqual(a.top_logprobs.map((t) => t.token), b.top_logprobs.map((t) => t.token));
  }
  // A content chunk carries the tokens that spell it (whole characters: the text is ASCII).
  for (const c of r.streamed) {
    if (!c.content) continue;
    assert.equal(c.logprobs?.content.map((e) => e.token).join(''), c.content, JSON.stringify(c));
  }
});

test('Lark grammars and regexes constrain generate', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const ask = 'Is the sky blue? Then give a phone number.';
    const lark = await m.generate(ask, { chat: true, maxTokens: 8, grammar: { lark: 'start: ("yes" | "no") "." ' } }).result;
    const regex = await m.generate(ask, { chat: true, maxTokens: 16, grammar: { regex: '[0-9]{3}-[0-9]{4}' }, draft: 'suffix' }).result;
    const sampled = await m.generate(ask, {
      chat: true, maxTokens: 16, temperature: 1, seed: 3, grammar: { regex: '(yes|no), [a-z]{1,8}' }, draft: 'auto',
    }).result;
    const twoShapes = await window.failure(() => m.generate(ask, { grammar: { regex: 'a', lark: 'start: "a"' } }).result);
    const badRegex = await window.failure(() => m.generate(ask, { grammar: { regex: '(' } }).result);
    return { lark: lark.text, regex: regex.text, sampled: sampled.text, twoShapes, badRegex, busy: m.busy };
  });
  assert.match(r.lark, /^(yes|no)\.$/);
  assert.match(r.regex, /^[0-9]{3}-[0-9]{4}$/);
  assert.match(r.sampled, /^(yes|no), [a-z]{1,8}$/);
  assert.equal(r.twoShapes.code, 'invalid_option', JSON.stringify(r.twoShapes));
  assert.equal(r.badRegex.code, 'grammar', JSON.stringify(r.badRegex));
  assert.equal(r.busy, false);
});

test('chat.completions: response_format json_schema and json_object, streamed or not; bad schemas reject create', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async ({ ask, schema }) => {
    const m = window.model;
    const messages = [{ role: 'user', content: ask }];
    const format = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
    const greedy = await m.chat.completions.create({ messages, temperature: 0, max_tokens: 160, response_format: format });
    // OpenAI's default temperature 1, seeded: sampling under the mask.
    const sampled = await m.chat.completions.create({ messages, seed: 11, max_tokens: 160, response_format: format, draft: 'suffix' });
    const stream = await m.chat.completions.create({ messages, temperature: 0, max_tokens: 160, response_format: format, stream: true, draft: 'auto' });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? '';
    const object = await m.chat.completions.create({
      messages: [{ role: 'user', content: 'Give a JSON object with a greeting.' }],
      temperature: 0, max_tokens: 60, response_format: { type: 'json_object' },
    });
    const badSchema = await window.failure(() => m.chat.completions.create({
      messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'nonsense' } } },
    }));
    const badStream = await window.failure(() => m.chat.completions.create({
      messages, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'nonsense' } } },
    }));
    const badType = await window.failure(() => m.chat.completions.create({ messages, response_format: { type: 'xml' } }));
    const both = await window.failure(() => m.chat.completions.create({ messages, response_format: { type: 'json_object' }, grammar: { regex: 'a' } }));
    const text = await m.chat.completions.create({ messages, temperature: 0, max_tokens: 4, response_format: { type: 'text' } });
    return {
      greedy: { content: greedy.choices[0].message.content, finish: greedy.choices[0].finish_reason },
      sampled: { content: sampled.choices[0].message.content, finish: sampled.choices[0].finish_reason },
      streamed,
      object: object.choices[0].message.content,
      objectFinish: object.choices[0].finish_reason,
      badSchema,
      badStream,
      badType,
      both,
      text: text.choices[0].finish_reason,
    };
  }, { ask: ASK, schema: PERSON });
  for (const run of [r.greedy, r.sampled]) {
    assert.equal(run.finish, 'stop', JSON.stringify(run));
    checkJson(run.content, PERSON);
  }
  assert.equal(r.streamed, r.greedy.content);
  assert.equal(r.objectFinish, 'stop', r.object);
  const object = JSON.parse(r.object);
  assert.ok(object !== null && typeof object === 'object' && !Array.isArray(object), r.object);
  for (const bad of [r.badSchema, r.badStream]) {
    assert.equal(bad.code, 'grammar', JSON.stringify(bad));
    assert.equal(bad.status, 400, JSON.stringify(bad));
    assert.equal(bad.param, 'response_format', JSON.stringify(bad));
  }
  assert.equal(r.badType.code, 'invalid_option');
  assert.equal(r.badType.param, 'response_format.type');
  assert.equal(r.both.code, 'invalid_option');
  assert.equal(r.both.param, 'grammar');
  assert.equal(r.text, 'length');
});

test('on WebGPU: the output validates and speculative equals plain', { timeout: SLOW }, async () => {
  // Short answers: SwiftShader runs the GPU engine on this machine's CPU.
  const schema = {
    type: 'object',
    properties: { answer: { enum: ['yes', 'no'] }, confidence: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['answer', 'confidence'],
    additionalProperties: false,
  };
  const runs = await page.evaluate(async ({ schema }) => {
    const gpu = await window.Runahead.load(window.url, { backend: 'webgpu', context: 256, history: false });
    try {
      return await window.byDrafter(gpu, 'Is water wet? Answer as JSON.', { jsonSchema: schema }, ['none', 'suffix'], 40);
    } finally {
      gpu.dispose();
    }
  }, { schema });
  assert.equal(runs.none.backend, 'gpu');
  checkJson(runs.none.text, schema);
  assert.deepEqual(runs.suffix.tokens, runs.none.tokens);
  assert.ok(runs.suffix.forced > 0, JSON.stringify(runs.suffix));
});

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const TOOLS = [
  { type: 'function', function: { name: 'weather', description: 'The weather in a city', parameters: WEATHER } },
  { type: 'function', function: { name: 'time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'] } } },
];

test('chat.completions with tools: calls in OpenAI shapes, arguments under the schema, speculative equals plain', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async ({ tools }) => {
    const m = window.model;
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const named = { type: 'function', function: { name: 'weather' } };
    // One call a reply: SmolLM2 allowed several calls the same one again until max_tokens.
    const ask = { messages, tools, temperature: 0, max_tokens: 60, parallel_tool_calls: false };
    const plain = await m.chat.completions.create({ ...ask, tool_choice: named });
    const spec = await m.chat.completions.create({ ...ask, tool_choice: named, draft: 'auto' });
    const required = await m.chat.completions.create({ ...ask, tool_choice: 'required' });
    const chunks = [];
    for await (const c of await m.chat.completions.create({ ...ask, tool_choice: named, stream: true, draft: 'suffix' })) chunks.push(c);
    // The next turn: the call and its result go back through the template.
    const call = plain.choices[0].message.tool_calls?.[0];
    const followUp = await m.chat.completions.create({
      messages: [...messages, plain.choices[0].message, { role: 'tool', tool_call_id: call?.id, content: '{"temperature": 21}' }],
      tools, tool_choice: 'none', temperature: 0, max_tokens: 12,
    });
    const badTool = await window.failure(() => m.chat.completions.create({ messages, tools: [{ type: 'function', function: { name: 'a b' } }] }));
    const badChoice = await window.failure(() => m.chat.completions.create({ messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }));
    const allowed = await window.failure(() => m.chat.completions.create({ messages, tools, tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } } }));
    const withGrammar = await window.failure(() => m.chat.completions.create({ messages, tools, response_format: { type: 'json_object' } }));
    const rawPrompt = await window.failure(() => m.generate('hi', { tools }).result);
    return { plain, spec, required, chunks, followUp, badTool, badChoice, allowed, withGrammar, rawPrompt, busy: m.busy };
  }, { tools: TOOLS });

  const message = r.plain.choices[0].message;
  assert.equal(r.plain.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.plain.choices[0]));
  assert.equal(message.content, null);
  assert.equal(message.tool_calls.length, 1, JSON.stringify(message));
  const [call] = message.tool_calls;
  assert.match(call.id, /^call_/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'weather');
  checkJson(call.function.arguments, WEATHER);
  assert.deepEqual(r.spec.runahead.tokens, r.plain.runahead.tokens);
  assert.equal(r.spec.choices[0].message.tool_calls[0].function.arguments, call.function.arguments);

  const req = r.required.choices[0];
  assert.equal(req.finish_reason, 'tool_calls', JSON.stringify(req));
  assert.equal(req.message.tool_calls.length, 1, 'parallel_tool_calls: false makes one call');
  assert.ok(['weather', 'time'].includes(req.message.tool_calls[0].function.name));

  // Streamed: the role first, then the calls with their index, then the finish_reason.
  const deltas = r.chunks.map((c) => c.choices[0]);
  assert.equal(deltas[0].delta.role, 'assistant');
  const calls = deltas.flatMap((d) => d?.delta.tool_calls ?? []);
  assert.equal(calls.length, 1, JSON.stringify(deltas));
  assert.equal(calls[0].index, 0);
  assert.equal(calls[0].function.name, 'weather');
  assert.equal(calls[0].function.arguments, call.function.arguments);
  assert.equal(deltas.at(-1).finish_reason, 'tool_calls');
  assert.ok(!deltas.some((d) => d.delta.content), 'a call-only reply streams no content');

  const next = r.followUp.choices[0];
  assert.equal(next.message.tool_calls, undefined);
  assert.equal(typeof next.message.content, 'string');
  assert.ok(r.followUp.usage.prompt_tokens > r.plain.usage.prompt_tokens);

  assert.equal(r.badTool.code, 'invalid_option', JSON.stringify(r.badTool));
  assert.equal(r.badTool.param, 'tools', JSON.stringify(r.badTool));
  assert.equal(r.badChoice.code, 'invalid_option', JSON.stringify(r.badChoice));
  assert.equal(r.badChoice.param, 'tool_choice', JSON.stringify(r.badChoice));
  assert.equal(r.allowed.param, 'tool_choice', JSON.stringify(r.allowed));
  assert.equal(r.withGrammar.code, 'invalid_option', JSON.stringify(r.withGrammar));
  assert.equal(r.rawPrompt.code, 'invalid_option', JSON.stringify(r.rawPrompt));
  assert.equal(r.busy, false);
});
