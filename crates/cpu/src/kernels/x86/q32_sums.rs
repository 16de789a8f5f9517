//! The q32 tile kernel's integer sums (`q32.rs`): a group's exact lane sums against one
//! activation row, by AVX2's byte products or by AVX-512 VNNI's. Both multiply unsigned weight
//! bytes by signed activations; what makes a format's weights unsigned, and the offset that
//! takes back out of the sums (a multiple of the activations' lane sums), is per instruction set.

use std::arch::x86_64::*;

use crate::kernels::q32_ids::{Q4_0, Q5_0, Q8_0};
#[cfg(doc)]
use crate::kernels::scalar;
use crate::layout::{GROUP, SPAN};

/// The weights' unsigned operand for [`lane_sums`]: Q8_0's magnitudes (its signs go onto the
/// activations, per row), else the weights as decoded.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn unsigned_weights<const F: u8, const N: usize>(w: &[__m256i; N]) -> [__m256i; N] {
    if F == Q8_0 {
        std::array::from_fn(|c| _mm256_sign_epi8(w[c], w[c]))
    } else {
        *w
    }
}

/// The weights' unsigned operand for [`lane_sums_vnni`]: Q8_0's bytes plus 128 (a flipped sign
/// bit), once per group of a tile where the magnitudes cost a sign flip of the activations per
/// row; [`offset_shift_vnni`] takes the 128 back out. Else the weights as decoded.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn unsigned_weights_vnni<const F: u8, const N: usize>(w: &[__m256i; N]) -> [__m256i; N] {
    if F == Q8_0 {
        let bias = _mm256_set1_epi8(i8::MIN);
        std::array::from_fn(|c| _mm256_xor_si256(w[c], bias))
    } else {
        *w
    }
}

/// With [`lane_sums`]: the sums exceed the signed weights' by the activations' lane sums shifted
/// left by this (Q4_0 and Q5_0, multiplied unsigned: `q = w + 8`, `w + 16`), or 0 (no offset).
pub(super) const fn offset_shift(f: u8) -> i32 {
    match f {
        Q4_0 => 3,
        Q5_0 => 4,
        _ => 0,
    }
}

/// [`offset_shift`] for [`lane_sums_vnni`]: Q8_0's bias of 128 too.
pub(super) const fn offset_shift_vnni(f: u8) -> i32 {
    match f {
        Q8_0 => 7,
        f => offset_shift(f),
    }
}

/// A group's exact integer sums against one activation row `y` (four registers in the
/// interleaved layout): lane `l` is half-block sum `l` of [`scalar::q32_tile`], before the
/// offset of [`offset_shift`]. `w` are the weights as decoded, `u` [`unsigned_weights`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn lane_sums<const F: u8>(
    w: &[__m256i; GROUP],
    u: &[__m256i; GROUP],
    y: [__m256i; GROUP],
) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    if F == Q8_0 {
        // |w| up to 128: a pair sum takes most of i16, so each widens alone.
        let wide = |c: usize| {
            let p = _mm256_maddubs_epi16(u[c], _mm256_sign_epi8(y[c], w[c]));
            _mm256_madd_epi16(p, ones)
        };
        _mm256_add_epi32(
            _mm256_add_epi32(wide(0), wide(1)),
            _mm256_add_epi32(wide(2), wide(3)),
        )
    } else {
        // Weights 0..31: four pair sums stay under 4 * 2 * 31 * 127 < 2^15.
        let p = _mm256_add_epi16(
            _mm256_add_epi16(
                _mm256_maddubs_epi16(w[0], y[0]),
                _mm256_maddubs_epi16(w[1], y[1]),
            ),
            _mm256_add_epi16(
                _mm256_maddubs_epi16(w[2], y[2]),
                _mm256_maddubs_epi16(w[3], y[3]),
            ),
        );
        _mm256_madd_epi16(p, ones)
    }
}

/// [`lane_sums`] with VNNI, before the offset of [`offset_shift_vnni`] (`u`:
/// [`unsigned_weights_vnni`]): each `vpdpbusd` adds four byte products into a lane's i32,
/// exactly (no 16-bit step to saturate, so Q8_0's biased bytes up to 255 need no sign flips),
/// in one chain of four: a tile's rows are independent chains enough for the pipes, and two
/// chains of two cost a zeroed register and an add more per row (eight rows 1-2% slower).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn lane_sums_vnni<const F: u8>(
    _w: &[__m256i; GROUP],
    u: &[__m256i; GROUP],
    y: [__m256i; GROUP],
) -> __m256i {
    let zero = _mm256_setzero_si256();
    let a = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(zero, u[0], y[0]), u[1], y[1]);
    _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(a, u[2], y[2]), u[3], y[3])
}

/// A span's exact integer sums against one activation row `y` (eight registers of the span
/// layout): lane `o` is block `o`'s whole sum of [`scalar::q32_tile`], before the offset of
/// [`offset_shift`]. `w` are the weights as decoded, `u` [`unsigned_weights`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn span_sums<const F: u8>(
    w: &[__m256i; SPAN],
    u: &[__m256i; SPAN],
    y: [__m256i; SPAN],
) -> __m256i {
    let low = lane_sums::<F>(
        &[w[0], w[1], w[2], w[3]],
        &[u[0], u[1], u[2], u[3]],
        [y[0], y[1], y[2], y[3]],
    );
    let high = lane_sums::<F>(
        &[w[4], w[5], w[6], w[7]],
        &[u[4], u[5], u[6], u[7]],
        [y[4], y[5], y[6], y[7]],
    );
    _mm256_add_epi32(low, high)
}

/// [`span_sums`] with VNNI, before the offset of [`offset_shift_vnni`] (`u`:
/// [`unsigned_weights_vnni`]): eight `vpdpbusd` in two chains of four (one chain of eight
/// keeps an eight-row tile waiting on it: 10-20% slower).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn span_sums_vnni<const F: u8>(
    _w: &[__m256i; SPAN],
    u: &[__m256i; SPAN],
    y: [__m256i; SPAN],
) -> __m256i {
    let zero = _mm256_setzero_si256();
    let dp = _mm256_dpbusd_epi32;
    let low = dp(
        dp(dp(dp(zero, u[0], y[0]), u[1], y[1]), u[2], y[2]),
        u[3],
        y[3],
    );
    let high = dp(
        dp(dp(dp(zero, u[4], y[4]), u[5], y[5]), u[6], y[6]),
        u[7],
        y[7],
    );
    _mm256_add_epi32(low, high)
}
