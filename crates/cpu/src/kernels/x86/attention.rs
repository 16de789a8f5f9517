//! One attention head over f16 cache rows: scores and the weighted sum of values, in
//! `scalar::scores` and `scalar::weighted_sum`'s order.

use std::arch::x86_64::*;

use super::{lanes, tile_hsum8};
use crate::kernels::scalar::hsum8;
use crate::kernels::{F16Rows, Rows, Widen};

/// A row element the kernels load eight at a time as f32: the cache's f16 (converted at each
/// load) or rows widened once ([`widen`]).
pub trait Lanes: Widen {
    /// Eight elements from `v[at..at + 8]` as f32.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C.
    unsafe fn load8(v: &[Self], at: usize) -> __m256;
}

impl Lanes for half::f16 {
    #[inline(always)]
    unsafe fn load8(v: &[Self], at: usize) -> __m256 {
        let eight = &v[at..at + 8];
        // SAFETY: eight readable f16 (16 bytes), unaligned load; F16C by the caller.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(eight.as_ptr() as *const __m128i)) }
    }
}

impl Lanes for f32 {
    #[inline(always)]
    unsafe fn load8(v: &[Self], at: usize) -> __m256 {
        let eight = &v[at..at + 8];
        // SAFETY: eight readable f32, unaligned load; AVX by the caller.
        unsafe { _mm256_loadu_ps(eight.as_ptr()) }
    }
}

/// Eight elements of `v` from `at` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load8<E: Lanes>(v: &[E], at: usize) -> __m256 {
    // SAFETY: this function's features are the ones `load8` needs.
    unsafe { E::load8(v, at) }
}

/// See [`crate::kernels::Kernels::widen`] (`out`: `count * rows.len` long).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn widen(rows: F16Rows, count: usize, out: &mut [f32]) {
    let len = rows.len;
    let whole = len / 8 * 8;
    for (slot, dst) in out.chunks_exact_mut(len.max(1)).enumerate().take(count) {
        let row = rows.row(slot);
        for c in (0..whole).step_by(8) {
            let eight = &mut dst[c..c + 8];
            // SAFETY: eight writable f32; unaligned store.
            unsafe { _mm256_storeu_ps(eight.as_mut_ptr(), load8(row, c)) };
        }
        for (d, v) in dst[whole..].iter_mut().zip(&row[whole..]) {
            *d = v.to_f32();
        }
    }
}

/// See [`crate::kernels::Kernels::scores`]. Eight slots at a time where the head's length is
/// a multiple of 8: eight independent sums in flight instead of one chain, and their eight
/// horizontal sums taken together in [`hsum8`]'s order.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn scores<E: Lanes>(
    q: &[f32],
    k: Rows<E>,
    slots: &[usize],
    scale: f32,
    out: &mut Vec<f32>,
) {
    let len = k.len.min(q.len());
    out.clear();
    let mut eights = slots.chunks_exact(8);
    if len.is_multiple_of(8) {
        for eight in eights.by_ref() {
            let sums = scores8(&q[..len], &k, eight, scale);
            out.extend_from_slice(&lanes(sums));
        }
    }
    let rest = match len % 8 {
        0 => eights.remainder(),
        _ => slots,
    };
    for &slot in rest {
        out.push(score(&q[..len], k.row(slot)) * scale);
    }
}

/// One slot's dot product, in the scalar lane order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn score<E: Lanes>(q: &[f32], row: &[E]) -> f32 {
    let len = q.len();
    let whole = len / 8 * 8;
    let mut acc = _mm256_setzero_ps();
    for c in (0..whole).step_by(8) {
        acc = _mm256_add_ps(acc, _mm256_mul_ps(load8f(q, c), load8(row, c)));
    }
    let mut l = lanes(acc);
    for i in whole..len {
        l[i % 8] += q[i] * row[i].widen();
    }
    hsum8(&l)
}

/// Eight f32 from `v[at..at + 8]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load8f(v: &[f32], at: usize) -> __m256 {
    let eight = &v[at..at + 8];
    // SAFETY: eight readable f32; unaligned load.
    unsafe { _mm256_loadu_ps(eight.as_ptr()) }
}

/// The scores of eight slots (`q.len()` a multiple of 8), in slot order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scores8<E: Lanes>(q: &[f32], k: &Rows<E>, slots: &[usize], scale: f32) -> __m256 {
    // (Written out: a closure given to `from_fn` is compiled without the target features.)
    let rows: [&[E]; 8] = [
        k.row(slots[0]),
        k.row(slots[1]),
        k.row(slots[2]),
        k.row(slots[3]),
        k.row(slots[4]),
        k.row(slots[5]),
        k.row(slots[6]),
        k.row(slots[7]),
    ];
    let mut acc = [_mm256_setzero_ps(); 8];
    for c in (0..q.len()).step_by(8) {
        let qv = load8f(q, c);
        for (a, row) in acc.iter_mut().zip(&rows) {
            *a = _mm256_add_ps(*a, _mm256_mul_ps(qv, load8(row, c)));
        }
    }
    // hsum8 of each, all at once, in slot order.
    _mm256_mul_ps(tile_hsum8(acc), _mm256_set1_ps(scale))
}

/// See [`crate::kernels::Kernels::weighted_sum`]. The output stays in registers across the
/// slots, 64 elements at a time (the same additions in the same order as one slot at a time
/// through memory).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn weighted_sum<E: Lanes>(v: Rows<E>, slots: &[usize], p: &[f32], out: &mut [f32]) {
    let len = v.len.min(out.len());
    let by64 = len / 64 * 64;
    for start in (0..by64).step_by(64) {
        let o = &mut out[start..start + 64];
        let mut acc: [__m256; 8] = std::array::from_fn(|r| load8f(o, 8 * r));
        for (&slot, &pj) in slots.iter().zip(p) {
            let row = &v.row(slot)[start..start + 64];
            let pv = _mm256_set1_ps(pj);
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, load8(row, 8 * r)));
            }
        }
        for (r, a) in acc.iter().enumerate() {
            o[8 * r..8 * r + 8].copy_from_slice(&lanes(*a));
        }
    }
    let whole = len / 8 * 8;
    for (&slot, &pj) in slots.iter().zip(p) {
        let row = v.row(slot);
        let pv = _mm256_set1_ps(pj);
        for c in (by64..whole).step_by(8) {
            let sum = _mm256_add_ps(load8f(out, c), _mm256_mul_ps(pv, load8(row, c)));
            out[c..c + 8].copy_from_slice(&lanes(sum));
        }
        for e in whole..len {
            out[e] += pj * row[e].widen();
        }
    }
}

/// [`scores`] over rows `0..count` of `len` f32 one after another (`k`: `[count, len]`, a
/// widened chunk of the cache, every slot visible): the same bits, each row reached by a pointer
/// step where a slot's index cost its row's address and bounds check.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn scores_dense(
    q: &[f32],
    k: &[f32],
    (count, len): (usize, usize),
    scale: f32,
    out: &mut Vec<f32>,
) {
    out.clear();
    let (q, k) = (&q[..len], &k[..count * len]);
    // Eight rows at a time where the rows are whole eights of values (as `scores`).
    let eights = if len > 0 && len.is_multiple_of(8) {
        count / 8 * 8 * len
    } else {
        0
    };
    for eight in k[..eights].chunks_exact(8 * len) {
        let mut acc = [_mm256_setzero_ps(); 8];
        for c in (0..len).step_by(8) {
            let qv = load8f(q, c);
            for (s, a) in acc.iter_mut().enumerate() {
                // SAFETY: row s of the eight, elements c..c + 8 (c + 8 <= len); unaligned.
                let key = unsafe { _mm256_loadu_ps(eight.as_ptr().add(s * len + c)) };
                *a = _mm256_add_ps(*a, _mm256_mul_ps(qv, key));
            }
        }
        out.extend_from_slice(&lanes(_mm256_mul_ps(
            tile_hsum8(acc),
            _mm256_set1_ps(scale),
        )));
    }
    for s in eights / len.max(1)..count {
        out.push(score(q, &k[s * len..(s + 1) * len]) * scale);
    }
}

/// [`weighted_sum`] over rows `0..p.len()` of `stride` f32 one after another (`v`: `[rows,
/// stride]`, as [`scores_dense`] takes them; `out`: the first `len <= stride` values of a row):
/// the same bits (slot after slot), a pointer step per row.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn weighted_sum_dense(v: &[f32], stride: usize, p: &[f32], out: &mut [f32]) {
    let len = stride.min(out.len());
    let count = p.len();
    let v = &v[..count * stride];
    let by64 = len / 64 * 64;
    for start in (0..by64).step_by(64) {
        let o = &mut out[start..start + 64];
        let mut acc: [__m256; 8] = [
            load8f(o, 0),
            load8f(o, 8),
            load8f(o, 16),
            load8f(o, 24),
            load8f(o, 32),
            load8f(o, 40),
            load8f(o, 48),
            load8f(o, 56),
        ];
        let mut row = v.as_ptr().wrapping_add(start);
        for &pj in &p[..count] {
            let pv = _mm256_set1_ps(pj);
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: elements start..start + 64 of a row of `v` (`count` rows of
                // `stride >= start + 64`); unaligned.
                let x = unsafe { _mm256_loadu_ps(row.add(8 * r)) };
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, x));
            }
            row = row.wrapping_add(stride);
        }
        for (r, a) in acc.iter().enumerate() {
            o[8 * r..8 * r + 8].copy_from_slice(&lanes(*a));
        }
    }
    // SAFETY: this function's contract: the CPU has AVX2, FMA and F16C.
    unsafe { weighted_sum_dense_tail(v, stride, p, &mut out[..len], by64) };
}

/// [`weighted_sum_dense`]'s values `from..out.len()` of each row (past its blocks of 64), slot
/// after slot: eight at a time, then one.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weighted_sum_dense_tail(
    v: &[f32],
    stride: usize,
    p: &[f32],
    out: &mut [f32],
    from: usize,
) {
    let len = out.len();
    let whole = len / 8 * 8;
    for (row, &pj) in v.chunks_exact(stride.max(1)).zip(p) {
        let pv = _mm256_set1_ps(pj);
        for c in (from..whole).step_by(8) {
            let sum = _mm256_add_ps(load8f(out, c), _mm256_mul_ps(pv, load8f(row, c)));
            out[c..c + 8].copy_from_slice(&lanes(sum));
        }
        for e in whole.max(from)..len {
            out[e] += pj * row[e];
        }
    }
}
