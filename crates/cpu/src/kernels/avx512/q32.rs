//! 32-element block formats against 8-bit activation blocks, four blocks per group.

use std::arch::x86_64::*;

use crate::activations::{Q8Layout, Q8Slice};
use crate::formats::Q32Format;
use crate::kernels::avx2::lanes;
use crate::kernels::avx512::decode::{decode_group, decode_q8_0_group};
use crate::kernels::q32_ids::{format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8, GROUP};
use crate::kernels::{each_row, Out};

/// See [`crate::kernels::Kernels::q32_rows`].
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VBMI and VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
pub unsafe fn q32_rows(f: Q32Format, w: &[u8], row_bytes: usize, x: Q8Slice, out: Out) {
    let n = out.tile();
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
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn load4(v: &[f32; GROUP]) -> __m128 {
    // SAFETY: four readable f32.
    unsafe { _mm_loadu_ps(v.as_ptr()) }
}

/// 64 bytes: two consecutive activation blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn load64(two: &[[i8; 32]]) -> __m512i {
    assert!(two.len() >= 2);
    // SAFETY: 64 readable bytes (two blocks, checked); unaligned load.
    unsafe { _mm512_loadu_si512(two.as_ptr() as *const __m512i) }
}

/// One weight group against one activation row in the interleaved layout: two accumulating
/// VNNI products, after which lanes `l` and `l + 8` together hold half-block sum `l` of
/// [`scalar::q32_tile`] (see [`crate::activations::Q8Layout::Interleaved`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn lane_sums<const F: u8>(w: &Weights, ys: &[[i8; 32]; GROUP]) -> __m512i {
    let (y0, y1) = (load64(&ys[0..2]), load64(&ys[2..4]));
    let [w0, w1] = w.halves;
    if unsigned(F) {
        let first = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, y0);
        _mm512_dpbusd_epi32(first, w1, y1)
    } else {
        let flip = _mm512_set1_epi8(-128);
        let first = _mm512_dpbusd_epi32(w.start, _mm512_xor_si512(y0, flip), w0);
        _mm512_dpbusd_epi32(first, _mm512_xor_si512(y1, flip), w1)
    }
}

/// Whether format `F` decodes to unsigned bytes (0..16 or 0..32, the offset carried by `m`):
/// those are VNNI's unsigned operand as they are, against the signed activations, with no
/// flip and no correction. Signed formats go against activations flipped to unsigned.
const fn unsigned(f: u8) -> bool {
    f == Q4_1 || f == Q5_1
}

/// A group's weights in the interleaved order, with the sums' starting value.
struct Weights {
    halves: [__m512i; 2],
    /// Signed formats: -128 * (sum of each lane's eight weights), where the sums against
    /// activations flipped to unsigned (+128) start, which takes the +128 back out exactly.
    start: __m512i,
}

/// The weights of the group at the front of `rest` (a row from the group on) in the
/// interleaved order, and their blocks' scales and offsets; a row's last group may have fewer
/// than [`GROUP`] blocks, the missing ones counting as zeros.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn group<const F: u8>(rest: &[u8]) -> ([__m512i; 2], __m128, __m128) {
    let g = if F == Q8_0 {
        decode_q8_0_group(rest)
    } else {
        decode_group::<F>(rest)
    };
    (g.halves, g.dw, g.mw)
}

/// `N` f32 from the front of `v` (a tile's scales).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn front<const N: usize>(v: &[f32]) -> &[f32; N] {
    match v.first_chunk::<N>() {
        Some(c) => c,
        None => &[0.0; N], // unreachable: the tile's arrays hold every row's scales
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    debug_assert_eq!(x.layout, Q8Layout::Interleaved);
    let format = format(F);
    let bb = format.block_bytes();
    // Activation blocks per row, padded to whole groups.
    let stride = x.len() / T;
    // (A tile of one row's arrangement is its own layout: nothing to pick.)
    let by_tile = T > 1 && x.tile_d.len() == x.d.len();
    // A row's four scales of group `g` (`v`: d or s), and four rows' or two rows' side by side:
    // one load where the tile's scales are arranged (Q8Rows::arrange_tile_scales).
    let four = |v: &[f32], tv: &[f32], g: usize, t: usize| -> __m128 {
        if by_tile {
            load4(front(&tv[(g * T + t) * GROUP..]))
        } else {
            load4(front(&v[t * stride + g * GROUP..]))
        }
    };
    let eight = |v: &[f32], tv: &[f32], g: usize, t: usize| -> __m256 {
        if by_tile {
            // SAFETY: eight readable f32 (checked by `front`).
            unsafe { _mm256_loadu_ps(front::<8>(&tv[(g * T + t) * GROUP..]).as_ptr()) }
        } else {
            _mm256_set_m128(four(v, tv, g, t + 1), four(v, tv, g, t))
        }
    };
    let sixteen = |v: &[f32], tv: &[f32], g: usize, t: usize| -> __m512 {
        if by_tile {
            // SAFETY: sixteen readable f32 (checked by `front`).
            unsafe { _mm512_loadu_ps(front::<16>(&tv[(g * T + t) * GROUP..]).as_ptr()) }
        } else {
            let low = _mm512_castps_pd(_mm512_castps256_ps512(eight(v, tv, g, t)));
            let high = _mm256_castps_pd(eight(v, tv, g, t + 2));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(low, high))
        }
    };
    // Four rows' `d_w * d_x` to each pair's [first x2, second x2].
    let first_pair = _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7);
    let second_pair = _mm512_setr_epi32(8, 9, 10, 11, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15);
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        // Rows of the tile two by two in 512-bit accumulators (lanes 0..8 the first row's
        // eight lanes, 8..16 the second's: the same per-lane operations as one by one); the
        // offsets' sums four rows at a time (`macc4`), then a pair, then one row.
        let mut acc2 = [_mm512_setzero_ps(); 4];
        let mut macc4 = [_mm512_setzero_ps(); 2];
        let mut macc2 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut macc1 = _mm_setzero_ps();
        for g in 0..stride / GROUP {
            let first = (g * GROUP * bb).min(w_row.len());
            let (halves, dw, mw) = group::<F>(&w_row[first..]);
            let start = if unsigned(F) {
                _mm512_setzero_si512()
            } else {
                let flip = _mm512_set1_epi8(-128);
                let sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, halves[0]);
                let sums = _mm512_dpbusd_epi32(sums, flip, halves[1]);
                _mm512_sub_epi32(_mm512_setzero_si512(), sums)
            };
            let w = Weights { halves, start };
            let values = |t: usize| {
                let row = t * stride + g * GROUP;
                <&[[i8; 32]; GROUP]>::try_from(&x.qs[row..row + GROUP])
            };
            // Lanes 0..8: the first row's half-block sums (its low and high 256 bits added),
            // 8..16: the second's.
            let pair_sums = |t: usize| {
                let (Ok(y0), Ok(y1)) = (values(t), values(t + 1)) else {
                    return _mm512_setzero_si512(); // unreachable: GROUP blocks each
                };
                let (l0, l1) = (lane_sums::<F>(&w, y0), lane_sums::<F>(&w, y1));
                _mm512_add_epi32(
                    _mm512_shuffle_i64x2::<0b01_00_01_00>(l0, l1),
                    _mm512_shuffle_i64x2::<0b11_10_11_10>(l0, l1),
                )
            };
            let (dw4, mw4) = (_mm512_broadcast_f32x4(dw), _mm512_broadcast_f32x4(mw));
            for (q, macc) in macc4.iter_mut().enumerate().take(T / 4) {
                let dd = _mm512_mul_ps(dw4, sixteen(x.d, x.tile_d, g, 4 * q));
                for (h, pick) in [first_pair, second_pair].into_iter().enumerate() {
                    let p = 2 * q + h;
                    let scaled = _mm512_mul_ps(
                        _mm512_permutexvar_ps(pick, dd),
                        _mm512_cvtepi32_ps(pair_sums(2 * p)),
                    );
                    acc2[p] = _mm512_add_ps(acc2[p], scaled);
                }
                if format.has_min() {
                    let ms = _mm512_mul_ps(mw4, sixteen(x.s, x.tile_s, g, 4 * q));
                    *macc = _mm512_add_ps(*macc, ms);
                }
            }
            if T % 4 >= 2 {
                let (p, t) = (T / 4 * 2, T / 4 * 4);
                let dd = _mm256_mul_ps(_mm512_castps512_ps256(dw4), eight(x.d, x.tile_d, g, t));
                let d16 = _mm512_permutexvar_ps(first_pair, _mm512_castps256_ps512(dd));
                let scaled = _mm512_mul_ps(d16, _mm512_cvtepi32_ps(pair_sums(t)));
                acc2[p] = _mm512_add_ps(acc2[p], scaled);
                if format.has_min() {
                    let mw2 = _mm512_castps512_ps256(mw4);
                    let ms = _mm256_mul_ps(mw2, eight(x.s, x.tile_s, g, t));
                    macc2 = _mm256_add_ps(macc2, ms);
                }
            }
            if T % 2 == 1 {
                let Ok(y) = values(T - 1) else {
                    continue; // unreachable, as above
                };
                let l = lane_sums::<F>(&w, y);
                let sums =
                    _mm256_add_epi32(_mm512_castsi512_si256(l), _mm512_extracti64x4_epi64::<1>(l));
                let d4 = _mm_mul_ps(dw, four(x.d, x.tile_d, g, T - 1));
                let scaled = _mm256_mul_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(sums));
                acc1 = _mm256_add_ps(acc1, scaled);
                if format.has_min() {
                    macc1 = _mm_add_ps(macc1, _mm_mul_ps(mw, four(x.s, x.tile_s, g, T - 1)));
                }
            }
        }
        let mut o = [0f32; T];
        for (t, o) in o.iter_mut().enumerate() {
            let acc = if t < T / 2 * 2 {
                let a = acc2[t / 2];
                if t % 2 == 0 {
                    _mm512_castps512_ps256(a)
                } else {
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))
                }
            } else {
                acc1
            };
            let macc = if t < T / 4 * 4 {
                let m = macc4[t / 4];
                match t % 4 {
                    0 => _mm512_extractf32x4_ps::<0>(m),
                    1 => _mm512_extractf32x4_ps::<1>(m),
                    2 => _mm512_extractf32x4_ps::<2>(m),
                    _ => _mm512_extractf32x4_ps::<3>(m),
                }
            } else if t < T / 2 * 2 {
                if t % 2 == 0 {
                    _mm256_castps256_ps128(macc2)
                } else {
                    _mm256_extractf128_ps(macc2, 1)
                }
            } else {
                macc1
            };
            let mut m = [0f32; 4];
            // SAFETY: `m` holds four f32.
            unsafe { _mm_storeu_ps(m.as_mut_ptr(), macc) };
            *o = finish_q32(format, hsum8(&lanes(acc)), hsum4(&m));
        }
        out.put(r, &o);
    }
}
