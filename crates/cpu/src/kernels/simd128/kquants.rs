//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256: a super-block
//! is decoded once (by [`scalar::decode_k`]) for every activation row of the tile, and its
//! integer sums are taken sixteen products at a time (exact, so the same as the scalar sums).

use core::arch::wasm32::*;

use super::load16_i8;
use crate::activations::BlockQ8K;
use crate::formats::KFormat;
use crate::kernels::scalar::{self, k_step, KBlock};
use crate::kernels::{each_row, Out, TILE};

/// See [`crate::kernels::Kernels::k_rows`].
pub fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], mut out: Out) {
    let n = out.tile();
    if !(1..=TILE).contains(&n) {
        return each_row(w, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o));
    }
    let nb = x.len() / n;
    for (r, w_row) in w.chunks_exact(row_bytes).enumerate() {
        let mut acc = [0f32; TILE];
        for (b, block) in w_row.chunks_exact(f.block_bytes()).enumerate() {
            let k = scalar::decode_k(f, block);
            for (t, a) in acc.iter_mut().enumerate().take(n) {
                let xb = &x[t * nb + b];
                let (sumi, summ) = sums(&k, xb);
                *a = k_step(f, *a, k.d, k.dmin, xb.d, sumi, summ);
            }
        }
        out.put(r, &acc[..n]);
    }
}

/// [`scalar::k_sums`], sixteen products at a time.
#[inline]
fn sums(k: &KBlock, x: &BlockQ8K) -> (i32, i32) {
    let mut acc = i32x4_splat(0);
    for g in 0..16 {
        let (w, y) = (load16_i8(&k.q[16 * g..]), load16_i8(&x.qs[16 * g..]));
        // |q| <= 63 (Q6_K: 32), |y| <= 127: pair sums fit an i16.
        let pairs = i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y));
        let run = i32x4_extadd_pairwise_i16x8(pairs);
        acc = i32x4_add(acc, i32x4_mul(run, i32x4_splat(k.scales[g])));
    }
    let sumi = i32x4_extract_lane::<0>(acc)
        + i32x4_extract_lane::<1>(acc)
        + i32x4_extract_lane::<2>(acc)
        + i32x4_extract_lane::<3>(acc);
    let summ = (0..8)
        .map(|j| k.mins[j] * (x.bsums[2 * j] as i32 + x.bsums[2 * j + 1] as i32))
        .sum();
    (sumi, summ)
}
