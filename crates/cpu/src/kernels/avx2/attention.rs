//! One attention head over f16 cache rows: scores and the weighted sum of values, in
//! `scalar::scores` and `scalar::weighted_sum`'s order.

use std::arch::x86_64::*;

use super::lanes;
use crate::kernels::scalar::hsum8;
use crate::kernels::F16Rows;

/// Eight f16 from `v[at..at + 8]` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load8(v: &[half::f16], at: usize) -> __m256 {
    let eight = &v[at..at + 8];
    // SAFETY: eight readable f16 (16 bytes); unaligned load.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(eight.as_ptr() as *const __m128i) })
}

/// See [`crate::kernels::Kernels::scores`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn scores(q: &[f32], k: F16Rows, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
    let len = k.len.min(q.len());
    let whole = len / 8 * 8;
    out.clear();
    for &slot in slots {
        let row = k.row(slot);
        let mut acc = _mm256_setzero_ps();
        for c in (0..whole).step_by(8) {
            // SAFETY: `c + 8 <= len <= q.len()`.
            let qv = unsafe { _mm256_loadu_ps(q.as_ptr().add(c)) };
            acc = _mm256_add_ps(acc, _mm256_mul_ps(qv, load8(row, c)));
        }
        let mut l = lanes(acc);
        for i in whole..len {
            l[i % 8] += q[i] * row[i].to_f32();
        }
        out.push(hsum8(&l) * scale);
    }
}

/// See [`crate::kernels::Kernels::weighted_sum`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn weighted_sum(v: F16Rows, slots: &[usize], p: &[f32], out: &mut [f32]) {
    let len = v.len.min(out.len());
    let whole = len / 8 * 8;
    for (&slot, &pj) in slots.iter().zip(p) {
        let row = v.row(slot);
        let pv = _mm256_set1_ps(pj);
        for c in (0..whole).step_by(8) {
            let o = &mut out[c..c + 8];
            // SAFETY: eight f32 in `o`.
            unsafe {
                let sum = _mm256_add_ps(
                    _mm256_loadu_ps(o.as_ptr()),
                    _mm256_mul_ps(pv, load8(row, c)),
                );
                _mm256_storeu_ps(o.as_mut_ptr(), sum);
            }
        }
        for e in whole..len {
            out[e] += pj * row[e].to_f32();
        }
    }
}
