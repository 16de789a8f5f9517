//! The CPU engine: a [`LanguageModel`] over a GGUF file's own bytes.

use std::sync::Arc;

use runahead_gguf::{dequantize_row, GgufFile};
use runahead_model::{
    argmax_rows_of, gelu_tanh, ring_parts, Activation, Batch, LanguageModel, Logits, ModelConfig,
    ModelError, Result, RingLimits, Rope, TopLogits,
};

use crate::activations::{Activations, QuantizedBuffers};
use crate::attention::{Attention, AttentionScratch};
use crate::error::CpuError;
use crate::kernels::{Isa, Kernels};
use crate::kv_cache::KvCache;
use crate::matmul::{matmul_gated, matmul_many, Matrix};
use crate::ops::{add_bias, add_in_place, rms_norm};
use crate::pool::{with_team, Team};
use crate::weights::{self, Weights};
use runahead_model::weights::{GateUp, Qkv};

/// How to run a model.
#[derive(Clone, Debug, Default)]
pub struct CpuOptions {
    /// KV cache size in tokens (and the positions a forward may use); `None`: the model's
    /// trained context length.
    pub context: Option<usize>,
    /// Threads per forward; `None`: the machine's available parallelism.
    pub threads: Option<usize>,
    /// Instruction set of the kernels; `None`: the best this machine has (see
    /// [`crate::kernels::KERNELS_ENV`] to force the portable ones).
    pub isa: Option<Isa>,
}

/// The engine for one model.
pub struct CpuEngine {
    file: Arc<GgufFile>,
    config: ModelConfig,
    weights: Weights,
    /// Per layer.
    ropes: Vec<Rope>,
    cache: KvCache,
    /// What the sliding-window layers' rings still hold.
    rings: RingLimits,
    kernels: Kernels,
    threads: usize,
    buffers: Buffers,
}

/// Arrays a forward reuses from the one before (allocated and zeroed per layer they were 3% of
/// an 8-row forward).
#[derive(Default)]
struct Buffers {
    q: Vec<f32>,       // [n, q_dim]
    qkv: Vec<f32>,     // [n, q_dim + 2 kv_dim], a fused projection's output
    k: Vec<f32>,       // [n, kv_dim]
    v: Vec<f32>,       // [n, kv_dim]
    o: Vec<f32>,       // [rows, n_embd]
    gate: Vec<f32>,    // [rows, n_ff]
    gate_up: Vec<f32>, // [rows, 2 n_ff], a fused projection's output
    up: Vec<f32>,      // [rows, n_ff]
    down: Vec<f32>,    // [rows, n_embd]
    logits: Vec<f32>,  // [outputs, vocab]
    attention: AttentionScratch,
    quantized: QuantizedBuffers,
}

/// The first `len` values of `v` (grown if needed), holding whatever they held: for products'
/// outputs, which write every value.
fn reuse(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if v.len() < len {
        v.resize(len, 0.0);
    }
    &mut v[..len]
}

/// The products `jobs` of `input` (`[n, cols]`), its quantized forms in `buffers`' arrays.
fn products(
    kernels: Kernels,
    team: &Team,
    jobs: &mut [(Matrix, &mut [f32])],
    input: &[f32],
    cols: usize,
    buffers: &mut QuantizedBuffers,
) {
    as_input(input, cols, buffers, |x| {
        matmul_many(kernels, team, jobs, x)
    });
}

/// `run` with `input` (`[n, cols]`) as a product's input, its quantized forms made in
/// `buffers`' arrays (kept for the next input).
fn as_input(
    input: &[f32],
    cols: usize,
    buffers: &mut QuantizedBuffers,
    run: impl FnOnce(&mut Activations),
) {
    let mut x = Activations::reusing(input, cols, std::mem::take(buffers));
    run(&mut x);
    *buffers = x.into_buffers();
}

/// The default thread count: every core the process may use.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl CpuEngine {
    /// Prepares `file`'s model; its matrices are read from the file's bytes at every forward.
    pub fn load(file: Arc<GgufFile>, options: &CpuOptions) -> Result<Self> {
        let mut weights = weights::load(&file)?;
        let config = weights.plan.config.clone();
        let capacity = options
            .context
            .unwrap_or(config.context_length)
            .min(config.context_length);
        if capacity == 0 {
            return Err(ModelError::Config("context size must be at least 1".into()));
        }
        let threads = options.threads.unwrap_or_else(default_threads);
        if threads == 0 {
            return Err(CpuError::Option("threads must be at least 1".into()).into());
        }
        let kernels = match options.isa {
            None => Kernels::best(),
            Some(isa) => Kernels::new(isa).ok_or(CpuError::KernelsUnavailable(isa.name()))?,
        };
        weights::pack(&mut weights, &file, kernels);
        let factors = (weights.rope_factors.as_ref()).map(|(a, b)| (a.as_slice(), b.as_deref()));
        let ropes = weights.plan.ropes(capacity, factors);
        Ok(CpuEngine {
            ropes,
            cache: KvCache::new(
                weights.plan.rings(capacity),
                capacity,
                config.n_kv_heads,
                config.head_dim,
            ),
            rings: RingLimits::new(&weights.plan, capacity),
            file,
            config,
            weights,
            kernels,
            threads,
            buffers: Buffers {
                attention: AttentionScratch::for_threads(threads),
                ..Buffers::default()
            },
        })
    }

    pub fn isa(&self) -> Isa {
        self.kernels.isa()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Bytes the KV cache takes now (it grows on demand, up to its capacity in full layers
    /// and its ring in sliding-window layers that keep one).
    pub fn kv_cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Runs `batch` and appends its cache entries; its logits (`[outputs, vocab]`) are the
    /// first values of `buffers.logits`, how many returned. A causal block longer than a ring
    /// takes runs in parts (see [`ring_parts`]).
    fn forward_in_place(&mut self, batch: &Batch) -> Result<usize> {
        batch.validate(self.config.vocab_size, self.cache.len, self.cache.capacity)?;
        self.rings.check(batch)?;
        let Some(parts) = ring_parts(batch, &self.rings) else {
            return self.forward_block(batch);
        };
        let base = self.cache.len;
        let mut logits = Vec::new();
        for (_, part) in &parts {
            match self.forward_block(part) {
                Ok(len) => logits.extend_from_slice(&self.buffers.logits[..len]),
                Err(e) => {
                    // No half-written block: back to where it started, or empty where the
                    // parts run replaced what that needs.
                    self.truncate(base);
                    return Err(e);
                }
            }
        }
        let len = logits.len();
        self.buffers.logits = logits;
        Ok(len)
    }

    /// [`CpuEngine::forward_in_place`] of a block the rings take whole.
    fn forward_block(&mut self, batch: &Batch) -> Result<usize> {
        // Recorded first: a forward that fails has written its rows all the same.
        self.rings.wrote(self.cache.len + batch.len());
        let len = with_team(self.threads, |team| self.run(batch, team))?;
        self.cache.len += batch.len();
        Ok(len)
    }

    /// The forward of `batch` over the cache: its logits into `buffers.logits` (how many
    /// values returned), reused from forward to forward (a fresh 3 MB for 16 rows of a 49,152
    /// vocabulary was page-faulted in and unmapped again at every verification).
    fn run(&mut self, batch: &Batch, team: &Team) -> Result<usize> {
        let c = &self.config;
        let (n, d, kv_dim, qd) = (batch.len(), c.n_embd, c.kv_dim(), c.q_dim());
        let base = self.cache.len;
        self.cache.reserve(base + n);
        let visible = batch.visibility();
        let (file, w, k) = (&*self.file, &self.weights, self.kernels);
        let plan = &w.plan;

        // x: [n, n_embd], the residual stream.
        let mut x = vec![0f32; n * d];
        let embd = &w.token_embd;
        let embd_bytes = file.tensor_bytes(embd.info());
        for (row, &t) in x.chunks_exact_mut(d).zip(&batch.tokens) {
            dequantize_row(embd.format.ggml_type(), embd_bytes, d, t as usize, row)?;
        }
        if let Some(scale) = plan.embd_scale {
            x.iter_mut().for_each(|v| *v *= scale);
        }

        let b = &mut self.buffers;
        let mut angles: Vec<Vec<(f32, f32)>> = Vec::new();
        for (l, lw) in w.layers.iter().enumerate() {
            // Layers with the same RoPE share its angles.
            let rope = &self.ropes[l];
            if l == 0 || self.ropes[l - 1] != *rope {
                angles = batch.positions.iter().map(|&p| rope.angles(p)).collect();
            }
            let h = rms_norm(&x, &lw.attn_norm, c.rms_eps);
            let q = reuse(&mut b.q, n * qd);
            let kk = reuse(&mut b.k, n * kv_dim);
            let v = reuse(&mut b.v, n * kv_dim);
            match &lw.qkv {
                Qkv::Separate {
                    q: wq,
                    k: wk,
                    v: wv,
                } => products(
                    k,
                    team,
                    &mut [
                        (wq.view(file), &mut *q),
                        (wk.view(file), &mut *kk),
                        (wv.view(file), &mut *v),
                    ],
                    &h,
                    d,
                    &mut b.quantized,
                ),
                Qkv::Fused(wqkv) => {
                    let fused = reuse(&mut b.qkv, n * (qd + 2 * kv_dim));
                    let jobs = &mut [(wqkv.view(file), &mut *fused)];
                    products(k, team, jobs, &h, d, &mut b.quantized);
                    let rows = fused.chunks_exact(qd + 2 * kv_dim);
                    let outs = q.chunks_exact_mut(qd).zip(kk.chunks_exact_mut(kv_dim));
                    for ((row, (qr, kr)), vr) in rows.zip(outs).zip(v.chunks_exact_mut(kv_dim)) {
                        qr.copy_from_slice(&row[..qd]);
                        kr.copy_from_slice(&row[qd..qd + kv_dim]);
                        vr.copy_from_slice(&row[qd + kv_dim..]);
                    }
                }
            }
            if let Some(bias) = &lw.qkv_bias {
                add_bias(q, &bias.q);
                add_bias(kk, &bias.k);
                add_bias(v, &bias.v);
            }
            if let Some((qn, kn)) = &lw.qk_norm {
                q.copy_from_slice(&rms_norm(q, qn, c.rms_eps));
                kk.copy_from_slice(&rms_norm(kk, kn, c.rms_eps));
            }
            for (i, a) in angles.iter().enumerate() {
                rope.apply(&mut q[i * qd..(i + 1) * qd], a);
                rope.apply(&mut kk[i * kv_dim..(i + 1) * kv_dim], a);
            }
            self.cache.write(l, base, kk, v);
            let mut attn = Attention {
                kernels: k,
                q,
                k: &self.cache.k[l],
                v: &self.cache.v[l],
                head_stride: self.cache.head_stride(l),
                slots: self.cache.layer_slots(l),
                visible: &visible,
                base,
                n,
                n_heads: c.n_heads,
                n_kv_heads: c.n_kv_heads,
                head_dim: c.head_dim,
                positions: &batch.positions,
                window: plan.layers[l].attention.window,
                scale: plan.layers[l].attention.scale,
            }
            .run(team, &b.attention);
            // What the last layer computes after attention serves only the logits: rows whose
            // logits nobody asked for (a prompt's tokens before its last) stop here, their
            // cache entries written.
            let skip = batch.first_output;
            if l + 1 == w.layers.len() && skip > 0 {
                if skip == n {
                    return Ok(0);
                }
                attn.drain(..skip * qd);
                x.drain(..skip * d);
            }
            let rows = x.len() / d;
            let o = reuse(&mut b.o, rows * d);
            products(
                k,
                team,
                &mut [(lw.wo.view(file), &mut *o)],
                &attn,
                qd,
                &mut b.quantized,
            );
            if let Some((post_attn, _)) = &lw.post_norms {
                o.copy_from_slice(&rms_norm(o, post_attn, c.rms_eps));
            }
            add_in_place(&mut x, o);

            let h = rms_norm(&x, &lw.ffn_norm, c.rms_eps);
            let ff = c.n_ff;
            let gate = reuse(&mut b.gate, rows * ff);
            let up = reuse(&mut b.up, rows * ff);
            match (&lw.gate_up, plan.activation) {
                (GateUp::Separate { gate: wg, up: wu }, Activation::Silu) => {
                    // gate = silu(gate) * up, by each unit of the products as they come.
                    let silu_mul = |g: &mut [f32], u: &[f32]| k.silu_mul(g, u);
                    as_input(&h, d, &mut b.quantized, |x| {
                        let mut jobs = [(wg.view(file), &mut *gate), (wu.view(file), &mut *up)];
                        matmul_gated(k, team, &mut jobs, x, &silu_mul)
                    });
                }
                (GateUp::Separate { gate: wg, up: wu }, activation) => {
                    let jobs = &mut [(wg.view(file), &mut *gate), (wu.view(file), &mut *up)];
                    products(k, team, jobs, &h, d, &mut b.quantized);
                    gated(activation, k, gate, up);
                }
                (GateUp::Fused(wgu), activation) => {
                    let fused = reuse(&mut b.gate_up, rows * 2 * ff);
                    let jobs = &mut [(wgu.view(file), &mut *fused)];
                    products(k, team, jobs, &h, d, &mut b.quantized);
                    let rows = fused.chunks_exact(2 * ff);
                    for ((row, g), u) in rows
                        .zip(gate.chunks_exact_mut(ff))
                        .zip(up.chunks_exact_mut(ff))
                    {
                        g.copy_from_slice(&row[..ff]);
                        u.copy_from_slice(&row[ff..]);
                    }
                    gated(activation, k, gate, up);
                }
            }
            let down = reuse(&mut b.down, rows * d);
            let gate = &*gate;
            products(
                k,
                team,
                &mut [(lw.w_down.view(file), &mut *down)],
                gate,
                ff,
                &mut b.quantized,
            );
            if let Some((_, post_ffn)) = &lw.post_norms {
                down.copy_from_slice(&rms_norm(down, post_ffn, c.rms_eps));
            }
            add_in_place(&mut x, down);
        }

        let h = rms_norm(&x, &w.output_norm, c.rms_eps);
        let len = batch.n_outputs() * c.vocab_size;
        let logits = reuse(&mut b.logits, len);
        let head = w.output().view(file);
        products(
            k,
            team,
            &mut [(head, &mut *logits)],
            &h,
            d,
            &mut b.quantized,
        );
        if let Some(cap) = plan.logit_softcap {
            logits.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
        }
        Ok(len)
    }
}

/// `gate = act(gate) * up`, element by element (the reference's expressions).
fn gated(activation: Activation, k: Kernels, gate: &mut [f32], up: &[f32]) {
    match activation {
        Activation::Silu => k.silu_mul(gate, up),
        Activation::GeluTanh => {
            for (g, &u) in gate.iter_mut().zip(up) {
                *g = gelu_tanh(*g) * u;
            }
        }
    }
}

impl LanguageModel for CpuEngine {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn cache_len(&self) -> usize {
        self.cache.len
    }

    fn capacity(&self) -> usize {
        self.cache.capacity
    }

    async fn forward(&mut self, batch: &Batch) -> Result<Logits> {
        let len = self.forward_in_place(batch)?;
        let mut data = std::mem::take(&mut self.buffers.logits);
        data.truncate(len);
        Ok(Logits {
            data,
            vocab: self.config.vocab_size,
        })
    }

    // Selection on the CPU, from the logits where the forward left them.
    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        let len = self.forward_in_place(batch)?;
        argmax_rows_of(&self.buffers.logits[..len], self.config.vocab_size)
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        let len = self.forward_in_place(batch)?;
        let data = &self.buffers.logits[..len];
        Ok(TopLogits::of_rows(data, self.config.vocab_size, k))
    }

    fn truncate_floor(&self) -> usize {
        self.rings.floor()
    }

    fn truncate(&mut self, len: usize) {
        let kept = self.rings.truncate(self.cache.len, len);
        self.cache.truncate(kept);
    }

    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        self.cache.compact(base, keep)
    }
}
