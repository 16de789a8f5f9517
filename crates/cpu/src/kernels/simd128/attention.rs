//! One attention head over f16 cache rows: scores and the weighted sum of values, in
//! `scalar::scores` and `scalar::weighted_sum`'s order.

use core::arch::wasm32::*;

use super::{lanes8, load4, load8_f16, store4};
use crate::kernels::scalar::hsum8;
use crate::kernels::F16Rows;

/// See [`crate::kernels::Kernels::scores`]. Eight slots at a time where the head's length is
/// a multiple of 8 (eight independent sums in flight instead of one chain); each slot's sum is
/// still folded by the scalar [`hsum8`].
pub fn scores(q: &[f32], k: F16Rows, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
    let len = k.len.min(q.len());
    let q = &q[..len];
    out.clear();
    let mut eights = slots.chunks_exact(8);
    if len.is_multiple_of(8) {
        for eight in eights.by_ref() {
            let rows: [&[half::f16]; 8] = std::array::from_fn(|j| k.row(eight[j]));
            let zero = f32x4_splat(0.0);
            let (mut lo, mut hi) = ([zero; 8], [zero; 8]);
            for c in (0..len).step_by(8) {
                let (q_lo, q_hi) = (load4(&q[c..]), load4(&q[c + 4..]));
                for j in 0..8 {
                    let (k_lo, k_hi) = load8_f16(rows[j], c);
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
            let (k_lo, k_hi) = load8_f16(row, c);
            lo = f32x4_add(lo, f32x4_mul(load4(&q[c..]), k_lo));
            hi = f32x4_add(hi, f32x4_mul(load4(&q[c + 4..]), k_hi));
        }
        let mut l = lanes8(lo, hi);
        for i in whole..len {
            l[i % 8] += q[i] * row[i].to_f32();
        }
        out.push(hsum8(&l) * scale);
    }
}

/// See [`crate::kernels::Kernels::weighted_sum`]. The output stays in registers across the
/// slots, 32 elements at a time (the same additions in the same order as one slot at a time
/// through memory).
pub fn weighted_sum(v: F16Rows, slots: &[usize], p: &[f32], out: &mut [f32]) {
    let len = v.len.min(out.len());
    let by32 = len / 32 * 32;
    for start in (0..by32).step_by(32) {
        let o = &mut out[start..start + 32];
        let mut acc: [v128; 8] = std::array::from_fn(|r| load4(&o[4 * r..]));
        for (&slot, &pj) in slots.iter().zip(p) {
            let row = &v.row(slot)[start..start + 32];
            let pv = f32x4_splat(pj);
            for h in 0..4 {
                let (v_lo, v_hi) = load8_f16(row, 8 * h);
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
            let (v_lo, v_hi) = load8_f16(row, c);
            let o = &mut out[c..c + 8];
            let lo = f32x4_add(load4(o), f32x4_mul(pv, v_lo));
            let hi = f32x4_add(load4(&o[4..]), f32x4_mul(pv, v_hi));
            store4(o, lo);
            store4(&mut o[4..], hi);
        }
        for e in whole..len {
            out[e] += pj * row[e].to_f32();
        }
    }
}
