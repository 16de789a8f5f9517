//! One attention head over the cache's rows, f16 as stored or widened to f32 once for all the
//! (token, head) pairs that read them: scores and the weighted sum of values, in
//! `scalar::scores` and `scalar::weighted_sum`'s order.

use core::arch::wasm32::*;

use super::{lanes8, load4, load8_f16, store4};
use crate::kernels::scalar::hsum8;
use crate::kernels::{F16Rows, Rows, Widen};

/// An element of attention's rows, eight at a time as two f32x4.
pub trait Load8: Widen {
    /// Elements `at..at + 8` of `v` (elements 0..4, 4..8).
    fn load8(v: &[Self], at: usize) -> (v128, v128);
}

impl Load8 for half::f16 {
    #[inline]
    fn load8(v: &[Self], at: usize) -> (v128, v128) {
        load8_f16(v, at)
    }
}

impl Load8 for f32 {
    #[inline]
    fn load8(v: &[Self], at: usize) -> (v128, v128) {
        (load4(&v[at..]), load4(&v[at + 4..]))
    }
}

/// Rows `0..count` of `rows` widened to f32 one after another into `out` (`[count, len]`):
/// each value `half`'s exact conversion. (f16 has no conversion instruction in wasm: converting
/// once for all the pairs that read a KV head, not once a pair, is most of what widening saves.)
pub fn widen(rows: F16Rows, count: usize, out: &mut [f32]) {
    let len = rows.len;
    let whole = len / 8 * 8;
    for (slot, dst) in out.chunks_exact_mut(len.max(1)).enumerate().take(count) {
        let row = rows.row(slot);
        for c in (0..whole).step_by(8) {
            let (lo, hi) = load8_f16(row, c);
            store4(&mut dst[c..], lo);
            store4(&mut dst[c + 4..], hi);
        }
        for (d, v) in dst[whole..].iter_mut().zip(&row[whole..]) {
            *d = v.to_f32();
        }
    }
}

/// See [`crate::kernels::Kernels::scores`]. Eight slots at a time where the head's length is
/// a multiple of 8 (eight independent sums in flight instead of one chain); each slot's sum is
/// still folded by the scalar [`hsum8`].
pub fn scores<E: Load8>(q: &[f32], k: Rows<E>, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
    let len = k.len.min(q.len());
    let q = &q[..len];
    out.clear();
    let mut eights = slots.chunks_exact(8);
    if len.is_multiple_of(8) {
        for eight in eights.by_ref() {
            let rows: [&[E]; 8] = std::array::from_fn(|j| k.row(eight[j]));
            let zero = f32x4_splat(0.0);
            let (mut lo, mut hi) = ([zero; 8], [zero; 8]);
            for c in (0..len).step_by(8) {
                let (q_lo, q_hi) = (load4(&q[c..]), load4(&q[c + 4..]));
                for j in 0..8 {
                    let (k_lo, k_hi) = E::load8(rows[j], c);
                    lo[j] = f32x4_add(lo[j], f32x4_mul(q_lo, k_lo));
                    hi[j] = f32x4_add(hi[j], f32x4_mul(q_hi, k_hi));
                }
            }
            for j in 0..8 {
                out.push(hsum8(&lanes8(lo[j], hi[j])) * scale);
            }
        }
    }
    let rest = match len % 8 {
        0 => eights.remainder(),
        _ => slots,
    };
    for &slot in rest {
        let row = k.row(slot);
        let whole = len / 8 * 8;
        let (mut lo, mut hi) = (f32x4_splat(0.0), f32x4_splat(0.0));
        for c in (0..whole).step_by(8) {
            let (k_lo, k_hi) = E::load8(row, c);
            lo = f32x4_add(lo, f32x4_mul(load4(&q[c..]), k_lo));
            hi = f32x4_add(hi, f32x4_mul(load4(&q[c + 4..]), k_hi));
        }
        let mut l = lanes8(lo, hi);
        for i in whole..len {
            l[i % 8] += q[i] * row[i].widen();
        }
        out.push(hsum8(&l) * scale);
    }
}

/// See [`crate::kernels::Kernels::weighted_sum`]. The output stays in registers across the
/// slots, 32 elements at a time (the same additions in the same order as one slot at a time
/// through memory).
pub fn weighted_sum<E: Load8>(v: Rows<E>, slots: &[usize], p: &[f32], out: &mut [f32]) {
    let len = v.len.min(out.len());
    let by32 = len / 32 * 32;
    for start in (0..by32).step_by(32) {
        let o = &mut out[start..start + 32];
        let mut acc: [v128; 8] = std::array::from_fn(|r| load4(&o[4 * r..]));
        for (&slot, &pj) in slots.iter().zip(p) {
            let row = &v.row(slot)[start..start + 32];
            let pv = f32x4_splat(pj);
            for h in 0..4 {
                let (v_lo, v_hi) = E::load8(row, 8 * h);
                acc[2 * h] = f32x4_add(acc[2 * h], f32x4_mul(pv, v_lo));
                acc[2 * h + 1] = f32x4_add(acc[2 * h + 1], f32x4_mul(pv, v_hi));
            }
        }
        for (r, a) in acc.iter().enumerate() {
            store4(&mut o[4 * r..], *a);
        }
    }
    let whole = len / 8 * 8;
    for (&slot, &pj) in slots.iter().zip(p) {
        let row = v.row(slot);
        let pv = f32x4_splat(pj);
        for c in (by32..whole).step_by(8) {
            let (v_lo, v_hi) = E::load8(row, c);
            let o = &mut out[c..c + 8];
            let lo = f32x4_add(load4(o), f32x4_mul(pv, v_lo));
            let hi = f32x4_add(load4(&o[4..]), f32x4_mul(pv, v_hi));
            store4(o, lo);
            store4(&mut o[4..], hi);
        }
        for e in whole..len {
            out[e] += pj * row[e].widen();
        }
    }
}
