//! Quantization of activation rows to 8 bits: blocks of 32 (for the 32-element weight formats)
//! and of 256 (for the K-quants), the portable way (`activations.rs` compiles it for the
//! instruction set in use, with the same values).

use super::{BlockQ8K, Q8Rows};
use crate::layout::{GROUP, SPAN};

/// The scale of a block whose largest magnitude is `amax`, and its inverse (0 for an all-zero
/// block). A NaN or infinite value makes the scale NaN, so it reaches the output as NaN (a
/// corrupt model must not quietly produce finite logits).
#[inline(always)]
fn scale_of(block: &[f32]) -> (f32, f32) {
    let mut amax = 0f32;
    let mut finite = true;
    for &v in block {
        finite &= v.is_finite();
        // A select, not `f32::max`, so the loop vectorizes (NaN is caught by `finite`).
        amax = if v.abs() > amax { v.abs() } else { amax };
    }
    if !finite {
        return (f32::NAN, 0.0);
    }
    let d = amax / 127.0;
    let id = if amax > 0.0 { 127.0 / amax } else { 0.0 };
    (d, id)
}

/// `v * id` rounded to the nearest integer, ties to even. `|v * id| <= 127` (`id` is 127 over
/// the block's largest magnitude), so the result is in [-127, 127]: the activation side of an
/// unsigned x signed byte product never holds -128, and SIMD sign tricks cannot overflow.
#[inline(always)]
pub(crate) fn quantize_value(v: f32, id: f32) -> i8 {
    // Adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits (plain IEEE
    // arithmetic, no libm `rintf` call, and integer-only after it, so the loop vectorizes).
    const MAGIC: f32 = 12_582_912.0;
    ((v * id + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32) as i8
}

/// Quantizes one block; a block with a NaN or infinity gets a NaN scale and zero values.
#[inline(always)]
fn quantize_block(block: &[f32], qs: &mut [i8]) -> f32 {
    let (d, id) = scale_of(block);
    if d.is_nan() {
        qs.fill(0);
    } else {
        for (q, &v) in qs.iter_mut().zip(block) {
            *q = quantize_value(v, id);
        }
    }
    d
}

/// Blocks a row of `cols` activations takes in [`Q8Rows`], padding included.
pub fn q8_blocks_per_row(cols: usize) -> usize {
    (cols / 32).div_ceil(GROUP) * GROUP
}

/// Appends the blocks of one row `x` (a whole number of blocks of 32) to `out`, padded.
pub fn quantize_q8(x: &[f32], out: &mut Q8Rows) {
    quantize_q8_portable(x, out)
}

/// [`Q8Rows::d8`] and [`Q8Rows::ysum`] of a row's blocks in element order, whole groups, the
/// first `spans` pairs of them spans.
pub(crate) fn group_sums(
    qs: &[[i8; 32]],
    d: &[f32],
    spans: usize,
    d8: &mut Vec<[f32; 8]>,
    ysum: &mut Vec<[i32; 8]>,
) {
    let sum = |v: &[i8]| v.iter().map(|&v| v as i32).sum::<i32>();
    let (span_qs, group_qs) = qs.split_at(SPAN * spans);
    let (span_d, group_d) = d.split_at(SPAN * spans);
    for (blocks, d) in span_qs.chunks_exact(SPAN).zip(span_d.chunks_exact(SPAN)) {
        // The same for both groups of the span (kernels read the first).
        let (dd, ys) = (
            std::array::from_fn(|l| d[l]),
            std::array::from_fn(|l| sum(&blocks[l])),
        );
        d8.extend([dd, dd]);
        ysum.extend([ys, ys]);
    }
    for (blocks, d) in group_qs
        .chunks_exact(GROUP)
        .zip(group_d.chunks_exact(GROUP))
    {
        d8.push(std::array::from_fn(|l| d[l % GROUP]));
        ysum.push(std::array::from_fn(|l| {
            let half = l / GROUP * 16;
            sum(&blocks[l % GROUP][half..half + 16])
        }));
    }
}

#[inline(always)]
pub(crate) fn quantize_q8_portable(x: &[f32], out: &mut Q8Rows) {
    debug_assert!(x.len().is_multiple_of(32));
    for block in x.chunks_exact(32) {
        push_quantized(block, out);
    }
    out.pad_row(x.len());
}

/// Quantizes one block of 32 (the portable way) onto `out`.
#[inline(always)]
pub(crate) fn push_quantized(block: &[f32], out: &mut Q8Rows) {
    let mut qs = [0i8; 32];
    let d = quantize_block(block, &mut qs);
    let sum: i32 = qs.iter().map(|&q| q as i32).sum();
    out.push_block(qs, d, sum);
}

/// Appends the blocks of `x` (a whole number of blocks of 256) to `out`.
pub fn quantize_q8k(x: &[f32], out: &mut Vec<BlockQ8K>) {
    quantize_q8k_portable(x, out)
}

#[inline(always)]
pub(crate) fn quantize_q8k_portable(x: &[f32], out: &mut Vec<BlockQ8K>) {
    debug_assert!(x.len().is_multiple_of(256));
    for block in x.chunks_exact(256) {
        let mut qs = [0i8; 256];
        let d = quantize_block(block, &mut qs);
        let mut bsums = [0i16; 16];
        for (s, run) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
            // |sum| <= 16 * 127, well inside i16.
            *s = run.iter().map(|&q| q as i16).sum();
        }
        out.push(BlockQ8K { d, qs, bsums });
    }
}
