//! Scalar kernels of the reference engine. Each reduces in a fixed order that does not depend
//! on how many rows are processed together.

use half::f16;

use super::weights::Matrix;
use crate::{ModelConfig, RopeMode};

/// Dot product with eight interleaved partial sums (lane `k` takes elements `i ≡ k mod 8`),
/// combined pairwise at the end. Deterministic for a given length.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let (x, y) = (&a[c * 8..c * 8 + 8], &b[c * 8..c * 8 + 8]);
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    for i in chunks * 8..a.len() {
        acc[i % 8] += a[i] * b[i];
    }
    let s4 = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    (s4[0] + s4[2]) + (s4[1] + s4[3])
}

/// `out[t][o] = dot(w.row(o), x[t])` for `n` activation rows of `w.cols` each: `[n, w.rows]`.
/// Output features are split across threads natively; each value is still one `dot`.
pub fn matmul(w: &Matrix, x: &[f32], n: usize) -> Vec<f32> {
    debug_assert_eq!(x.len(), n * w.cols);
    let mut out = vec![0f32; n * w.rows];
    let work = |rows: std::ops::Range<usize>, out: &mut [f32]| {
        // `out` holds columns `rows` of every output row, laid out [n, rows.len()].
        let width = rows.len();
        for (k, r) in rows.enumerate() {
            let wr = w.row(r);
            for t in 0..n {
                out[t * width + k] = dot(wr, &x[t * w.cols..(t + 1) * w.cols]);
            }
        }
    };
    let threads = worker_threads().min(w.rows / 64).max(1);
    if threads == 1 || n * w.rows * w.cols < 1 << 18 {
        work(0..w.rows, &mut out);
        return out;
    }
    let per = w.rows.div_ceil(threads);
    let mut parts: Vec<Vec<f32>> = Vec::with_capacity(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let rows = (i * per).min(w.rows)..((i + 1) * per).min(w.rows);
                s.spawn(move || {
                    let mut part = vec![0f32; n * rows.len()];
                    work(rows, &mut part);
                    part
                })
            })
            .collect();
        for h in handles {
            // A worker only panics on a bug in this function; surface it rather than hide it.
            parts.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
    });
    for (i, part) in parts.iter().enumerate() {
        let start = (i * per).min(w.rows);
        let width = part.len() / n;
        for t in 0..n {
            out[t * w.rows + start..t * w.rows + start + width]
                .copy_from_slice(&part[t * width..(t + 1) * width]);
        }
    }
    out
}

fn worker_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
}

/// RMSNorm of each row of `x` (rows of `w.len()`), scaled by `w`. The mean of squares is
/// accumulated in f64, as llama.cpp does.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(w.len()) {
        let sum: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum();
        let mean = (sum / w.len() as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &g)| v * scale * g));
    }
    out
}

pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// In-place softmax.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

pub fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

/// Rotary position embedding of one layer. The angle of pair `i` at position `p` is
/// `freq_scale * p * base^(-2i/d) / factor_i`, its cos and sin times `mscale`, built as
/// llama.cpp's rope cache builds them (the power by repeated multiplication in f32). Every
/// engine's RoPE on the CPU is this one.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    mode: RopeMode,
    head_dim: usize,
    rope_dim: usize,
    theta_scale: f32,
    freq_scale: f32,
    mscale: f32,
    factors: Option<Vec<f32>>,
}

impl Rope {
    /// The RoPE of a layer: `base` and `freq_scale` from its [`crate::AttentionPlan`],
    /// `factors` its frequency factors (`[rope_dim / 2]`), `mscale` the plan's
    /// `rope_attn_factor`.
    pub fn new(
        c: &ModelConfig,
        base: f32,
        freq_scale: f32,
        factors: Option<&[f32]>,
        mscale: f32,
    ) -> Self {
        Rope {
            mode: c.rope_mode,
            head_dim: c.head_dim,
            rope_dim: c.rope_dim,
            theta_scale: base.powf(-2.0 / c.rope_dim as f32),
            freq_scale,
            mscale,
            factors: factors.map(<[f32]>::to_vec),
        }
    }

    /// `(cos, sin)` of each pair's angle at `pos`.
    pub fn angles(&self, pos: usize) -> Vec<(f32, f32)> {
        let mut theta = pos as f32;
        (0..self.rope_dim / 2)
            .map(|i| {
                let ff = self.factors.as_ref().map_or(1.0, |f| f[i]);
                let t = self.freq_scale * (theta / ff);
                theta *= self.theta_scale;
                (t.cos() * self.mscale, t.sin() * self.mscale)
            })
            .collect()
    }

    /// Rotates each of the consecutive heads of `x` in place by `angles` (from
    /// [`Rope::angles`]).
    pub fn apply(&self, x: &mut [f32], angles: &[(f32, f32)]) {
        let half = self.rope_dim / 2;
        for head in x.chunks_exact_mut(self.head_dim) {
            for (i, &(cos, sin)) in angles.iter().enumerate() {
                let (a, b) = match self.mode {
                    RopeMode::Normal => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos - x1 * sin;
                head[b] = x0 * sin + x1 * cos;
            }
        }
    }
}
