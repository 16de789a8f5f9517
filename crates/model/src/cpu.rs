//! The CPU reference engine: f32 math on weights decoded from their GGUF block formats.
//!
//! Written to be read and trusted, then to be reasonably fast. Every output row is computed
//! by the same code in the same order whether its token came alone or in a block, so the
//! engine is batch-invariant: greedy speculative decoding on it equals plain decoding exactly.

pub(crate) mod math;
mod weights;

use crate::lm::{argmax_rows, Batch, LanguageModel, Logits, TopLogits};
use crate::{Activation, ModelConfig, ModelError, Result};
use runahead_gguf::GgufFile;

use crate::weights::{GateUp, Qkv};
use math::{add_in_place, matmul, rms_norm};
pub use math::{gelu_tanh, Rope};
use weights::CpuWeights;

/// Per-layer KV cache: `[capacity, kv_dim]` each, row `slot` holding the key (value) of the
/// token in that slot. Values are rounded to f16 precision on write, as the GPU engine stores
/// them (and as llama.cpp's default f16 cache does).
struct KvCache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    len: usize,
    capacity: usize,
    kv_dim: usize,
}

impl KvCache {
    fn new(n_layers: usize, capacity: usize, kv_dim: usize) -> Self {
        KvCache {
            k: vec![Vec::new(); n_layers],
            v: vec![Vec::new(); n_layers],
            len: 0,
            capacity,
            kv_dim,
        }
    }

    /// Makes room for slots up to `end` (grown on demand so short runs stay small).
    fn reserve(&mut self, end: usize) {
        let need = end * self.kv_dim;
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            if buf.len() < need {
                buf.resize(need, 0.0);
            }
        }
    }
}

/// The reference engine for one model: it executes every step of the model's [`Plan`].
pub struct CpuModel {
    config: ModelConfig,
    weights: CpuWeights,
    /// Per layer.
    ropes: Vec<Rope>,
    cache: KvCache,
}

impl CpuModel {
    /// Decodes the model's weights to f32. `context` caps the KV cache (and the positions
    /// a forward may use); `None` means the model's trained context length.
    pub fn load(file: &GgufFile, context: Option<usize>) -> Result<Self> {
        let weights = weights::load(file)?;
        let plan = &weights.plan;
        let config = plan.config.clone();
        let capacity = context
            .unwrap_or(config.context_length)
            .min(config.context_length);
        if capacity == 0 {
            return Err(ModelError::Config("context size must be at least 1".into()));
        }
        let factors = weights
            .rope_factors
            .as_ref()
            .map(|(a, b)| (a.as_slice(), b.as_deref()));
        let ropes = plan.ropes(capacity, factors);
        Ok(CpuModel {
            ropes,
            cache: KvCache::new(config.n_layers, capacity, config.kv_dim()),
            config,
            weights,
        })
    }

    /// Attention of every block token over the cache and its visible block entries, for
    /// one layer. `q` is `[n, q_dim]`; returns `[n, q_dim]`. A cached slot's position is its
    /// index; a block entry's is its batch position.
    fn attention(&self, layer: usize, q: &[f32], batch: &Batch, visible: &[bool]) -> Vec<f32> {
        let c = &self.config;
        let plan = self.weights.plan.layers[layer].attention;
        let (hd, n, qd) = (c.head_dim, batch.len(), c.q_dim());
        let base = self.cache.len;
        let group = c.n_heads / c.n_kv_heads;
        let (kc, vc) = (&self.cache.k[layer], &self.cache.v[layer]);
        let kv_dim = c.kv_dim();
        let mut out = vec![0f32; n * qd];
        let mut scores = Vec::with_capacity(base + n);
        let mut slots = Vec::with_capacity(base + n);
        for i in 0..n {
            let pos = batch.positions[i];
            let in_window = |key_pos: usize| plan.window.is_none_or(|w| pos < key_pos + w);
            slots.clear();
            slots.extend((0..base).filter(|&s| in_window(s)));
            slots.extend(
                (0..n)
                    .filter(|&j| visible[i * n + j] && in_window(batch.positions[j]))
                    .map(|j| base + j),
            );
            for h in 0..c.n_heads {
                let kvh = h / group;
                let qh = &q[i * qd + h * hd..][..hd];
                scores.clear();
                for &s in &slots {
                    let kh = &kc[s * kv_dim + kvh * hd..][..hd];
                    scores.push(math::dot(qh, kh) * plan.scale);
                }
                math::softmax(&mut scores);
                let oh = &mut out[i * qd + h * hd..][..hd];
                for (&s, &p) in slots.iter().zip(&scores) {
                    let vh = &vc[s * kv_dim + kvh * hd..][..hd];
                    for (o, &v) in oh.iter_mut().zip(vh) {
                        *o += p * v;
                    }
                }
            }
        }
        out
    }
}

impl LanguageModel for CpuModel {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn cache_len(&self) -> usize {
        self.cache.len
    }

    fn capacity(&self) -> usize {
        self.cache.capacity
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        argmax_rows(&self.forward(batch).await?)
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        Ok(TopLogits::of(&self.forward(batch).await?, k))
    }

    async fn forward(&mut self, batch: &Batch) -> Result<Logits> {
        let c = self.config.clone();
        batch.validate(c.vocab_size, self.cache.len, self.cache.capacity)?;
        let n = batch.len();
        let (d, qd, kv_dim, hd) = (c.n_embd, c.q_dim(), c.kv_dim(), c.head_dim);
        let base = self.cache.len;
        self.cache.reserve(base + n);
        let visible = batch.visibility();
        let w = &self.weights;
        let plan = &w.plan;

        // x: [n, n_embd], the residual stream.
        let mut x = Vec::with_capacity(n * d);
        for &t in &batch.tokens {
            x.extend_from_slice(w.token_embd.row(t as usize));
        }
        if let Some(scale) = plan.embd_scale {
            x.iter_mut().for_each(|v| *v *= scale);
        }

        for (l, lw) in w.layers.iter().enumerate() {
            let h = rms_norm(&x, &lw.attn_norm, c.rms_eps);
            let (mut q, mut k, mut v) = match &lw.qkv {
                Qkv::Separate { q, k, v } => (matmul(q, &h, n), matmul(k, &h, n), matmul(v, &h, n)),
                Qkv::Fused(qkv) => split3(&matmul(qkv, &h, n), n, [qd, kv_dim, kv_dim]),
            };
            if let Some(b) = &lw.qkv_bias {
                add_bias(&mut q, &b.q);
                add_bias(&mut k, &b.k);
                add_bias(&mut v, &b.v);
            }
            if let Some((qn, kn)) = &lw.qk_norm {
                debug_assert_eq!(qn.len(), hd);
                q = rms_norm(&q, qn, c.rms_eps);
                k = rms_norm(&k, kn, c.rms_eps);
            }
            let rope = &self.ropes[l];
            for (i, &p) in batch.positions.iter().enumerate() {
                let a = rope.angles(p);
                rope.apply(&mut q[i * qd..(i + 1) * qd], &a);
                rope.apply(&mut k[i * kv_dim..(i + 1) * kv_dim], &a);
            }
            let slots = base * kv_dim..(base + n) * kv_dim;
            for (dst, &src) in self.cache.k[l][slots.clone()].iter_mut().zip(&k) {
                *dst = math::round_f16(src);
            }
            for (dst, &src) in self.cache.v[l][slots].iter_mut().zip(&v) {
                *dst = math::round_f16(src);
            }
            let attn = self.attention(l, &q, batch, &visible);
            let mut o = matmul(&lw.wo, &attn, n);
            if let Some((post_attn, _)) = &lw.post_norms {
                o = rms_norm(&o, post_attn, c.rms_eps);
            }
            add_in_place(&mut x, &o);

            let h = rms_norm(&x, &lw.ffn_norm, c.rms_eps);
            let (mut gate, up) = match &lw.gate_up {
                GateUp::Separate { gate, up } => (matmul(gate, &h, n), matmul(up, &h, n)),
                GateUp::Fused(m) => {
                    let [g, u] = split(&matmul(m, &h, n), n, [c.n_ff, c.n_ff]);
                    (g, u)
                }
            };
            let act = match plan.activation {
                Activation::Silu => math::silu,
                Activation::GeluTanh => math::gelu_tanh,
            };
            for (g, &u) in gate.iter_mut().zip(&up) {
                *g = act(*g) * u;
            }
            let mut o = matmul(&lw.w_down, &gate, n);
            if let Some((_, post_ffn)) = &lw.post_norms {
                o = rms_norm(&o, post_ffn, c.rms_eps);
            }
            add_in_place(&mut x, &o);
        }
        self.cache.len = base + n;

        // Only the rows asked for get logits.
        let h = rms_norm(&x[batch.first_output * d..], &w.output_norm, c.rms_eps);
        let output = w.output.as_ref().unwrap_or(&w.token_embd);
        let mut data = matmul(output, &h, batch.n_outputs());
        if let Some(cap) = plan.logit_softcap {
            data.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
        }
        Ok(Logits {
            data,
            vocab: c.vocab_size,
        })
    }

    // The reference keeps every entry (the oracle of the engines' rings).
    fn truncate_floor(&self) -> usize {
        0
    }

    fn truncate(&mut self, len: usize) {
        self.cache.len = self.cache.len.min(len);
    }

    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        let kv = &mut self.cache;
        if base > kv.len
            || keep.windows(2).any(|w| w[0] >= w[1])
            || keep.last().is_some_and(|&k| base + k >= kv.len)
        {
            return Err(ModelError::InvalidBatch(format!(
                "cannot keep {keep:?} after slot {base} of a cache of {}",
                kv.len
            )));
        }
        let dim = kv.kv_dim;
        for buf in kv.k.iter_mut().chain(kv.v.iter_mut()) {
            for (dst, &src) in keep.iter().enumerate() {
                buf.copy_within(
                    (base + src) * dim..(base + src + 1) * dim,
                    (base + dst) * dim,
                );
            }
        }
        kv.len = base + keep.len();
        Ok(())
    }
}

/// Splits each row of `rows` (`[n, sum(widths)]`) into its parts: `[n, width]` each.
fn split<const N: usize>(rows: &[f32], n: usize, widths: [usize; N]) -> [Vec<f32>; N] {
    let total: usize = widths.iter().sum();
    let mut parts = widths.map(|w| Vec::with_capacity(n * w));
    for row in rows.chunks_exact(total) {
        let mut at = 0;
        for (part, &w) in parts.iter_mut().zip(&widths) {
            part.extend_from_slice(&row[at..at + w]);
            at += w;
        }
    }
    parts
}

fn split3(rows: &[f32], n: usize, widths: [usize; 3]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let [a, b, c] = split(rows, n, widths);
    (a, b, c)
}

fn add_bias(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        add_in_place(row, bias);
    }
}
