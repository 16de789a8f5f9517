//! The q32 tile kernel's integer sums ([`super::q32`]): a group's exact lane sums against one
//! activation row, by AVX2's byte products or by AVX-512 VNNI's.

use std::arch::x86_64::*;

use crate::kernels::q32_ids::Q8_0;
#[cfg(doc)]
use crate::kernels::scalar;
use crate::kernels::scalar::GROUP;

/// A group's exact integer sums against one activation row `y` (four registers in the
/// interleaved layout): lane `l` is half-block sum `l` of [`scalar::q32_tile`], before Q4_0's and
/// Q5_0's offsets. `w` are the weights as decoded, `abs_w` their magnitudes (Q8_0; else `w`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn lane_sums<const F: u8>(
    w: &[__m256i; GROUP],
    abs_w: &[__m256i; GROUP],
    y: [__m256i; GROUP],
) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    if F == Q8_0 {
        // |w| up to 128: a pair sum takes most of i16, so each widens alone.
        let wide = |c: usize| {
            let p = _mm256_maddubs_epi16(abs_w[c], _mm256_sign_epi8(y[c], w[c]));
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

/// [`lane_sums`] with VNNI: each `vpdpbusd` adds four byte products into a lane's i32, exactly
/// (no 16-bit step to saturate), in two chains of two so that one row does not wait on four.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn lane_sums_vnni<const F: u8>(
    w: &[__m256i; GROUP],
    abs_w: &[__m256i; GROUP],
    y: [__m256i; GROUP],
) -> __m256i {
    let zero = _mm256_setzero_si256();
    // Unsigned weight bytes against signed activations: Q8_0's magnitudes (up to 128, which
    // is a u8) against activations given the weights' signs.
    let (u, v): ([__m256i; GROUP], [__m256i; GROUP]) = if F == Q8_0 {
        (
            *abs_w,
            std::array::from_fn(|c| _mm256_sign_epi8(y[c], w[c])),
        )
    } else {
        (*w, y)
    };
    let a = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(zero, u[0], v[0]), u[1], v[1]);
    let b = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(zero, u[2], v[2]), u[3], v[3]);
    _mm256_add_epi32(a, b)
}
