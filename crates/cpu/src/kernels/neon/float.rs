//! Float weight rows (F32, F16, BF16) against f32 activations: eight lanes (two registers of
//! four), products rounded then added, as [`scalar::float_tile`].

use core::arch::aarch64::*;

use super::{f16x4_to_f32, lanes8, load16, load4};
use crate::formats::FloatFormat;
use crate::kernels::scalar::{self, hsum8};
use crate::kernels::{each_row, Out};

const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;

/// See [`crate::kernels::Kernels::float_rows`].
#[target_feature(enable = "neon")]
pub fn float_rows(f: FloatFormat, w: &[u8], row_bytes: usize, x: &[f32], out: Out) {
    let n = out.tile();
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::float_tile(f, w, x, o));
    match f {
        FloatFormat::F32 => by_tile!(n, rows::<F32>(w, row_bytes, x, out), fallback(out)),
        FloatFormat::F16 => by_tile!(n, rows::<F16>(w, row_bytes, x, out), fallback(out)),
        FloatFormat::BF16 => by_tile!(n, rows::<BF16>(w, row_bytes, x, out), fallback(out)),
    }
}

/// Weights `8c..8c + 8` of the row as two f32x4.
#[inline]
#[target_feature(enable = "neon")]
fn weights<const F: u8>(w: &[u8], c: usize) -> (float32x4_t, float32x4_t) {
    match F {
        F32 => (
            vreinterpretq_f32_u8(load16(&w[32 * c..])),
            vreinterpretq_f32_u8(load16(&w[32 * c + 16..])),
        ),
        _ => {
            let halves = vreinterpretq_u16_u8(load16(&w[16 * c..]));
            let (lo, hi) = (vmovl_u16(vget_low_u16(halves)), vmovl_high_u16(halves));
            if F == F16 {
                (f16x4_to_f32(lo), f16x4_to_f32(hi))
            } else {
                (
                    vreinterpretq_f32_u32(vshlq_n_u32::<16>(lo)),
                    vreinterpretq_f32_u32(vshlq_n_u32::<16>(hi)),
                )
            }
        }
    }
}

/// Weight `i` of the row, for the tail after the last whole group of 8.
#[target_feature(enable = "neon")]
fn weight<const F: u8>(w: &[u8], i: usize) -> f32 {
    match F {
        F32 => f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]]),
        F16 => half::f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32(),
        _ => half::bf16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32(),
    }
}

#[target_feature(enable = "neon")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: &[f32], mut out: Out) {
    let cols = row_bytes / if F == F32 { 4 } else { 2 };
    assert_eq!(x.len(), T * cols);
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let zero = vdupq_n_f32(0.0);
        let (mut lo, mut hi) = ([zero; T], [zero; T]);
        for c in 0..cols / 8 {
            let (w_lo, w_hi) = weights::<F>(w_row, c);
            for t in 0..T {
                let xs = &x[t * cols + 8 * c..];
                lo[t] = vaddq_f32(lo[t], vmulq_f32(w_lo, load4(xs)));
                hi[t] = vaddq_f32(hi[t], vmulq_f32(w_hi, load4(&xs[4..])));
            }
        }
        let mut o = [0f32; T];
        for t in 0..T {
            let mut l = lanes8(lo[t], hi[t]);
            for i in cols / 8 * 8..cols {
                l[i % 8] += weight::<F>(w_row, i) * x[t * cols + i];
            }
            o[t] = hsum8(&l);
        }
        out.put(r, &o);
    }
}
