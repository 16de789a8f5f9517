// The page half of scripts/browser-gpu-bench.sh: the npm package as it ships (pkg/index.js, its
// release wasm, the engine in its worker) on WebGPU, measured as the native `runahead bench`
// measures the same model: plain decoding on the native bench's prompts (greedy, the first once
// more beforehand as a warm-up, tokens over decoding seconds summed over the prompts), the
// prompt suites speculative against plain (per prompt: plain, each drafter, plain again; per
// suite the summed tokens over the summed decoding seconds), and the host cost of a forward
// (`engine.forwardCost` on the page's thread, 1 row and the verification block). It reads its
// configuration from the server (bench/browser/gpu-page.py) and posts the result, or the error,
// back to it: no test driver, so a machine with Chromium and python3 alone runs it.

const post = (what, body) =>
  fetch(`/__bench/${what}`, { method: 'POST', body: JSON.stringify(body) }).catch(() => {});
const log = (msg) => post('log', { msg });
const fail = (e) => post('error', { message: String(e?.stack ?? e?.message ?? e) });
addEventListener('error', (e) => fail(e.error ?? e.message));
addEventListener('unhandledrejection', (e) => fail(e.reason));

/** What the page's own adapter says it is: a SwiftShader (or other CPU) fallback shows here. */
async function adapterInfo() {
  if (!navigator.gpu) return { available: false };
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return { available: false };
  const i = adapter.info ?? {};
  const info = {
    available: true,
    vendor: i.vendor ?? '',
    architecture: i.architecture ?? '',
    device: i.device ?? '',
    description: i.description ?? '',
    isFallbackAdapter: i.isFallbackAdapter ?? adapter.isFallbackAdapter ?? null,
    features: [...adapter.features].sort(),
    maxBufferSize: adapter.limits.maxBufferSize,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
  };
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`;
  info.software = info.isFallbackAdapter === true || /swiftshader|llvmpipe|lavapipe|software/i.test(text);
  return info;
}

/** Generated tokens over decoding seconds of a list of runs' stats, as the native Stats sums. */
function total(stats) {
  const tokens = stats.reduce((a, s) => a + s.generated_tokens, 0);
  const seconds = stats.reduce((a, s) => a + s.decode_seconds, 0);
  return { tokens, seconds, tokensPerSecond: seconds > 0 ? tokens / seconds : 0 };
}

async function run(cfg) {
  const out = { userAgent: navigator.userAgent, crossOriginIsolated: globalThis.crossOriginIsolated === true };
  out.adapter = await adapterInfo();
  log(`adapter: ${JSON.stringify(out.adapter)}`);
  const { Runahead } = await import('/pkg/index.js');
  let t0 = performance.now();
  const model = await Runahead.load(cfg.model, {
    backend: 'webgpu', history: false, cache: false, ...(cfg.draft ? { draft: cfg.draft } : {}),
  });
  out.loadSeconds = (performance.now() - t0) / 1000;
  out.info = model.info();
  log(`loaded ${cfg.model} in ${out.loadSeconds.toFixed(1)} s on ${out.info.backend}`);
  const gen = async (input, draft) => {
    await model.clearHistory();
    return model.generate(input, { maxTokens: cfg.tokens, draft }).result;
  };

  // Plain decoding on the native bench's prompts, completions without a chat template.
  await model.generate(cfg.plainPrompts[0], { maxTokens: 2, draft: 'none' }).result;
  const plain = [];
  for (const prompt of cfg.plainPrompts) plain.push((await gen(prompt, 'none')).stats);
  out.plain = { prompts: cfg.plainPrompts.length, ...total(plain) };
  log(`plain: ${out.plain.tokensPerSecond.toFixed(2)} tok/s`);

  // The suites, speculative against plain.
  out.suites = [];
  for (const suite of cfg.suites) {
    const plainStats = [];
    const spec = Object.fromEntries(cfg.drafters.map((d) => [d, { stats: [], identical: true, accepted: 0, drafted: 0 }]));
    for (const p of suite.prompts) {
      const input = p.chat ? [{ role: 'user', content: p.text }] : p.text;
      const want = await gen(input, 'none');
      plainStats.push(want.stats);
      for (const d of cfg.drafters) {
        const got = await gen(input, d);
        spec[d].stats.push(got.stats);
        spec[d].accepted += got.stats.accepted ?? 0;
        spec[d].drafted += got.stats.drafted ?? 0;
        if (JSON.stringify(got.tokens) !== JSON.stringify(want.tokens)) spec[d].identical = false;
      }
      plainStats.push((await gen(input, 'none')).stats);
    }
    const p = total(plainStats);
    const rows = cfg.drafters.map((d) => {
      const s = total(spec[d].stats);
      return {
        drafter: d,
        plainTps: p.tokensPerSecond,
        specTps: s.tokensPerSecond,
        speedup: s.tokensPerSecond / Math.max(p.tokensPerSecond, 1e-12),
        acceptance: spec[d].drafted > 0 ? spec[d].accepted / spec[d].drafted : 0,
        identicalText: spec[d].identical,
      };
    });
    out.suites.push({ suite: suite.name, prompts: suite.prompts.length, rows });
    log(`${suite.name}: ${rows.map((r) => `${r.drafter} ${r.speedup.toFixed(2)}x`).join(', ')}`);
  }
  model.dispose();

  // Host cost per forward, the engine on the page's thread (no worker hop in the timing).
  const { loadEngine } = await import('/pkg/core.js');
  t0 = performance.now();
  const { engine } = await loadEngine(cfg.model, { backend: 'webgpu', history: false, cache: false });
  try {
    out.forwardCost = await engine.forwardCost(cfg.costPrompt, { rows: [1, cfg.verify], reps: cfg.reps });
  } finally {
    engine.free();
  }
  log(`forward cost measured in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return out;
}

try {
  const cfg = await (await fetch('/__bench/config')).json();
  await post('result', await run(cfg));
} catch (e) {
  await fail(e);
}
