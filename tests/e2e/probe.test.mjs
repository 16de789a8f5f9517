// Runahead.probe and the model cache's management in Debian's headless Chromium (WebGPU on
// SwiftShader), through the real package and engine: a probe answers from the GGUF header alone
// (a model server of this test counts the bytes it sends: at most the header and one read's
// step), on a supported model (SmolLM2: what the native CLI's `info` says, the backend and
// parameters a load then reports), a refused one (an unknown architecture, an unsupported
// tokenizer), a model past 4 GB (a header that claims 15 GB of F16 weights, served with zeros
// after it) and through a server without Range support (its stream cut off after the header);
// Runahead.cache lists, estimates, deletes and clears; a full quota (a `cache.put` that throws
// QuotaExceededError, or less storage left than the model's size) never fails a load: the model
// runs from the network copy and a `cache_skipped` event says why.
//
//   scripts/test.sh e2e      (builds the CLI and pkg/wasm, runs npm ci, then the files here)
//
// Environment: RUNAHEAD_BIN (native CLI, default target/debug/runahead), CHROMIUM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { chromiumFlags, root, serve } from './serve.mjs';

const runahead = process.env.RUNAHEAD_BIN ?? join(root, 'target/debug/runahead');
const SMOLLM = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SLOW = 240_000;
// What a probe may read past the header: one read's step (pkg/probe.js, MAX_STEP).
const STEP = 1 << 20;

// ---- GGUF files written here: a header, and the size its tensors claim ----

const ALIGNMENT = 32;
const TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 };
const GGML = { F32: { id: 0, block: 1, bytes: 4 }, F16: { id: 1, block: 1, bytes: 2 } };

function ggufHeader(meta, tensors) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
  const value = (type, v) => {
    if (type === 'u32') u32(v);
    else if (type === 'i32') { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); }
    else if (type === 'f32') { const b = Buffer.alloc(4); b.writeFloatLE(v); parts.push(b); }
    else if (type === 'bool') parts.push(Buffer.from([v ? 1 : 0]));
    else if (type === 'string') str(v);
  };
  parts.push(Buffer.from('GGUF'));
  u32(3);
  u64(tensors.length);
  u64(meta.length);
  for (const [key, type, v] of meta) {
    str(key);
    if (Array.isArray(type)) {
      u32(TYPE.array);
      u32(TYPE[type[0]]);
      u64(v.length);
      for (const x of v) value(type[0], x);
    } else {
      u32(TYPE[type]);
      value(type, v);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    const ty = GGML[t.type];
    const elements = t.shape.reduce((a, b) => a * b, 1);
    const size = (elements / ty.block) * ty.bytes;
    str(t.name);
    u32(t.shape.length);
    for (const d of t.shape) u64(d);
    u32(ty.id);
    u64(offset);
    offset += Math.ceil(size / ALIGNMENT) * ALIGNMENT;
  }
  let header = Buffer.concat(parts);
  const padded = Math.ceil(header.length / ALIGNMENT) * ALIGNMENT;
  header = Buffer.concat([header, Buffer.alloc(padded - header.length)]);
  return { header, size: header.length + offset };
}

// The byte-level vocabulary crates/model's tiny test models use.
function tinyVocab() {
  const tokens = ['<|im_start|>', '<|im_end|>'];
  const types = [3, 3];
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  let n = 0;
  for (let b = 0; b < 256; b++) {
    tokens.push(printable(b) ? String.fromCodePoint(b) : String.fromCodePoint(255 + ++n));
    types.push(1);
  }
  return { tokens, types, merges: [] };
}

// A llama-family model of the given shape, F16, with the tiny vocabulary (the token embedding
// may have more rows than tokens, as padded vocabularies do).
function llama({ arch = 'llama', layers, embd, ff, heads, kvHeads, rows, context = 4096, tokenizer = 'gpt2' }) {
  const { tokens, types, merges } = tinyVocab();
  const meta = [
    ['general.architecture', 'string', arch],
    ['general.name', 'string', `probe-${arch}-${layers}x${embd}`],
    [`${arch}.block_count`, 'u32', layers],
    [`${arch}.embedding_length`, 'u32', embd],
    [`${arch}.feed_forward_length`, 'u32', ff],
    [`${arch}.attention.head_count`, 'u32', heads],
    [`${arch}.attention.head_count_kv`, 'u32', kvHeads],
    [`${arch}.context_length`, 'u32', context],
    [`${arch}.attention.layer_norm_rms_epsilon`, 'f32', 1e-5],
    ['tokenizer.ggml.model', 'string', tokenizer],
    ['tokenizer.ggml.pre', 'string', 'smollm'],
    ['tokenizer.ggml.tokens', ['string'], tokens],
    ['tokenizer.ggml.merges', ['string'], merges],
    ['tokenizer.ggml.token_type', ['i32'], types],
    ['tokenizer.ggml.bos_token_id', 'u32', 0],
    ['tokenizer.ggml.eos_token_id', 'u32', 1],
  ];
  const kv = (embd / heads) * kvHeads;
  const m = (name, rowsOut, cols) => ({ name, shape: [cols, rowsOut], type: 'F16' });
  const v = (name, len) => ({ name, shape: [len], type: 'F32' });
  const tensors = [m('token_embd.weight', rows, embd)];
  for (let l = 0; l < layers; l++) {
    const n = (s) => `blk.${l}.${s}`;
    tensors.push(v(n('attn_norm.weight'), embd), m(n('attn_q.weight'), embd, embd),
      m(n('attn_k.weight'), kv, embd), m(n('attn_v.weight'), kv, embd),
      m(n('attn_output.weight'), embd, embd), v(n('ffn_norm.weight'), embd),
      m(n('ffn_gate.weight'), ff, embd), m(n('ffn_up.weight'), ff, embd), m(n('ffn_down.weight'), embd, ff));
  }
  tensors.push(v('output_norm.weight', embd));
  return ggufHeader(meta, tensors);
}

// ---- A model server: Range requests (or none), byte counts, files whose tail is zeros ----

function modelServer() {
  const files = new Map(); // path -> {header: Buffer, size}
  const sent = new Map();
  const requests = new Map();
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const ranges = !url.pathname.startsWith('/norange/');
    const path = url.pathname.replace(/^\/(norange|range)/, '');
    requests.set(url.pathname, [...(requests.get(url.pathname) ?? []), `${req.method} ${req.headers.range ?? ''}`]);
    const file = files.get(path);
    const cors = {
      'access-control-allow-origin': '*',
      'access-control-expose-headers': 'content-range, content-length, etag, last-modified',
    };
    if (!file) {
      res.writeHead(404, cors).end();
      return;
    }
    const headers = {
      ...cors,
      'content-type': 'application/octet-stream',
      'last-modified': file.modified,
      etag: `"${file.size}"`,
      ...(ranges ? { 'accept-ranges': 'bytes' } : {}),
    };
    let [start, end] = [0, file.size - 1];
    const range = ranges && /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range) {
      start = Number(range[1]);
      end = Math.min(range[2] === '' ? file.size - 1 : Number(range[2]), file.size - 1);
      if (start >= file.size) {
        res.writeHead(416, { ...headers, 'content-range': `bytes */${file.size}` }).end();
        return;
      }
      res.writeHead(206, { ...headers, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${file.size}` });
    } else {
      res.writeHead(200, { ...headers, 'content-length': file.size });
    }
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    // The file's bytes from `start`, 64 KiB at a time, as fast as the client takes them.
    let at = start;
    const count = (n) => sent.set(url.pathname, (sent.get(url.pathname) ?? 0) + n);
    const pump = () => {
      while (at <= end) {
        const n = Math.min(65536, end - at + 1);
        const chunk = Buffer.alloc(n);
        if (at < file.header.length) file.header.copy(chunk, 0, at, Math.min(file.header.length, at + n));
        at += n;
        count(n);
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    res.on('close', () => { at = end + 1; });
    pump();
  });
  server.add = (path, { header, size }) => files.set(path, { header, size, modified: new Date().toUTCString() });
  server.bytesSent = (path) => sent.get(path) ?? 0;
  server.requests = (path) => requests.get(path) ?? [];
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ models: `http://127.0.0.1:${server.address().port}`, server: server }));
  });
}

let site;
let models;
let browser;
let context;
let page;
let smollm; // {header: the whole file, size}
const pageLog = [];

before(async () => {
  site = await serve();
  const m = await modelServer();
  models = m.server;
  models.base = m.models;
  const bytes = await readFile(join(root, SMOLLM));
  smollm = { header: bytes, size: bytes.length };
  models.add('/smollm.gguf', smollm);
  models.add('/mamba.gguf', llama({ arch: 'mamba', layers: 2, embd: 64, ff: 128, heads: 4, kvHeads: 4, rows: 258 }));
  models.add('/bert-tokenizer.gguf', llama({ layers: 2, embd: 64, ff: 128, heads: 4, kvHeads: 4, rows: 258, tokenizer: 'bert' }));
  // 32 layers of width 4096 (FFN 14336, 8 KV heads) and a 128,256-row embedding, all F16: 15 GB.
  models.add('/large.gguf', llama({ layers: 32, embd: 4096, ff: 14336, heads: 32, kvHeads: 8, rows: 128256, context: 131072 }));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: await chromiumFlags(),
    headless: true,
  });
  context = await browser.newContext();
  page = await context.newPage();
  page.on('console', (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`pageerror: ${e.message}`));
  await page.goto(`${site.base}/pkg/README.md`);
});

after(async () => {
  await browser?.close();
  site?.server.kill();
  models?.closeAllConnections?.();
  models?.close();
  if (pageLog.length > 0) console.log(`page log:\n${pageLog.join('\n')}`);
});

// Runahead.probe in the page; a rejection comes back as `{error: {code, message}}`.
function probe(source, options = {}) {
  return page.evaluate(async ([source, options]) => {
    const { Runahead } = await import('/pkg/index.js');
    try {
      let input = source;
      if (source.blobOf) input = new Blob([await (await fetch(source.blobOf)).arrayBuffer()]);
      if (source.bytesOf) input = new Uint8Array(await (await fetch(source.bytesOf)).arrayBuffer());
      return await Runahead.probe(input, options);
    } catch (e) {
      return { error: { code: e.code, message: e.message } };
    }
  }, [source, options]);
}

test('a supported model: the header alone, what the CLI and a load say', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/smollm.gguf`;
  const p = await probe(url, { context: 512 });
  assert.equal(p.error, undefined, JSON.stringify(p.error));
  console.log(`SmolLM2 probe: header ${p.headerBytes} bytes, ${p.transferredBytes} transferred in ` +
    `${p.rangeRequests} range requests; backend ${p.backend} (${p.backendReason ?? ''}); fits ${p.fits}`);
  assert.equal(p.supported, true);
  assert.equal(p.architecture, 'llama');
  assert.equal(p.from, 'network');
  assert.equal(p.fileSize, smollm.size);
  assert.equal(p.shape.context, 512);
  // The engines' KV layout: keys and values of every layer, f16.
  assert.equal(p.shape.kvCacheBytes, 2 * p.shape.layers * 512 * p.shape.kvHeads * p.shape.headDim * 2);
  assert.ok(p.weightsBytes > 0.9 * smollm.size && p.weightsBytes < smollm.size, String(p.weightsBytes));
  assert.ok(p.largestTensor.bytes > 0 && p.largestTensor.name, JSON.stringify(p.largestTensor));
  // The header and at most one step past it, counted by the server.
  const sent = models.bytesSent('/range/smollm.gguf');
  assert.equal(sent, p.transferredBytes);
  assert.ok(sent <= p.headerBytes + STEP, `${sent} bytes sent for a header of ${p.headerBytes}`);
  assert.ok(sent < smollm.size / 10);
  // The adapter and its limits, the engine the loader's rule picks, and a fit there.
  assert.ok(p.adapter, p.adapterReason);
  assert.ok(p.adapter.limits.maxStorageBufferBindingSize > 0);
  assert.ok(p.adapter.limits.maxBufferSize > 0);
  assert.equal(p.fits, true, p.fitsReason);
  assert.equal(p.engines.cpu.fits, true);

  // The native CLI reads the same parameters and tensors from the whole file.
  const { stdout } = await promisify(execFile)(runahead, ['info', '--model', join(root, SMOLLM)]);
  const cli = /parameters\s+(\d+) in (\d+) tensors/.exec(stdout);
  assert.ok(cli, stdout);
  assert.equal(p.parameters, Number(cli[1]));
  assert.equal(p.tensorCount, Number(cli[2]));

  // A load takes the backend the probe named, and describes the same model.
  const loaded = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    const model = await Runahead.load(url, { context: 512, cache: false });
    const info = model.info();
    model.dispose();
    return info;
  }, url);
  assert.equal(loaded.backend, p.backend);
  assert.equal(loaded.parameters, p.parameters);
  assert.equal(loaded.context, p.shape.context);
  assert.equal(loaded.vocab, p.shape.vocab);
});

test('a File, bytes, and a server without Range support', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/smollm.gguf`;
  const reference = await probe(url, { cache: false });
  for (const source of [{ blobOf: url }, { bytesOf: url }]) {
    const p = await probe(source);
    assert.equal(p.error, undefined, JSON.stringify(p.error));
    assert.equal(p.from, source.blobOf ? 'file' : 'bytes');
    assert.equal(p.parameters, reference.parameters);
    assert.equal(p.fileSize, smollm.size);
    assert.ok(p.transferredBytes <= p.headerBytes + STEP);
  }
  // The server sends the whole file: the stream is read to the header's end, then cut off.
  const plain = `${models.base}/norange/smollm.gguf`;
  const p = await probe(plain);
  assert.equal(p.error, undefined, JSON.stringify(p.error));
  assert.equal(p.parameters, reference.parameters);
  assert.equal(p.fileSize, smollm.size);
  assert.ok(p.transferredBytes <= p.headerBytes + STEP, `${p.transferredBytes} read`);
  // Gone before the rest of the file: what the server wrote besides is the connection's buffers.
  await new Promise((r) => setTimeout(r, 500));
  const sent = models.bytesSent('/norange/smollm.gguf');
  console.log(`without Range: ${p.transferredBytes} bytes read, ${sent} sent of ${smollm.size}`);
  assert.ok(sent < smollm.size / 2, `${sent} of ${smollm.size} bytes sent`);
});

test('refused models say why; a file that is not GGUF is the error gguf', { timeout: SLOW }, async () => {
  const mamba = await probe(`${models.base}/range/mamba.gguf`);
  assert.equal(mamba.error, undefined, JSON.stringify(mamba.error));
  assert.equal(mamba.supported, false);
  assert.equal(mamba.fits, false);
  assert.equal(mamba.checks.architecture.supported, false);
  assert.match(mamba.reason, /mamba/);
  assert.match(mamba.fitsReason, /mamba/);
  assert.equal(mamba.checks.tokenizer.supported, true);
  // The header is in the first range's 64 KiB: one request.
  assert.equal(mamba.rangeRequests, 1);
  assert.equal(models.bytesSent('/range/mamba.gguf'), mamba.transferredBytes);
  assert.ok(mamba.transferredBytes < mamba.fileSize);

  const bert = await probe(`${models.base}/range/bert-tokenizer.gguf`);
  assert.equal(bert.supported, false);
  assert.equal(bert.checks.architecture.supported, true);
  assert.equal(bert.checks.tensors.supported, true);
  assert.equal(bert.checks.tokenizer.supported, false);
  assert.match(bert.reason, /bert/);
  // The loader refuses it for the same reason.
  const load = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    try {
      await Runahead.load(url, { cache: false, worker: false });
      return null;
    } catch (e) {
      return { code: e.code, message: e.message };
    }
  }, `${models.base}/range/bert-tokenizer.gguf`);
  assert.equal(load.code, 'unsupported_model');
  assert.match(load.message, /bert/);

  const notGguf = await probe(`${site.base}/pkg/README.md`);
  assert.equal(notGguf.error?.code, 'gguf', JSON.stringify(notGguf));
  const missing = await probe(`${models.base}/range/missing.gguf`);
  assert.equal(missing.error?.code, 'fetch', JSON.stringify(missing));
});

test('a model past 4 GB: the CPU engine in the page refuses it, a small binding or budget says so', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/large.gguf`;
  const p = await probe(url, { context: 4096 });
  assert.equal(p.error, undefined, JSON.stringify(p.error));
  console.log(`large: ${(p.fileSize / 1e9).toFixed(1)} GB, header ${p.headerBytes}, ${p.transferredBytes} ` +
    `transferred; backend ${p.backend}; fits ${p.fits}: ${p.fitsReason}`);
  assert.equal(p.supported, true, p.reason);
  assert.ok(p.fileSize > 2 ** 33, String(p.fileSize));
  assert.ok(p.parameters > 7e9, String(p.parameters));
  assert.equal(p.shape.kvCacheBytes, 2 * 32 * 4096 * 1024 * 2);
  assert.ok(models.bytesSent('/range/large.gguf') <= p.headerBytes + STEP);
  assert.equal(p.engines.cpu.fits, false);
  assert.match(p.engines.cpu.reason, /4 GiB/);
  // SwiftShader is a software adapter: `auto` takes the CPU engine, where the model does not fit.
  if (p.backend === 'cpu') {
    assert.equal(p.fits, false);
    assert.match(p.fitsReason, /4 GiB/);
  }
  // On WebGPU, the weights and KV cache against a budget; one layer's KV cache against a binding.
  const budget = await probe(url, { backend: 'webgpu', memoryBudget: 8e9 });
  assert.equal(budget.fits, false);
  assert.match(budget.fitsReason, /budget|binding|WebGPU|adapter/);
  const bindings = budget.adapter?.limits.maxStorageBufferBindingSize;
  if (bindings !== undefined && bindings < 131072 * 1024 * 2) {
    const long = await probe(url, { backend: 'webgpu', context: 131072 });
    assert.equal(long.fits, false);
    assert.match(long.fitsReason, /KV cache.*smaller context/);
  }
  // Without Range support, the stream of a 15 GB file stops after its header.
  const plain = await probe(`${models.base}/norange/large.gguf`);
  assert.equal(plain.parameters, p.parameters);
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(models.bytesSent('/norange/large.gguf') < 64 << 20, String(models.bytesSent('/norange/large.gguf')));
});

test('the model cache: list, probe from it, estimate, persist, delete, clear', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/smollm.gguf`;
  const out = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    await Runahead.cache.clear();
    const events = [];
    const model = await Runahead.load(url, { context: 64, onEvent: (e) => events.push(e) });
    model.dispose();
    const listed = await Runahead.cache.list();
    const estimate = await Runahead.cache.estimate();
    const persisted = await Runahead.cache.persist();
    const probed = await Runahead.probe(url);
    const deleted = await Runahead.cache.delete(url);
    const afterDelete = await Runahead.cache.list();
    const again = await Runahead.load(url, { context: 64 });
    again.dispose();
    const beforeClear = (await Runahead.cache.list()).length;
    const cleared = await Runahead.cache.clear();
    const afterClear = await Runahead.cache.list();
    return { events, listed, estimate, persisted, probed, deleted, afterDelete, beforeClear, cleared, afterClear };
  }, url);
  assert.ok(out.events.some((e) => e.type === 'cache_stored'), JSON.stringify(out.events));
  assert.equal(out.listed.length, 1);
  const [entry] = out.listed;
  assert.equal(entry.url, url);
  assert.equal(entry.size, smollm.size);
  assert.ok(entry.etag && entry.lastModified, JSON.stringify(entry));
  assert.ok(Date.now() - Date.parse(entry.storedAt) < SLOW, entry.storedAt);
  assert.ok(out.estimate.models >= smollm.size, JSON.stringify(out.estimate));
  assert.ok(out.estimate.usage >= smollm.size && out.estimate.quota > out.estimate.usage, JSON.stringify(out.estimate));
  assert.equal(out.estimate.available, out.estimate.quota - out.estimate.usage);
  assert.equal(typeof out.persisted, 'boolean');
  // A probe of a cached model reads the cached entry's first bytes: no model byte over the network.
  assert.equal(out.probed.from, 'cache');
  assert.equal(out.probed.supported, true);
  assert.ok(out.probed.transferredBytes <= out.probed.headerBytes + STEP);
  assert.equal(out.deleted, true);
  assert.deepEqual(out.afterDelete, []);
  assert.equal(out.beforeClear, 1);
  assert.equal(out.cleared, true);
  assert.deepEqual(out.afterClear, []);
});

test('a cache.put that throws QuotaExceededError: the model loads from the network, cache_skipped says why', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/smollm.gguf`;
  const out = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    await Runahead.cache.clear();
    const put = Cache.prototype.put;
    Cache.prototype.put = async () => {
      throw new DOMException('the quota is exceeded', 'QuotaExceededError');
    };
    try {
      const events = [];
      const model = await Runahead.load(url, { context: 64, worker: false, onEvent: (e) => events.push(e) });
      const generation = model.generate('The capital of France is', { maxTokens: 2, draft: 'none' });
      const { tokens } = await generation.result;
      model.dispose();
      return { events, from: model.loadedFrom, tokens, listed: await Runahead.cache.list() };
    } finally {
      Cache.prototype.put = put;
    }
  }, url);
  assert.equal(out.from, 'network');
  assert.equal(out.tokens.length, 2);
  const skipped = out.events.find((e) => e.type === 'cache_skipped');
  assert.ok(skipped, JSON.stringify(out.events));
  assert.equal(skipped.quota, true);
  assert.match(skipped.reason, /quota/);
  assert.deepEqual(out.listed, []);
});

test('storage left smaller than the model: no copy is made, the load goes on', { timeout: SLOW }, async () => {
  const url = `${models.base}/range/smollm.gguf`;
  const out = await page.evaluate(async (url) => {
    const { Runahead } = await import('/pkg/index.js');
    await Runahead.cache.clear();
    const estimate = StorageManager.prototype.estimate;
    const put = Cache.prototype.put;
    let puts = 0;
    StorageManager.prototype.estimate = async () => ({ usage: 1 << 20, quota: 9 << 20 });
    Cache.prototype.put = function (...args) {
      puts += 1;
      return put.apply(this, args);
    };
    try {
      const events = [];
      const model = await Runahead.load(url, { context: 64, worker: false, onEvent: (e) => events.push(e) });
      model.dispose();
      return { events, from: model.loadedFrom, puts, estimate: await Runahead.cache.estimate(), listed: await Runahead.cache.list() };
    } finally {
      StorageManager.prototype.estimate = estimate;
      Cache.prototype.put = put;
    }
  }, url);
  assert.equal(out.from, 'network');
  assert.equal(out.puts, 0);
  assert.deepEqual(out.estimate, { models: 0, persisted: out.estimate.persisted, usage: 1 << 20, quota: 9 << 20, available: 8 << 20 });
  const skipped = out.events.find((e) => e.type === 'cache_skipped');
  assert.ok(skipped, JSON.stringify(out.events));
  assert.equal(skipped.quota, true);
  assert.match(skipped.reason, /larger than the storage left to this origin \(8\.0 MiB of 9\.0 MiB\)/);
  assert.deepEqual(out.listed, []);
});
