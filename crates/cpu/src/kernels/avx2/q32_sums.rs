//! The q32 tile kernel's sums ([`super::q32`]): a group's exact integer lane sums against one
//! activation row (AVX2's byte products, or AVX-512 VNNI's), and a tile's eight rows'
//! horizontal sums taken side by side.

use std::arch::x86_64::*;

use crate::kernels::q32_ids::Q8_0;
use crate::kernels::scalar::GROUP;
#[cfg(doc)]
use crate::kernels::scalar::{self, hsum4, hsum8};

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

/// [`hsum4`] of eight rows at once: `halves[k]` holds row `2k`'s four lanes, then row
/// `2k + 1`'s; lane `t` of the result is row `t`'s `(m0 + m2) + (m1 + m3)`, the same additions
/// of the same operands, so the same bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn tile_hsum4(halves: [__m256; 4]) -> __m256 {
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

/// [`hsum8`] of eight accumulators at once, lane `t` of the result from `acc[t]`: each
/// register's halves added (`a_l + a_{l+4}`), then [`tile_hsum4`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn tile_hsum8(acc: [__m256; 8]) -> __m256 {
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
