// The OpenAI contract of `model.chat.completions.create` in Debian's headless Chromium, through
// the package and the engine on SmolLM2 (the CPU engine: SwiftShader's WebGPU is a fallback
// adapter): leaving a stream's loop at any chunk cancels and frees the engine; a signal and
// `stream.controller` cancel; errors reject create() itself when streaming; the usage chunk of
// `stream_options.include_usage`; OpenAI's message shapes, null and undefined fields; the fields
// runahead cannot honour refused by name; OpenAI's defaults (temperature 1, a fresh seed).
// tests/openai-types checks the same contract's types against the real `openai` package.
//
//   scripts/test.sh e2e      (builds pkg/wasm, runs npm ci, then the files here)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { chromiumFlags, serve } from './serve.mjs';

const MODEL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SLOW = 600_000;

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
    window.model = await Runahead.load(url, { context: 256 });
    window.ask = [{ role: 'user', content: 'Count from 1 to 50, separated by commas.' }];
    // What a failed call gives: the error's code, status, param and message.
    window.failure = async (f) => {
      try {
        await f();
        return { code: 'no error' };
      } catch (e) {
        return { code: e.code, status: e.status, param: e.param, message: e.message };
      }
    };
  }, `/${MODEL}`);
});

after(async () => {
  await browser?.close();
  server?.kill();
});

test('leaving the loop at any chunk cancels the generation and frees the engine', { timeout: SLOW }, async () => {
  const runs = await page.evaluate(async () => {
    const m = window.model;
    const out = [];
    for (const at of [0, 1, 3]) {
      const started = performance.now();
      const stream = await m.chat.completions.create({ messages: window.ask, stream: true, temperature: 0, max_tokens: 200 });
      let seen = 0;
      const objects = [];
      for await (const chunk of stream) {
        objects.push(chunk.object);
        if (seen++ === at) break;
      }
      const busyAfter = m.busy;
      // The next request right after the loop: not refused as busy.
      const next = await m.chat.completions.create({ messages: window.ask, temperature: 0, max_tokens: 1 });
      out.push({ at, seen, objects, busyAfter, next: next.choices[0].finish_reason, ms: performance.now() - started });
    }
    // The same loop over `generate`'s iterator.
    for await (const chunk of m.generate('Once upon a time', { maxTokens: 200 })) {
      void chunk;
      break;
    }
    const generateBusy = m.busy;
    // A full run of the same request, to compare the time a cancelled one took.
    const started = performance.now();
    const full = await m.chat.completions.create({ messages: window.ask, temperature: 0, max_tokens: 200 });
    return { out, generateBusy, fullMs: performance.now() - started, fullTokens: full.usage.completion_tokens };
  });
  assert.ok(runs.fullTokens > 20, JSON.stringify(runs));
  for (const run of runs.out) {
    assert.equal(run.seen, run.at + 1, JSON.stringify(run));
    assert.ok(run.objects.every((o) => o === 'chat.completion.chunk'), JSON.stringify(run));
    assert.equal(run.busyAfter, false, JSON.stringify(run));
    assert.equal(run.next, 'length', JSON.stringify(run));
    // Cancelled, not run on to max_tokens.
    assert.ok(run.ms < runs.fullMs, JSON.stringify(runs));
  }
  assert.equal(runs.generateBusy, false);
});

test('a signal and stream.controller cancel; an aborted request rejects', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const request = { messages: window.ask, temperature: 0, max_tokens: 200 };
    // The signal of create's options, mid-stream: the stream ends with the engine's reason.
    const viaSignal = new AbortController();
    const stream = await m.chat.completions.create({ ...request, stream: true }, { signal: viaSignal.signal });
    const chunks = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      if (chunks.length === 2) viaSignal.abort();
    }
    // stream.controller, mid-stream.
    const second = await m.chat.completions.create({ ...request, stream: true });
    const controllerChunks = [];
    for await (const chunk of second) {
      controllerChunks.push(chunk);
      if (controllerChunks.length === 2) second.controller.abort();
    }
    const summary = (cs) => ({
      last: cs.at(-1).choices[0]?.finish_reason,
      reason: cs.at(-1).runahead?.stop_reason,
      tokens: cs.at(-1).runahead?.stats.generated_tokens,
    });
    // Not streamed: aborted while it generates, create() rejects.
    const midway = new AbortController();
    setTimeout(() => midway.abort(), 50);
    const aborted = await window.failure(() => m.chat.completions.create(request, { signal: midway.signal }));
    const busyAfterAbort = m.busy;
    // Aborted before it starts (the signal as runahead's field too).
    const already = AbortSignal.abort();
    const before = await window.failure(() => m.chat.completions.create(request, { signal: already }));
    const beforeField = await window.failure(() => m.chat.completions.create({ ...request, stream: true, signal: already }));
    // Iterating a stream twice is an error, as with the SDK.
    const once = await m.chat.completions.create({ ...request, max_tokens: 1, stream: true });
    for await (const chunk of once) void chunk;
    let twice = 'no error';
    try {
      once[Symbol.asyncIterator]();
    } catch (e) {
      twice = e.code;
    }
    return {
      signal: summary(chunks),
      controller: summary(controllerChunks),
      hasController: second.controller instanceof AbortController,
      aborted,
      busyAfterAbort,
      before,
      beforeField,
      twice,
    };
  });
  for (const s of [r.signal, r.controller]) {
    assert.equal(s.last, 'stop', JSON.stringify(r));
    assert.equal(s.reason, 'cancelled', JSON.stringify(r));
    assert.ok(s.tokens < 200, JSON.stringify(r));
  }
  assert.ok(r.hasController);
  assert.equal(r.aborted.code, 'cancelled', JSON.stringify(r));
  assert.equal(r.aborted.status, undefined);
  assert.equal(r.busyAfterAbort, false);
  assert.equal(r.before.code, 'cancelled');
  assert.equal(r.beforeField.code, 'cancelled');
  assert.equal(r.twice, 'invalid_option');
});

test('request errors reject create() itself when streaming, with status and param', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const stream = (extra) => m.chat.completions.create({ messages: window.ask, stream: true, max_tokens: 2, ...extra });
    const out = {
      temperature: await window.failure(() => stream({ temperature: 5 })),
      draft: await window.failure(() => stream({ draft: 'bogus' })),
      stop: await window.failure(() => stream({ stop: [''] })),
      role: await window.failure(() => stream({ messages: [{ role: 'robot', content: 'hi' }] })),
      long: await window.failure(() => stream({ messages: [{ role: 'user', content: 'word '.repeat(400) }] })),
    };
    // A second request while a stream is open: busy.
    const open = await stream({ max_tokens: 50, temperature: 0 });
    out.busy = await window.failure(() => stream({}));
    for await (const chunk of open) {
      void chunk;
      break;
    }
    out.afterBusy = (await m.chat.completions.create({ messages: window.ask, max_tokens: 1 })).object;
    return out;
  });
  assert.deepEqual(r.temperature, { code: 'invalid_option', status: 400, param: 'temperature', message: r.temperature.message });
  assert.equal(r.draft.code, 'invalid_option');
  assert.equal(r.draft.param, 'draft');
  assert.equal(r.stop.code, 'invalid_option');
  assert.equal(r.stop.param, 'stop');
  assert.equal(r.role.code, 'invalid_messages');
  assert.equal(r.role.param, 'messages[0].role');
  assert.equal(r.long.code, 'prompt_too_long');
  assert.equal(r.long.status, 400);
  assert.equal(r.busy.code, 'busy');
  assert.equal(r.busy.status, 429);
  assert.equal(r.afterBusy, 'chat.completion');
});

test('include_usage sends the usage in a last chunk with no choices', { timeout: SLOW }, async () => {
  const chunks = await page.evaluate(async () => {
    const out = [];
    const stream = await window.model.chat.completions.create({
      messages: window.ask, stream: true, temperature: 0, max_tokens: 3, stream_options: { include_usage: true },
    });
    for await (const chunk of stream) out.push(chunk);
    const plain = [];
    for await (const chunk of await window.model.chat.completions.create({ messages: window.ask, stream: true, temperature: 0, max_tokens: 3 })) {
      plain.push(chunk);
    }
    return { out, plain };
  });
  const { out, plain } = chunks;
  const last = out.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 3);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 3);
  assert.ok(out.slice(0, -1).every((c) => c.usage === null && c.choices.length === 1), JSON.stringify(out));
  const finish = out.at(-2);
  assert.equal(finish.choices[0].finish_reason, 'length');
  assert.equal(finish.runahead.stop_reason, 'max_tokens');
  assert.deepEqual(out[0].choices[0].delta, { role: 'assistant', content: '', refusal: null });
  assert.ok(out.every((c) => c.choices.every((choice) => choice.logprobs === null)));
  // Without it: no usage field, and the finish chunk is the last.
  assert.ok(plain.every((c) => !('usage' in c)));
  assert.equal(plain.at(-1).choices[0].finish_reason, 'length');
  assert.equal(
    out.map((c) => c.choices[0]?.delta.content ?? '').join(''),
    plain.map((c) => c.choices[0].delta.content ?? '').join(''),
  );
});

test("OpenAI's message shapes, null and undefined fields are read as the plain conversation", { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const text = async (request) => {
      const c = await m.chat.completions.create({ temperature: 0, max_tokens: 4, ...request });
      return { text: c.choices[0].message.content, prompt: c.usage.prompt_tokens, message: c.choices[0].message, logprobs: c.choices[0].logprobs };
    };
    const plain = await text({
      messages: [{ role: 'system', content: 'Answer briefly.\nBe exact.' }, { role: 'user', content: 'What is the capital of France?' }],
    });
    const shaped = await text({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'developer', content: [{ type: 'text', text: 'Answer briefly.' }, { type: 'text', text: 'Be exact.' }] },
        { role: 'user', content: [{ type: 'text', text: 'What is the capital of France?' }], name: undefined },
      ],
      top_p: null,
      seed: undefined,
      stop: null,
      n: 1,
      user: 'user-1',
      store: false,
      metadata: { app: 'test' },
      service_tier: 'auto',
      parallel_tool_calls: false,
      frequency_penalty: 0,
      logprobs: false,
      response_format: { type: 'text' },
      tools: undefined,
      stream: false,
      stream_options: null,
    });
    // A tool call and its result go to the chat template (SmolLM2's renders the role as given).
    const tools = await text({
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ],
    });
    return { plain, shaped, tools };
  });
  assert.equal(r.shaped.text, r.plain.text);
  assert.equal(r.shaped.prompt, r.plain.prompt);
  assert.deepEqual(r.shaped.message, { role: 'assistant', content: r.plain.text, refusal: null });
  assert.equal(r.shaped.logprobs, null);
  assert.ok(r.tools.prompt > 20, JSON.stringify(r.tools));
});

test('fields runahead cannot honour, and values out of range, are refused by name', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const refused = {};
    const fields = {
      frequency_penalty: 2.5,
      presence_penalty: -3,
      logit_bias: { 42: 101 },
      logprobs: 'yes',
      top_logprobs: 2,
      n: 17,
      tools: [{ type: 'custom', custom: { name: 'f' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } },
      audio: { voice: 'alloy', format: 'wav' },
      modalities: ['text', 'audio'],
      reasoning_effort: 'high',
      temprature: 1,
    };
    for (const [field, value] of Object.entries(fields)) {
      for (const stream of [false, true]) {
        const e = await window.failure(() => m.chat.completions.create({ messages: window.ask, stream, [field]: value }));
        refused[`${field}${stream ? ' (stream)' : ''}`] = e;
      }
    }
    refused.image = await window.failure(() => m.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }],
    }));
    return { refused, busy: m.busy };
  });
  for (const [name, e] of Object.entries(r.refused)) {
    if (name === 'image') continue;
    const field = name.split(' ')[0];
    assert.equal(e.code, 'invalid_option', `${name}: ${JSON.stringify(e)}`);
    assert.equal(e.param, field, name);
    assert.equal(e.status, 400, name);
    assert.ok(e.message.startsWith(`${field}: `), `${name}: ${e.message}`);
  }
  assert.equal(r.refused.image.code, 'invalid_messages');
  assert.equal(r.refused.image.param, 'messages[0].content[0]');
  assert.equal(r.busy, false);
});

test('logprobs, penalties and logit_bias: OpenAI shapes, speculative equals plain', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const request = {
      messages: window.ask, temperature: 0, max_tokens: 40, logprobs: true, top_logprobs: 3,
      frequency_penalty: 1, presence_penalty: 0.5,
    };
    const plain = await m.chat.completions.create({ ...request, draft: 'none' });
    const speculative = await m.chat.completions.create({ ...request, draft: 'suffix' });
    const unpenalized = await m.chat.completions.create({ messages: window.ask, temperature: 0, max_tokens: 40 });
    // The most likely first token, banned.
    const first = plain.runahead.tokens[0];
    const banned = await m.chat.completions.create({ ...request, logit_bias: { [first]: -100 } });
    const streamed = async (body) => {
      const chunks = [];
      for await (const chunk of await m.chat.completions.create({ ...body, stream: true })) {
        const choice = chunk.choices[0];
        if (choice) chunks.push({ content: choice.delta.content, logprobs: choice.logprobs, finish: choice.finish_reason });
      }
      return chunks;
    };
    // A stop string: its tokens' text is held back, then dropped.
    const stop = { messages: window.ask, temperature: 0, max_tokens: 40, logprobs: true, top_logprobs: 3, stop: ['5. 5'] };
    const stopped = await m.chat.completions.create({ ...stop, draft: 'none' });
    const shape = (c) => ({
      content: c.choices[0].message.content,
      tokens: c.runahead.tokens,
      logprobs: c.choices[0].logprobs,
      completion: c.usage.completion_tokens,
      stop: c.runahead.stop_reason,
    });
    return {
      plain: shape(plain),
      speculative: shape(speculative),
      unpenalized: unpenalized.choices[0].message.content,
      first,
      banned: banned.runahead.tokens,
      streamed: await streamed({ ...request, draft: 'auto' }),
      stopped: stopped.choices[0].logprobs.content,
      stoppedContent: stopped.choices[0].message.content,
      stoppedReason: stopped.runahead.stop_reason,
      streamedStop: await streamed({ ...stop, draft: 'suffix' }),
    };
  });
  const { plain, speculative } = r;
  assert.deepEqual(speculative.tokens, plain.tokens);
  assert.notEqual(plain.content, r.unpenalized, 'the penalties change nothing: the comparison shows nothing');
  const content = plain.logprobs.content;
  assert.equal(plain.logprobs.refusal, null);
  assert.equal(content.length, plain.stop === 'end_of_text' ? plain.completion - 1 : plain.completion);
  assert.equal(content.map((e) => e.token).join(''), plain.content);
  for (const e of content) {
    assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob), JSON.stringify(e));
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 3);
    // Greedy: the token is the most likely one.
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
  }
  for (const [a, b] of speculative.logprobs.content.map((e, i) => [e, content[i]])) {
    assert.equal(a.token, b.token);
    assert.ok(Math.abs(a.logprob - b.logprob) < 1e-5, `${a.logprob} vs ${b.logprob}`);
  }
  assert.notEqual(r.banned[0], r.first);
  // Streamed: each content chunk carries the log-probabilities of the tokens it spells, and
  // the chunks' lists concatenated are the non-streamed list (speculative or not).
  checkStreamedLogprobs(r.streamed, content);
  assert.ok(r.streamed.filter((c) => c.content && c.logprobs !== null).length > 1);
  // With a stop string the stop's tokens come on the chunk with the finish_reason.
  assert.equal(r.stoppedReason, 'stop', r.stoppedContent);
  assert.ok(r.stopped.map((e) => e.token).join('').startsWith(`${r.stoppedContent}5. 5`));
  checkStreamedLogprobs(r.streamedStop, r.stopped);
  assert.equal(r.streamedStop.map((c) => c.content ?? '').join(''), r.stoppedContent);
  const last = r.streamedStop.at(-1);
  assert.ok(last.finish !== null && last.logprobs.content.length > 0, JSON.stringify(last));
});

// A stream's chunks against the non-streamed `logprobs.content` of the same request: the
// chunks' lists concatenated equal it (tokens, bytes; log-probabilities to float precision),
// and a content chunk's tokens spell its `delta.content` (every token's text is whole here:
// ASCII text).
function checkStreamedLogprobs(chunks, whole) {
  const joined = chunks.flatMap((c) => c.logprobs?.content ?? []);
  assert.deepEqual(joined.map((e) => e.token), whole.map((e) => e.token));
  assert.deepEqual(joined.map((e) => e.bytes), whole.map((e) => e.bytes));
  for (const [a, b] of joined.map((e, i) => [e, whole[i]])) {
    assert.ok(Math.abs(a.logprob - b.logprob) < 1e-5, `${a.logprob} vs ${b.logprob}`);
    assert.deepEqual(a.top_logprobs.map((t) => t.token), b.top_logprobs.map((t) => t.token));
  }
  for (const c of chunks) {
    if (!c.content) continue;
    assert.notEqual(c.logprobs, null, `a content chunk without logprobs: ${JSON.stringify(c)}`);
    assert.equal(c.logprobs.content.map((e) => e.token).join(''), c.content);
  }
}

test('n > 1: choices generated one after another with seeds seed, seed + 1, ...; not streamed', { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const request = { messages: [{ role: 'user', content: 'Write a word.' }], max_tokens: 6, seed: 5 };
    const three = await m.chat.completions.create({ ...request, n: 3 });
    const single = await m.chat.completions.create({ ...request, seed: 6 });
    const streamed = await window.failure(() => m.chat.completions.create({ ...request, n: 2, stream: true }));
    return {
      indices: three.choices.map((c) => c.index),
      contents: three.choices.map((c) => c.message.content),
      seeds: three.runahead.choices.map((c) => c.seed),
      completion: three.usage.completion_tokens,
      perChoice: three.runahead.choices.map((c) => c.stats.generated_tokens),
      single: single.choices[0].message.content,
      streamed,
    };
  });
  assert.deepEqual(r.indices, [0, 1, 2]);
  assert.deepEqual(r.seeds, [5, 6, 7]);
  assert.equal(r.contents[1], r.single);
  assert.equal(r.completion, r.perChoice.reduce((a, b) => a + b, 0));
  assert.equal(r.streamed.code, 'invalid_option');
  assert.equal(r.streamed.param, 'n');
});

test("OpenAI's defaults: temperature 1 and a fresh seed unless one is given; generate stays greedy", { timeout: SLOW }, async () => {
  const r = await page.evaluate(async () => {
    const m = window.model;
    const request = { messages: [{ role: 'user', content: 'Write a word.' }], max_tokens: 6 };
    const a = await m.chat.completions.create(request);
    const b = await m.chat.completions.create(request);
    const seeded = [];
    for (let i = 0; i < 2; i++) seeded.push((await m.chat.completions.create({ ...request, seed: 7 })).choices[0].message.content);
    const greedy = (await m.chat.completions.create({ ...request, temperature: 0 })).choices[0].message.content;
    const generated = [];
    for (let i = 0; i < 2; i++) generated.push((await m.chat(request.messages, { maxTokens: 6 }).result).text);
    return {
      seeds: [a.runahead.seed, b.runahead.seed],
      seeded,
      greedy,
      generated,
    };
  });
  assert.notEqual(r.seeds[0], r.seeds[1]);
  assert.equal(r.seeded[0], r.seeded[1]);
  // generate's defaults: greedy, so chat() gives the temperature-0 answer every time.
  assert.deepEqual(r.generated, [r.greedy, r.greedy]);
});
