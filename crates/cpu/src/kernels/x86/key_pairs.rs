//! Attention's scores with 512-bit registers (AVX-512 F and VL): keys widened in slot pairs, so
//! that one register holds the same eight values of two slots and each multiply and add serves
//! both.
//!
//! A score's definition ([`crate::kernels::scalar::scores`]) gives each of eight lanes every
//! eighth product of its slot, added in order, then [`crate::kernels::scalar::hsum8`]: a slot's
//! sum cannot spread over sixteen lanes without reordering it, but two slots side by side keep
//! each lane's order, so the bits are the same and the instructions half those of the 256-bit
//! kernel ([`super::scores_dense`]) on a core that multiplies 512 bits as fast as 256 (Zen 5).
//!
//! The layout, for `count` keys of `len` values (`count` a multiple of 16, `len` of 8): groups
//! of sixteen slots, each eight pairs (slot `i` beside slot `i + 8`), each pair `len / 8`
//! registers of sixteen values: slot `i`'s values `8c..8c + 8`, then slot `i + 8`'s.

use std::arch::x86_64::*;

use crate::kernels::F16Rows;

/// Slots in a group: eight pairs.
pub const GROUP_SLOTS: usize = 16;

/// Where slot `s`'s values `8c..8c + 8` start in the layout (keys of `len` values).
fn offset(s: usize, c: usize, len: usize) -> usize {
    let (group, pair, half) = (s / GROUP_SLOTS, s % 8, s % GROUP_SLOTS / 8);
    ((group * 8 + pair) * (len / 8) + c) * GROUP_SLOTS + half * 8
}

/// Rows `0..count` of `rows` widened to f32 in the paired layout (`out`: `count * len`
/// values). Each value is the exact conversion, as [`super::widen`]'s.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn widen_key_pairs(rows: F16Rows, count: usize, out: &mut [f32]) {
    let len = rows.len;
    assert!(len.is_multiple_of(8) && count.is_multiple_of(GROUP_SLOTS));
    assert!(out.len() >= count * len, "room for the keys");
    for s in 0..count {
        let row = rows.row(s);
        super::prefetch_ahead(row.as_ptr() as *const u8, 2 * len);
        for c in 0..len / 8 {
            let (src, at) = (&row[8 * c..8 * c + 8], offset(s, c, len));
            let dst = &mut out[at..at + 8];
            // SAFETY: 8 f16 (16 bytes) and 8 f32, in bounds (sliced above); unaligned.
            unsafe {
                let wide = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr() as *const __m128i));
                _mm256_storeu_ps(dst.as_mut_ptr(), wide);
            }
        }
    }
}

/// The scores of each query `q[j]` against `count` keys in the paired layout
/// ([`widen_key_pairs`]), appended to `out[j]`: the bits of [`super::scores_dense`] over the
/// same keys one after another. Each key register is loaded once for all `Q` queries: one
/// query a load waited on the loads (a core that loads one 512-bit register a cycle, Zen 5,
/// multiplies and adds two), where three keep the multiplies and adds busy; three queries'
/// accumulators (eight registers each) and their broadcast values fill the 32 registers.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn scores_key_pairs<const Q: usize>(
    q: [&[f32]; Q],
    keys: &[f32],
    count: usize,
    scale: f32,
    mut out: [&mut Vec<f32>; Q],
) {
    let len = q.first().map_or(0, |q| q.len());
    assert!(len.is_multiple_of(8) && count.is_multiple_of(GROUP_SLOTS));
    assert!(q.iter().all(|q| q.len() == len), "queries of one length");
    assert!(keys.len() >= count * len, "the keys");
    let chunks = len / 8;
    let scale = _mm512_set1_ps(scale);
    for group in keys[..count * len].chunks_exact(GROUP_SLOTS * len) {
        let mut acc = [[_mm512_setzero_ps(); 8]; Q];
        for c in 0..chunks {
            let mut q2 = [_mm512_setzero_ps(); Q];
            for (q2, q) in q2.iter_mut().zip(&q) {
                // SAFETY: values 8c..8c + 8 of a query of `len` values (c < len / 8); unaligned.
                let q8 = unsafe { _mm256_loadu_ps(q.as_ptr().add(8 * c)) };
                *q2 = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(q8)));
            }
            for pair in 0..8 {
                // SAFETY: register c of pair `pair`, inside the group's `16 * len` values;
                // unaligned.
                let k = unsafe {
                    _mm512_loadu_ps(group.as_ptr().add((pair * chunks + c) * GROUP_SLOTS))
                };
                for (acc, q2) in acc.iter_mut().zip(&q2) {
                    acc[pair] = _mm512_add_ps(acc[pair], _mm512_mul_ps(*q2, k));
                }
            }
        }
        for (acc, out) in acc.iter().zip(out.iter_mut()) {
            append_group_scores(acc, scale, out);
        }
    }
}

/// A group's sixteen scores appended to `out`, from its eight slot pairs' accumulators (slots
/// 0..8 of the group in the low halves, 8..16 in the high), each slot's lanes summed as
/// `scores_dense` sums eight slots ([`super::tile_hsum8`]'s additions), then scaled. Both
/// halves are summed at once: every step of `tile_hsum8` after its first keeps to 128-bit
/// lanes, so the slots' 128-bit lanes may sit anywhere until one permutation at the end (the
/// 256-bit halves' sums, extracted and stored through the stack, were 43% of the scores' time).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) fn append_group_scores(acc: &[__m512; 8], scale: __m512, out: &mut Vec<f32>) {
    // 128-bit lanes [a0 + a1, a2 + a3, b0 + b1, b2 + b3]: each slot's `a_l + a_{l+4}` (its
    // halves), slot p's and slot p + 8's of `a`, then of `b`.
    let halves = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
        )
    };
    // tile_hsum4's in-lane steps: pairs (0, 2) and (1, 3) of its rows, then all four.
    let fold = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_ps::<0b01_00_01_00>(a, b),
            _mm512_shuffle_ps::<0b11_10_11_10>(a, b),
        )
    };
    let (h0, h1) = (halves(acc[0], acc[1]), halves(acc[2], acc[3]));
    let (h2, h3) = (halves(acc[4], acc[5]), halves(acc[6], acc[7]));
    let (a, b) = (fold(h0, h1), fold(h2, h3));
    // 128-bit lanes: slots [0, 2, 4, 6], [8, 10, 12, 14], [1, 3, 5, 7], [9, 11, 13, 15].
    let v = _mm512_add_ps(
        _mm512_shuffle_ps::<0b10_00_10_00>(a, b),
        _mm512_shuffle_ps::<0b11_01_11_01>(a, b),
    );
    let order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    let scores = _mm512_mul_ps(_mm512_permutexvar_ps(order, v), scale);
    out.reserve(GROUP_SLOTS);
    let len = out.len();
    // SAFETY: room for sixteen values reserved past `len`; they are written before the length
    // covers them.
    unsafe {
        _mm512_storeu_ps(out.as_mut_ptr().add(len), scores);
        out.set_len(len + GROUP_SLOTS);
    }
}
