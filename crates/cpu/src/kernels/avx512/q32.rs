//! 32-element block formats against 8-bit activation blocks, four blocks per group.

use std::arch::x86_64::*;

use crate::activations::Q8Slice;
use crate::formats::Q32Format;
use crate::kernels::avx2::lanes;
use crate::kernels::avx2::q32::{decode, scales4};
use crate::kernels::q32_ids::{format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8, GROUP};
use crate::kernels::{each_row, Out};

/// See [`crate::kernels::Kernels::q32_rows`].
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn q32_rows(f: Q32Format, w: &[u8], row_bytes: usize, x: Q8Slice, out: Out) {
    let n = out.tile;
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::q32_tile(f, w, x, o));
    match f {
        Q32Format::Q4_0 => by_tile!(n, rows::<Q4_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q4_1 => by_tile!(n, rows::<Q4_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_0 => by_tile!(n, rows::<Q5_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_1 => by_tile!(n, rows::<Q5_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q8_0 => by_tile!(n, rows::<Q8_0>(w, row_bytes, x, out), fallback(out)),
    }
}

/// Four f32 from `v[..4]`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn load4(v: &[f32; GROUP]) -> __m128 {
    // SAFETY: four readable f32.
    unsafe { _mm_loadu_ps(v.as_ptr()) }
}

/// 64 bytes: two consecutive activation blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn load64(two: &[[i8; 32]]) -> __m512i {
    assert!(two.len() >= 2);
    // SAFETY: 64 readable bytes (two blocks, checked); unaligned load.
    unsafe { _mm512_loadu_si512(two.as_ptr() as *const __m512i) }
}

/// One weight group against one activation row: the eight half-block sums of
/// [`scalar::q32_tile`], spread over a 512-bit register (lane `4c` and `4c + 1` of each 128-bit
/// chunk `c`; see `HALVES`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn chunk_sums<const F: u8>(w: &Weights, ys: &[[i8; 32]; GROUP]) -> __m512i {
    let (y_ab, y_cd) = (load64(&ys[0..2]), load64(&ys[2..4]));
    let (s_ab, s_cd) = if unsigned(F) {
        let zero = _mm512_setzero_si512();
        (
            _mm512_dpbusd_epi32(zero, w.ab, y_ab),
            _mm512_dpbusd_epi32(zero, w.cd, y_cd),
        )
    } else {
        let flip = _mm512_set1_epi8(-128);
        (
            _mm512_dpbusd_epi32(w.start_ab, _mm512_xor_si512(y_ab, flip), w.ab),
            _mm512_dpbusd_epi32(w.start_cd, _mm512_xor_si512(y_cd, flip), w.cd),
        )
    };
    // Sum each 128-bit chunk (a block half) of both: lane 4c holds s_ab's, 4c + 1 s_cd's.
    let pairs = _mm512_add_epi32(
        _mm512_unpacklo_epi32(s_ab, s_cd),
        _mm512_unpackhi_epi32(s_ab, s_cd),
    );
    _mm512_add_epi32(pairs, _mm512_shuffle_epi32(pairs, _MM_PERM_BADC))
}

/// Whether format `F` decodes to unsigned bytes (0..16 or 0..32, the offset carried by `m`):
/// those are VNNI's unsigned operand as they are, against the signed activations, with no
/// flip and no correction. Signed formats go against activations flipped to unsigned.
const fn unsigned(f: u8) -> bool {
    f == Q4_1 || f == Q5_1
}

/// A group's four weight blocks, two per register, with the sums' starting values.
struct Weights {
    ab: __m512i,
    cd: __m512i,
    /// Signed formats: -128 * (sum of each lane's four weights), where the sums against
    /// activations flipped to unsigned (+128) start, which takes the +128 back out exactly.
    start_ab: __m512i,
    start_cd: __m512i,
}

/// Lanes of [`chunk_sums`] in the scalar kernel's order
/// `[A_lo, B_lo, C_lo, D_lo, A_hi, B_hi, C_hi, D_hi]` (chunks of s_ab: A_lo, A_hi, B_lo,
/// B_hi; of s_cd: C_lo, C_hi, D_lo, D_hi); 16 + i picks lane i of a second register.
const HALVES: [i32; 8] = [0, 8, 1, 9, 4, 12, 5, 13];

#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    let format = format(F);
    let bb = format.block_bytes();
    let stride = x.len() / T; // activation blocks per row, padded to whole groups
    let h = HALVES;
    let one = _mm512_setr_epi32(
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], 0, 0, 0, 0, 0, 0, 0, 0,
    );
    let two = _mm512_setr_epi32(
        h[0],
        h[1],
        h[2],
        h[3],
        h[4],
        h[5],
        h[6],
        h[7],
        16 + h[0],
        16 + h[1],
        16 + h[2],
        16 + h[3],
        16 + h[4],
        16 + h[5],
        16 + h[6],
        16 + h[7],
    );
    // [d0..d3, d0..d3] of the first row, then of the second.
    let spread = _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7);
    let mut padded = [0u8; GROUP * 34];
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        // Rows of the tile two by two in 512-bit accumulators (lanes 0..8 the first row's
        // eight lanes, 8..16 the second's: the same per-lane operations as one by one).
        let mut acc2 = [_mm512_setzero_ps(); 4];
        let mut macc2 = [_mm256_setzero_ps(); 4];
        let mut acc1 = _mm256_setzero_ps();
        let mut macc1 = _mm_setzero_ps();
        for g in 0..stride / GROUP {
            let first = g * GROUP * bb;
            let group = match w_row.get(first..first + GROUP * bb) {
                Some(whole) => whole,
                None => {
                    // Fewer than four blocks: zeros, as the scalar kernel's empty blocks.
                    let part = &w_row[first.min(w_row.len())..];
                    padded.fill(0);
                    padded[..part.len()].copy_from_slice(part);
                    &padded[..GROUP * bb]
                }
            };
            let block = |k: usize| decode::<F>(&group[k * bb..(k + 1) * bb]);
            let ab = _mm512_inserti64x4(_mm512_castsi256_si512(block(0)), block(1), 1);
            let cd = _mm512_inserti64x4(_mm512_castsi256_si512(block(2)), block(3), 1);
            let zero = _mm512_setzero_si512();
            let flip = _mm512_set1_epi8(-128);
            let neg = |w| _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, flip, w));
            let (start_ab, start_cd) = if unsigned(F) {
                (zero, zero)
            } else {
                (neg(ab), neg(cd))
            };
            let w = Weights {
                ab,
                cd,
                start_ab,
                start_cd,
            };
            let (dw, mw) = scales4::<F>(group);
            let mw2 = _mm256_set_m128(mw, mw);
            let at = |t: usize| {
                let row = t * stride + g * GROUP;
                (
                    <&[[i8; 32]; GROUP]>::try_from(&x.qs[row..row + GROUP]),
                    <&[f32; GROUP]>::try_from(&x.d[row..row + GROUP]),
                    <&[f32; GROUP]>::try_from(&x.s[row..row + GROUP]),
                )
            };
            for p in 0..T / 2 {
                let ((Ok(y0), Ok(d0), Ok(s0)), (Ok(y1), Ok(d1), Ok(s1))) =
                    (at(2 * p), at(2 * p + 1))
                else {
                    continue; // unreachable: the ranges have GROUP elements
                };
                let sums = _mm512_permutex2var_epi32(
                    chunk_sums::<F>(&w, y0),
                    two,
                    chunk_sums::<F>(&w, y1),
                );
                let d8 = _mm256_set_m128(_mm_mul_ps(dw, load4(d1)), _mm_mul_ps(dw, load4(d0)));
                let d16 = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(d8));
                let scaled = _mm512_mul_ps(d16, _mm512_cvtepi32_ps(sums));
                acc2[p] = _mm512_add_ps(acc2[p], scaled);
                if format.has_min() {
                    let s8 = _mm256_set_m128(load4(s1), load4(s0));
                    macc2[p] = _mm256_add_ps(macc2[p], _mm256_mul_ps(mw2, s8));
                }
            }
            if T % 2 == 1 {
                let (Ok(y), Ok(d), Ok(s)) = at(T - 1) else {
                    continue; // unreachable, as above
                };
                let sums = _mm512_permutexvar_epi32(one, chunk_sums::<F>(&w, y));
                let d4 = _mm_mul_ps(dw, load4(d));
                let scaled = _mm256_mul_ps(
                    _mm256_set_m128(d4, d4),
                    _mm256_cvtepi32_ps(_mm512_castsi512_si256(sums)),
                );
                acc1 = _mm256_add_ps(acc1, scaled);
                if format.has_min() {
                    macc1 = _mm_add_ps(macc1, _mm_mul_ps(mw, load4(s)));
                }
            }
        }
        let o = out.row(r);
        let mut finish = |t: usize, acc: __m256, macc: __m128| {
            let mut m = [0f32; 4];
            // SAFETY: `m` holds four f32.
            unsafe { _mm_storeu_ps(m.as_mut_ptr(), macc) };
            o[t] = finish_q32(format, hsum8(&lanes(acc)), hsum4(&m));
        };
        for p in 0..T / 2 {
            let (a, m) = (acc2[p], macc2[p]);
            finish(2 * p, _mm512_castps512_ps256(a), _mm256_castps256_ps128(m));
            finish(
                2 * p + 1,
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)),
                _mm256_extractf128_ps(m, 1),
            );
        }
        if T % 2 == 1 {
            finish(T - 1, acc1, macc1);
        }
    }
}
