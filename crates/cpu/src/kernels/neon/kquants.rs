//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256: a super-block
//! is decoded once (by [`scalar::decode_k`]) for every activation row of the tile, its
//! integer lane sums are taken sixteen products at a time (exact, so the same as the scalar
//! sums), and the float steps and the final sum are the scalar ones.

use core::arch::aarch64::*;

use super::load16_i8;
use crate::activations::BlockQ8K;
use crate::formats::KFormat;
use crate::kernels::scalar::{self, hsum8, k_lane_step, KBlock};
use crate::kernels::{each_row, Out, TILE};

/// See [`crate::kernels::Kernels::k_rows`].
#[target_feature(enable = "neon")]
pub fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], mut out: Out) {
    let n = out.tile();
    if !(1..=TILE).contains(&n) {
        return each_row(w, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o));
    }
    let nb = x.len() / n;
    for (r, w_row) in w.chunks_exact(row_bytes).enumerate() {
        let mut acc = [[0f32; 8]; TILE];
        for (b, block) in w_row.chunks_exact(f.block_bytes()).enumerate() {
            let k = scalar::decode_k(f, block);
            for (t, acc) in acc.iter_mut().enumerate().take(n) {
                let xb = &x[t * nb + b];
                let (sumi, summ) = lane_sums(&k, xb);
                k_lane_step(f, acc, k.d, k.dmin, xb.d, &sumi, &summ);
            }
        }
        let sums: [f32; TILE] = std::array::from_fn(|t| hsum8(&acc[t]));
        out.put(r, &sums[..n]);
    }
}

/// [`scalar::k_lane_sums`], sixteen products at a time.
#[inline]
#[target_feature(enable = "neon")]
fn lane_sums(k: &KBlock, x: &BlockQ8K) -> ([i32; 8], [i32; 8]) {
    let sumi = std::array::from_fn(|l| {
        let mut acc = vdupq_n_s32(0);
        for g in 2 * l..2 * l + 2 {
            let (w, y) = (load16_i8(&k.q[16 * g..]), load16_i8(&x.qs[16 * g..]));
            // |q| <= 63 (Q6_K: 32), |y| <= 127: pair sums fit an i16.
            let pairs = vaddq_s16(
                vmull_s8(vget_low_s8(w), vget_low_s8(y)),
                vmull_high_s8(w, y),
            );
            acc = vmlaq_s32(acc, vpaddlq_s16(pairs), vdupq_n_s32(k.scales[g]));
        }
        vaddvq_s32(acc)
    });
    let summ =
        std::array::from_fn(|l| k.mins[l] * (x.bsums[2 * l] as i32 + x.bsums[2 * l + 1] as i32));
    (sumi, summ)
}
