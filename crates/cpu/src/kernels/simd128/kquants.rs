//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256: a super-block
//! is decoded once (by [`scalar::decode_k`]) for every activation row of the tile, its
//! integer lane sums are taken sixteen products at a time (exact, so the same as the scalar
//! sums), and the float steps and the final sum are the scalar ones.

use core::arch::wasm32::*;

use super::load16_i8;
use crate::activations::BlockQ8K;
use crate::formats::KFormat;
use crate::kernels::scalar::{self, hsum8, k_lane_step, KBlock};
use crate::kernels::{each_row, Out, TILE};

/// See [`crate::kernels::Kernels::k_rows`].
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
fn lane_sums(k: &KBlock, x: &BlockQ8K) -> ([i32; 8], [i32; 8]) {
    let sumi = std::array::from_fn(|l| {
        let mut acc = i32x4_splat(0);
        for g in 2 * l..2 * l + 2 {
            let (w, y) = (load16_i8(&k.q[16 * g..]), load16_i8(&x.qs[16 * g..]));
            // |q| <= 63 (Q6_K: 32), |y| <= 127: pair sums fit an i16.
            let pairs = i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y));
            let run = i32x4_extadd_pairwise_i16x8(pairs);
            acc = i32x4_add(acc, i32x4_mul(run, i32x4_splat(k.scales[g])));
        }
        i32x4_extract_lane::<0>(acc)
            + i32x4_extract_lane::<1>(acc)
            + i32x4_extract_lane::<2>(acc)
            + i32x4_extract_lane::<3>(acc)
    });
    let summ =
        std::array::from_fn(|l| k.mins[l] * (x.bsums[2 * l] as i32 + x.bsums[2 * l + 1] as i32));
    (sumi, summ)
}
