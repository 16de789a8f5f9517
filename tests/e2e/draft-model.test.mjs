// A draft model in the page, through the package in Debian's headless Chromium (SwiftShader's
// WebGPU is a software fallback adapter, so `backend: 'auto'` puts both models on the CPU
// engine): SmolLM2 loaded as its own draft model. A model drafting for itself predicts the
// target's every greedy token, so `draft: 'model'` gives the plain tokens with every drafted
// token accepted; `auto` drafts with it too; a follow-up chat turn reuses the cache; info()
// describes the draft. A draft of another tokenizer (Qwen2.5's) is `draft_mismatch`, and
// `draft: 'model'` without a draft model is `invalid_option`. In the worker (the default) and
// on the page's thread (`worker: false`), from a URL, from bytes and from a Blob; and on WebGPU
// (asked for by name), where the draft's weights stream onto the target's device.
//
//   scripts/test.sh e2e      (builds pkg/wasm, runs npm ci, then the files here)
//   RUNAHEAD_BIN=$PWD/target/debug/runahead node --test tests/e2e/draft-model.test.mjs
//
// Environment: CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { chromiumFlags, serve } from './serve.mjs';

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const OTHER = '/models/Qwen2.5-Coder-0.5B-Instruct.gguf';
const PROMPT = 'The capital of France is';
const MAX_TOKENS = 10;
const SLOW = 600_000;

let server;
let browser;
let page;
const pageLog = [];

before(async () => {
  let base;
  ({ base, server } = await serve());
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  page = await browser.newPage();
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/pkg/README.md`);
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

// Runs `none`, `model` and `auto` on PROMPT in the page on `window.model`; returns each
// run's tokens and statistics, and the streamed fromDraft flags of `model`.
async function runDrafters(maxTokens) {
  return page.evaluate(async ({ prompt, maxTokens }) => {
    const runs = {};
    // auto first: the suffix index has no earlier answer to this prompt yet, so auto has
    // reason to ask the draft model.
    for (const draft of ['auto', 'none', 'model']) {
      const generation = window.model.generate(prompt, { maxTokens, draft, depth: 4, temperature: 0 });
      let fromDraft = 0;
      for await (const chunk of generation) fromDraft += chunk.fromDraft ? 1 : 0;
      const { tokens, stats } = await generation.result;
      runs[draft] = { tokens, stats, fromDraft };
    }
    return runs;
  }, { prompt: PROMPT, maxTokens });
}

function checkRuns(label, runs) {
  const plain = runs.none;
  assert.equal(plain.tokens.length, MAX_TOKENS, JSON.stringify(plain.stats));
  for (const draft of ['model', 'auto']) {
    assert.deepEqual(runs[draft].tokens, plain.tokens, `${draft}: speculative = plain`);
    assert.equal(runs[draft].stats.draft, draft);
  }
  const model = runs.model.stats;
  assert.ok(model.drafted > 0, `the draft model drafted: ${JSON.stringify(model)}`);
  assert.equal(model.accepted, model.drafted, `a model drafting for itself is exact: ${JSON.stringify(model)}`);
  assert.equal(runs.model.fromDraft, model.accepted, 'streamed fromDraft flags = accepted');
  assert.ok(model.target_forwards < plain.stats.target_forwards);
  assert.deepEqual(model.drafters.map((d) => d.name), ['model']);
  const auto = runs.auto.stats;
  assert.ok(auto.drafters.some((d) => d.name === 'model' && d.drafted > 0),
    `auto drafted with the draft model: ${JSON.stringify(auto.drafters)}`);
  assert.ok(auto.accepted > 0, JSON.stringify(auto));
  const forwards = (r) => `${r.stats.target_forwards} forwards`;
  console.log(`${label}: plain ${forwards(plain)}; model ${model.accepted}/${model.drafted} accepted, ` +
    `${forwards(runs.model)}; auto ${auto.accepted}/${auto.drafted} accepted (${auto.drafters
      .map((d) => `${d.name} ${d.accepted}/${d.drafted}`).join(', ')}), ${forwards(runs.auto)}`);
}

test('in the worker: SmolLM2 drafting for itself from a URL has every draft accepted, and auto uses it',
  { timeout: SLOW }, async () => {
    const loaded = await page.evaluate(async (url) => {
      const { Runahead } = await import('/pkg/index.js');
      const progress = [];
      const events = [];
      window.model = await Runahead.load(url, {
        draft: url,
        context: 256,
        history: false,
        onProgress: ({ phase, model }) => {
          const last = progress.at(-1);
          if (last?.phase !== phase || last?.model !== model) progress.push({ phase, model });
        },
        onEvent: (e) => events.push(e),
      });
      return { info: window.model.info(), inWorker: window.model.inWorker, progress, events };
    }, MODEL);
    assert.equal(loaded.inWorker, true);
    const { info } = loaded;
    assert.equal(info.backend, 'cpu');
    assert.equal(info.draft?.name, info.name, JSON.stringify(info.draft));
    assert.equal(info.draft.parameters, info.parameters);
    assert.equal(info.draft.architecture, 'llama');
    assert.equal(info.draft.context, info.context);
    // Both models' bytes, the target's first, each phase saying which model it is about.
    const phases = loaded.progress.map(({ phase, model }) => `${phase}:${model ?? '-'}`);
    const draftStart = phases.findIndex((p) => p.endsWith(':draft'));
    assert.ok(draftStart > 0, phases.join(' '));
    assert.ok(phases.slice(0, draftStart).includes('upload:target'), phases.join(' '));
    assert.deepEqual(phases.slice(draftStart).map((p) => p.split(':')[1]), phases.slice(draftStart).map(() => 'draft'));
    assert.equal(phases.at(-1), 'upload:draft', phases.join(' '));
    for (const e of loaded.events.filter((e) => e.type.startsWith('cache_'))) {
      assert.ok(e.model === 'target' || e.model === 'draft', JSON.stringify(e));
    }

    checkRuns('worker', await runDrafters(MAX_TOKENS));

    // A two-turn chat with the draft model: the second turn reuses the first's cache (the
    // target's and the draft model's) and still has every draft accepted.
    const turns = await page.evaluate(async () => {
      const messages = [{ role: 'user', content: 'Name a color.' }];
      const out = [];
      for (const next of ['And another?', null]) {
        const c = await window.model.chat.completions.create({ messages, max_tokens: 6, draft: 'model', depth: 4 });
        out.push(c.runahead.stats);
        if (next) messages.push({ role: 'assistant', content: c.choices[0].message.content }, { role: 'user', content: next });
      }
      window.model.dispose();
      return out;
    });
    const [, second] = turns;
    console.log(`chat with the draft model: ${turns.map((s) => `${s.cached_tokens} cached, ` +
      `${s.accepted}/${s.drafted} accepted`).join('; ')}`);
    assert.ok(second.cached_tokens > 0, JSON.stringify(second));
    for (const stats of turns) {
      assert.ok(stats.drafted > 0, JSON.stringify(stats));
      assert.equal(stats.accepted, stats.drafted, JSON.stringify(stats));
    }
  });

test('on the page: the target from bytes, the draft from a Blob; the same tokens, every draft accepted',
  { timeout: SLOW }, async () => {
    const loaded = await page.evaluate(async (url) => {
      const { Runahead } = await import('/pkg/index.js');
      const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
      window.model = await Runahead.load(bytes, {
        draft: new Blob([bytes]),
        worker: false,
        context: 256,
        history: false,
      });
      return { info: window.model.info(), inWorker: window.model.inWorker };
    }, MODEL);
    assert.equal(loaded.inWorker, false);
    assert.equal(loaded.info.draft?.parameters, loaded.info.parameters);
    checkRuns('page', await runDrafters(MAX_TOKENS));
    await page.evaluate(() => window.model.dispose());
  });

test('on WebGPU: the draft model streams onto the target\'s device; the same tokens, every draft accepted',
  { timeout: SLOW }, async () => {
    const loaded = await page.evaluate(async (url) => {
      const { Runahead } = await import('/pkg/index.js');
      window.model = await Runahead.load(url, { draft: url, backend: 'webgpu', context: 256, history: false });
      return { info: window.model.info() };
    }, MODEL);
    assert.equal(loaded.info.backend, 'webgpu');
    assert.equal(loaded.info.draft?.parameters, loaded.info.parameters);
    checkRuns('webgpu', await runDrafters(MAX_TOKENS));
    await page.evaluate(() => window.model.dispose());
  });

test("draft 'model' without a draft model is invalid_option; another tokenizer is draft_mismatch",
  { timeout: SLOW }, async () => {
    const outcome = await page.evaluate(async ({ url, other }) => {
      const { Runahead, RunaheadError } = await import('/pkg/index.js');
      const codeOf = async (promise) => {
        try {
          await promise;
          return { code: 'no error' };
        } catch (e) {
          return { code: `${e instanceof RunaheadError} ${e.code}`, message: e.message };
        }
      };
      const out = {};
      for (const worker of [false, true]) {
        const model = await Runahead.load(url, { worker, context: 64, history: false });
        out[`model without a draft (worker ${worker})`] =
          await codeOf(model.generate('Hi', { maxTokens: 2, draft: 'model' }).result);
        // The model still generates.
        out[`plain after (worker ${worker})`] = await codeOf(model.generate('Hi', { maxTokens: 1 }).result);
        model.dispose();
      }
      // SmolLM2's 49152 tokens against Qwen2.5's 151936 (not cached: it is read once).
      out.mismatch = await codeOf(Runahead.load(url, { worker: false, draft: other, cache: false, context: 64 }));
      out.source = await codeOf(Runahead.load(url, { worker: false, draft: 42 }));
      return out;
    }, { url: MODEL, other: OTHER });
    for (const worker of [false, true]) {
      const refused = outcome[`model without a draft (worker ${worker})`];
      assert.equal(refused.code, 'true invalid_option', JSON.stringify(refused));
      assert.match(refused.message, /needs a draft model/);
      assert.equal(outcome[`plain after (worker ${worker})`].code, 'no error');
    }
    assert.equal(outcome.mismatch.code, 'true draft_mismatch', JSON.stringify(outcome.mismatch));
    assert.match(outcome.mismatch.message, /vocabulary/);
    assert.equal(outcome.source.code, 'true invalid_source', JSON.stringify(outcome.source));
  });

test("an AbortSignal stops the load in the draft model's phases", { timeout: SLOW }, async () => {
  const outcome = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    const abortIn = async (phase, worker) => {
      const stop = new AbortController();
      const seen = [];
      try {
        await Runahead.load(url, {
          draft: url,
          context: 64,
          worker,
          history: false,
          signal: stop.signal,
          onProgress: (p) => {
            if (p.model === 'draft' && p.phase === phase) {
              seen.push(p.phase);
              stop.abort();
            }
          },
        });
        return 'loaded';
      } catch (e) {
        return `${e.code} after ${seen[0]}`;
      }
    };
    const out = {};
    for (const worker of [true, false]) {
      // The target's bytes are in the cache by now: the draft's come from there too.
      out[`cache (worker ${worker})`] = await abortIn('cache', worker);
      out[`upload (worker ${worker})`] = await abortIn('upload', worker);
    }
    return out;
  }, MODEL);
  for (const [phase, result] of Object.entries(outcome)) {
    assert.equal(result, `cancelled after ${phase.split(' ')[0]}`, phase);
  }
});
