//! Float weight rows (F32, F16, BF16) against f32 activations: eight lanes, products rounded
//! then added, as [`scalar::float_tile`] (and the reference's `dot`).

use std::arch::x86_64::*;

use super::lanes;
use crate::formats::FloatFormat;
use crate::kernels::scalar::{self, hsum8};
use crate::kernels::{each_row, Out};

const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;

/// See [`crate::kernels::Kernels::float_rows`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn float_rows(f: FloatFormat, w: &[u8], row_bytes: usize, x: &[f32], out: Out) {
    let n = out.tile();
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::float_tile(f, w, x, o));
    match f {
        FloatFormat::F32 => by_tile!(n, rows::<F32>(w, row_bytes, x, out), fallback(out)),
        FloatFormat::F16 => by_tile!(n, rows::<F16>(w, row_bytes, x, out), fallback(out)),
        FloatFormat::BF16 => by_tile!(n, rows::<BF16>(w, row_bytes, x, out), fallback(out)),
    }
}

/// Weights `8c..8c + 8` of the row as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn weights<const F: u8>(w: &[u8], c: usize) -> __m256 {
    match F {
        F32 => {
            let b = &w[32 * c..32 * c + 32];
            // SAFETY: 32 readable bytes.
            unsafe { _mm256_loadu_ps(b.as_ptr() as *const f32) }
        }
        _ => {
            let b = &w[16 * c..16 * c + 16];
            // SAFETY: 16 readable bytes.
            let halves = unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) };
            if F == F16 {
                _mm256_cvtph_ps(halves)
            } else {
                _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16))
            }
        }
    }
}

/// Weight `i` of the row, for the tail after the last whole group of 8.
fn weight<const F: u8>(w: &[u8], i: usize) -> f32 {
    match F {
        F32 => f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]]),
        F16 => half::f16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32(),
        _ => half::bf16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32(),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: &[f32], mut out: Out) {
    let cols = row_bytes / if F == F32 { 4 } else { 2 };
    assert_eq!(x.len(), T * cols);
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let mut acc = [_mm256_setzero_ps(); T];
        for c in 0..cols / 8 {
            let w = weights::<F>(w_row, c);
            for (t, a) in acc.iter_mut().enumerate() {
                // SAFETY: `8c + 8 <= cols`, inside row `t` of `x` (length checked above).
                let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(t * cols + 8 * c)) };
                *a = _mm256_add_ps(*a, _mm256_mul_ps(w, xv));
            }
        }
        let mut o = [0f32; T];
        for t in 0..T {
            let mut l = lanes(acc[t]);
            for i in cols / 8 * 8..cols {
                l[i % 8] += weight::<F>(w_row, i) * x[t * cols + i];
            }
            o[t] = hsum8(&l);
        }
        out.put(r, &o);
    }
}
