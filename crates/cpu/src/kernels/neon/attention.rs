//! One attention head over f16 cache rows: scores and the weighted sum of values, in
//! `scalar::scores` and `scalar::weighted_sum`'s order.

use core::arch::aarch64::*;

use super::{lanes8, load4, load8_f16, store4};
use crate::kernels::scalar::hsum8;
use crate::kernels::F16Rows;

/// See [`crate::kernels::Kernels::scores`].
#[target_feature(enable = "neon")]
pub fn scores(q: &[f32], k: F16Rows, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
    let len = k.len.min(q.len());
    let whole = len / 8 * 8;
    out.clear();
    for &slot in slots {
        let row = k.row(slot);
        let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        for c in (0..whole).step_by(8) {
            let (k_lo, k_hi) = load8_f16(row, c);
            lo = vaddq_f32(lo, vmulq_f32(load4(&q[c..]), k_lo));
            hi = vaddq_f32(hi, vmulq_f32(load4(&q[c + 4..]), k_hi));
        }
        let mut l = lanes8(lo, hi);
        for i in whole..len {
            l[i % 8] += q[i] * row[i].to_f32();
        }
        out.push(hsum8(&l) * scale);
    }
}

/// See [`crate::kernels::Kernels::weighted_sum`].
#[target_feature(enable = "neon")]
pub fn weighted_sum(v: F16Rows, slots: &[usize], p: &[f32], out: &mut [f32]) {
    let len = v.len.min(out.len());
    let whole = len / 8 * 8;
    for (&slot, &pj) in slots.iter().zip(p) {
        let row = v.row(slot);
        let pv = vdupq_n_f32(pj);
        for c in (0..whole).step_by(8) {
            let (v_lo, v_hi) = load8_f16(row, c);
            let o = &mut out[c..c + 8];
            let lo = vaddq_f32(load4(o), vmulq_f32(pv, v_lo));
            let hi = vaddq_f32(load4(&o[4..]), vmulq_f32(pv, v_hi));
            store4(o, lo);
            store4(&mut o[4..], hi);
        }
        for e in whole..len {
            out[e] += pj * row[e].to_f32();
        }
    }
}
