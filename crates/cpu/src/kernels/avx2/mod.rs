//! x86-64 AVX2 (+FMA, F16C) kernels. Each follows [`super::scalar`]'s order exactly: integer
//! lane sums are exact, float steps are separate multiplies and adds (never fused, which would
//! round differently), and the horizontal sum is the scalar [`super::scalar::hsum8`] of the
//! stored lanes. The kernel tests compare every format bit for bit with the scalar path.
//!
//! Every function here requires AVX2, FMA and F16C; [`super::Kernels`] only calls them after
//! detecting those features.

mod attention;
mod exp;
mod float;
mod kquants;
mod pack;
pub(crate) mod q32;
mod q32_sums;
pub(crate) mod quantize;

use std::arch::x86_64::*;

pub use attention::{scores, weighted_sum, widen};
pub use exp::{exp_minus, silu_mul};
pub use float::float_rows;
pub use kquants::k_rows;
pub use pack::pack_rows;
pub use q32::{interleave_blocks, q32_rows};

/// The f16 at `b[at..at + 2]` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16_at(b: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([b[at], b[at + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// The eight f32 lanes of `v`, in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn lanes(v: __m256) -> [f32; 8] {
    let mut out = [0f32; 8];
    // SAFETY: `out` holds 8 f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// 32 bytes from `b[..32]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load32(b: &[u8]) -> __m256i {
    assert!(b.len() >= 32);
    // SAFETY: 32 readable bytes (checked); unaligned load.
    unsafe { _mm256_loadu_si256(b.as_ptr() as *const __m256i) }
}

/// 32 signed bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load32_i8(b: &[i8]) -> __m256i {
    assert!(b.len() >= 32);
    // SAFETY: as above.
    unsafe { _mm256_loadu_si256(b.as_ptr() as *const __m256i) }
}
