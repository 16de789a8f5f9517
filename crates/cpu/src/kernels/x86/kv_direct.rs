//! Attention of a few (token, head) pairs read straight from the f16 cache (AVX-512 F and VL): each
//! key or value converted in registers and used there by every pair, where widening a chunk into a
//! buffer first ([`super::widen_key_pairs`], [`super::widen_avx512`]) stored every value and loaded
//! it back once a pair. With one token's three query heads to a KV head (a decoding step of
//! SmolLM2) that buffer was a third of attention's work.
//!
//! Each lane does what the widened kernels' lanes do: the same exact conversions, the same
//! products added in the same order ([`super::scores_key_pairs`]: two slots to a register, eight
//! lanes a slot; [`super::weighted_sum_dense_avx512`]: sixteen values of the output a register,
//! slot after slot), so the bits are the same. Both ask for the rows 4 KB ahead: behind a long
//! context the cache streams from memory (one row behind 1,024 entries 10% faster with it).

use std::arch::x86_64::*;

use super::key_pairs::append_group_scores;
use super::GROUP_SLOTS;
use crate::kernels::F16Rows;

/// Eight values `8c..8c + 8` of slot `a` beside those of slot `b`, widened to sixteen f32.
///
/// # Safety
/// Both rows hold values `8c..8c + 8` (the caller's bounds); the CPU supports AVX-512 F and VL.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn slot_pair(a: &[half::f16], b: &[half::f16], c: usize) -> __m512 {
    // SAFETY: the caller's promise; unaligned 16-byte loads.
    unsafe {
        let low = _mm_loadu_si128(a.as_ptr().add(8 * c) as *const __m128i);
        let high = _mm_loadu_si128(b.as_ptr().add(8 * c) as *const __m128i);
        _mm512_cvtph_ps(_mm256_set_m128i(high, low))
    }
}

/// The scores of the queries `q` (`Q` of them, each of the rows' length, a multiple of 8)
/// against rows `0..count` of `rows` (`count` a multiple of 16), appended to `out[j]` for
/// query `j`: [`super::scores_key_pairs`]'s bits over the same keys widened.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn scores_f16_pairs<const Q: usize>(
    q: [&[f32]; Q],
    rows: F16Rows,
    count: usize,
    scale: f32,
    mut out: [&mut Vec<f32>; Q],
) {
    let len = rows.len;
    assert!(len.is_multiple_of(8) && count.is_multiple_of(GROUP_SLOTS));
    assert!(
        q.iter().all(|q| q.len() == len),
        "queries of the rows' length"
    );
    let chunks = len / 8;
    let scale = _mm512_set1_ps(scale);
    for group in (0..count).step_by(GROUP_SLOTS) {
        // The group's eight slot pairs (slot i beside slot i + 8), rows bounds-checked once.
        let pair = |p: usize| (rows.row(group + p), rows.row(group + p + 8));
        let pairs = [
            pair(0),
            pair(1),
            pair(2),
            pair(3),
            pair(4),
            pair(5),
            pair(6),
            pair(7),
        ];
        // The cache streams from memory at long contexts: ask for the rows 4 KB on.
        let first = pairs[0].0.as_ptr() as *const u8;
        super::prefetch_ahead(first, GROUP_SLOTS * 2 * len);
        let mut acc = [[_mm512_setzero_ps(); 8]; Q];
        for c in 0..chunks {
            let mut q2 = [_mm512_setzero_ps(); Q];
            for (q2, q) in q2.iter_mut().zip(&q) {
                // SAFETY: values 8c..8c + 8 of a query of `len` values; unaligned.
                let q8 = unsafe { _mm256_loadu_ps(q.as_ptr().add(8 * c)) };
                *q2 = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(q8)));
            }
            for (p, &(a, b)) in pairs.iter().enumerate() {
                // SAFETY: rows of `len` values (`F16Rows::row`), c < len / 8.
                let k = unsafe { slot_pair(a, b, c) };
                for (acc, q2) in acc.iter_mut().zip(&q2) {
                    acc[p] = _mm512_add_ps(acc[p], _mm512_mul_ps(*q2, k));
                }
            }
        }
        for (acc, out) in acc.iter().zip(out.iter_mut()) {
            append_group_scores(acc, scale, out);
        }
    }
}

/// `out[j][e] += p[j][s] * rows.row(s)[e]` for the slots `s` of `p[j]` (every `p[j]` as
/// long), slot after slot, for rows whose length is a multiple of 64: each `out[j]` with
/// [`super::weighted_sum_dense_avx512`]'s bits over the same values widened.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn weighted_sums_f16<const Q: usize>(
    rows: F16Rows,
    p: [&[f32]; Q],
    mut out: [&mut [f32]; Q],
) {
    let len = rows.len;
    assert!(len.is_multiple_of(64), "rows of whole 64s");
    assert!(
        out.iter().all(|o| o.len() == len),
        "outputs of the rows' length"
    );
    let count = p.first().map_or(0, |p| p.len());
    assert!(
        p.iter().all(|p| p.len() == count),
        "as many weights for every pair"
    );
    for start in (0..len).step_by(64) {
        let mut acc = [[_mm512_setzero_ps(); 4]; Q];
        for (acc, o) in acc.iter_mut().zip(out.iter()) {
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: values start..start + 64 of an output of `len`; unaligned.
                *a = unsafe { _mm512_loadu_ps(o.as_ptr().add(start + 16 * r)) };
            }
        }
        for s in 0..count {
            let row = &rows.row(s)[start..start + 64];
            super::prefetch_ahead(row.as_ptr() as *const u8, 128);
            // SAFETY: 64 f16 (sliced above), sixteen at a time; unaligned.
            let x = |r: usize| unsafe {
                _mm512_cvtph_ps(_mm256_loadu_si256(
                    row.as_ptr().add(16 * r) as *const __m256i
                ))
            };
            let x = [x(0), x(1), x(2), x(3)];
            for (acc, p) in acc.iter_mut().zip(&p) {
                let pv = _mm512_set1_ps(p[s]);
                for (a, &x) in acc.iter_mut().zip(&x) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(pv, x));
                }
            }
        }
        for (acc, o) in acc.iter().zip(out.iter_mut()) {
            for (r, &a) in acc.iter().enumerate() {
                // SAFETY: as above; unaligned stores.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(start + 16 * r), a) };
            }
        }
    }
}
