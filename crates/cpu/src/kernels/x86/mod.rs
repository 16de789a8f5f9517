//! x86-64 kernels: AVX2 (+FMA, F16C) for [`super::Isa::Avx2`], and the AVX-512 ones
//! (`*_avx512`, `q32_pairs`, `q32_lanes`, `attention512`: AVX-512F and VL with VNNI) that
//! [`super::Isa::Avx512`] adds on top of them. Each follows [`super::scalar`]'s order exactly:
//! integer lane sums are exact, float steps are separate multiplies and adds (never fused, which
//! would round differently), and the horizontal sum is the scalar [`super::scalar::hsum8`] of
//! the stored lanes. The kernel tests compare every format bit for bit with the scalar path.
//!
//! Every function here requires AVX2, FMA and F16C, the AVX-512 ones their features too;
//! [`super::Kernels`] only calls them after detecting those features.

mod attention;
mod attention512;
mod exp;
mod float;
mod key_pairs;
mod kquants;
mod kv_direct;
mod pack;
pub(crate) mod q32;
mod q32_group;
pub(crate) mod q32_lanes;
mod q32_pairs;
mod q32_span;
mod q32_sums;
pub(crate) mod quantize;

use std::arch::x86_64::*;

pub use attention::{scores, scores_dense, weighted_sum, weighted_sum_dense, widen};
pub use attention512::{weighted_sum_dense_avx512, weighted_sums_dense_avx512, widen_avx512};
pub use exp::{exp_minus, exp_minus_avx512, silu_mul, silu_mul_avx512};
pub use float::float_rows;
pub use key_pairs::{scores_key_pairs, widen_key_pairs, GROUP_SLOTS};
pub use kquants::{k_rows, pack_k_rows};
pub use kv_direct::{scores_f16_pairs, weighted_sums_f16};
pub use pack::pack_rows;
pub use q32::q32_rows;
pub use q32_group::interleave_blocks;

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

/// How far ahead of the weights it multiplies a tile asks for them. A tile of several rows
/// takes long enough per byte that the hardware's own prefetch falls behind the stream (a
/// model's output matrix, read once a forward from memory, takes a third longer without); and
/// a one-row product streams faster than the hardware's prefetch keeps up with (SmolLM2's
/// one-row forward is 18% faster on one thread with it, the Qwen 0.5B's 10% on two:
/// BENCHMARKS.md, "Native CPU engine vs llama.cpp").
const PREFETCH_AHEAD: usize = 4096;

/// Asks for the cache lines of the `bytes` bytes at [`PREFETCH_AHEAD`] past `at` (a hint: an
/// address past the weights' end is harmless, nothing is read from it).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch_ahead(at: *const u8, bytes: usize) {
    let ahead = at.wrapping_add(PREFETCH_AHEAD);
    for line in 0..bytes.div_ceil(64) {
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line) as *const i8);
    }
}

/// 16 bytes from `b[..16]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load16(b: &[u8]) -> __m128i {
    assert!(b.len() >= 16);
    // SAFETY: 16 readable bytes (checked); unaligned load.
    unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) }
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

/// [`super::scalar::hsum4`] of eight rows at once: `halves[k]` holds row `2k`'s four lanes, then row
/// `2k + 1`'s; lane `t` of the result is row `t`'s `(m0 + m2) + (m1 + m3)`, the same additions
/// of the same operands, so the same bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile_hsum4(halves: [__m256; 4]) -> __m256 {
    // Lanes (0, 1) of each row's four plus lanes (2, 3): rows 2k and 2k + 2 in the low
    // 128-bit lane, 2k + 1 and 2k + 3 in the high.
    let fold = |a: __m256, b: __m256| {
        _mm256_add_ps(
            _mm256_shuffle_ps::<0b01_00_01_00>(a, b),
            _mm256_shuffle_ps::<0b11_10_11_10>(a, b),
        )
    };
    let (a, b) = (fold(halves[0], halves[1]), fold(halves[2], halves[3]));
    // Rows [0, 2, 4, 6 | 1, 3, 5, 7], then in order.
    let v = _mm256_add_ps(
        _mm256_shuffle_ps::<0b10_00_10_00>(a, b),
        _mm256_shuffle_ps::<0b11_01_11_01>(a, b),
    );
    _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// [`super::scalar::hsum8`] of eight accumulators at once, lane `t` of the result from `acc[t]`:
/// each register's halves added (`a_l + a_{l+4}`), then [`tile_hsum4`]. (The q32 tiles' eight
/// rows, attention's eight slots.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile_hsum8(acc: [__m256; 8]) -> __m256 {
    let halves = |a: __m256, b: __m256| {
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(a, b),
            _mm256_permute2f128_ps::<0x31>(a, b),
        )
    };
    tile_hsum4([
        halves(acc[0], acc[1]),
        halves(acc[2], acc[3]),
        halves(acc[4], acc[5]),
        halves(acc[6], acc[7]),
    ])
}
