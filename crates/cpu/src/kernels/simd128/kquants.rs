//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256. A super-block
//! is decoded once, for every activation row of the tile, into sixteen registers of signed
//! bytes (register `g`: run `g` of 16, Q6_K's offset taken out). A row's products of each
//! sub-block (runs `2l` and `2l + 1`) are summed in 16 bits and widened (with relaxed SIMD:
//! its dot product, on Q6_K's values as stored, the offset taken out of the sums after), the
//! eight sub-blocks' sums reduced side by side to the lanes of [`scalar::k_lane_sums`] (exact:
//! integers), and
//! the float step of [`scalar::k_lane_step`] runs on those lanes four at a time (the same
//! multiplies, conversions and adds on the same operands, so the same bits).

use core::arch::wasm32::*;

use super::{lanes8, load16, load16_i8, reduce4};
use crate::formats::KFormat;
use crate::kernels::scalar::{self, f16_at, hsum8, k_scales_mins};
use crate::kernels::{each_row, Out};
use crate::layout::TILE;
use crate::q8::BlockQ8K;

/// A decoded super-block.
struct Decoded {
    d: f32,
    dmin: f32,
    /// Register `g`: the values of run `g` (elements `16g..16g + 16`), signed (Q6_K in the
    /// relaxed SIMD build: as stored, 0..=63).
    runs: [v128; 16],
    /// Q4_K/Q5_K: sub-blocks 0..4's and 4..8's scales and minimums as i32x4.
    scales: [v128; 2],
    mins: [v128; 2],
    /// Q6_K: each run's scale.
    run_scales: [i16; 16],
}

/// The eight bytes of `v` (one a sub-block) as two i32x4 (sub-blocks 0..4, 4..8).
#[inline]
fn widen8(v: u64) -> [v128; 2] {
    let words = u16x8_extend_low_u8x16(u64x2_splat(v));
    [
        u32x4_extend_low_u16x8(words),
        u32x4_extend_high_u16x8(words),
    ]
}

fn decode(f: KFormat, b: &[u8]) -> Decoded {
    let low4 = u8x16_splat(0x0f);
    let mut k = Decoded {
        d: 0.0,
        dmin: 0.0,
        runs: [i8x16_splat(0); 16],
        scales: [i32x4_splat(0); 2],
        mins: [i32x4_splat(0); 2],
        run_scales: [0; 16],
    };
    if f == KFormat::Q6_K {
        k.d = f16_at(b, 208);
        for (s, &byte) in k.run_scales.iter_mut().zip(&b[192..208]) {
            *s = byte as i8 as i16;
        }
        let (three, offset) = (u8x16_splat(3), i8x16_splat(32));
        for h in 0..2 {
            let (ql, qh) = (&b[64 * h..64 * h + 64], &b[128 + 32 * h..128 + 32 * h + 32]);
            // Runs of 32 (four a half): ql's low nibbles (runs 0, 1) or high ones (2, 3) and
            // two bits of qh; each run of 32 is two registers (its elements l < 16, l >= 16).
            for r4 in 0..4 {
                for half in 0..2 {
                    let l0 = 16 * half;
                    let low = load16(&ql[32 * (r4 % 2) + l0..]);
                    let low = if r4 < 2 {
                        v128_and(low, low4)
                    } else {
                        u8x16_shr(low, 4)
                    };
                    let top = v128_and(u8x16_shr(load16(&qh[l0..]), 2 * r4 as u32), three);
                    let value = v128_or(low, i8x16_shl(top, 4));
                    // With relaxed SIMD the dot product wants the stored 0..=63; the offset
                    // is taken out of the run's sum instead (`q6k_offsets`).
                    k.runs[8 * h + 2 * r4 + half] = if cfg!(target_feature = "relaxed-simd") {
                        value
                    } else {
                        i8x16_sub(value, offset)
                    };
                }
            }
        }
        return k;
    }
    k.d = f16_at(b, 0);
    k.dmin = f16_at(b, 2);
    let (scales, mins) = k_scales_mins(&b[4..16]);
    (k.scales, k.mins) = (widen8(scales), widen8(mins));
    let (qs, qh) = if f == KFormat::Q5_K {
        (&b[48..176], Some((load16(&b[16..]), load16(&b[32..]))))
    } else {
        (&b[16..144], None)
    };
    // Each 32 bytes of qs: low nibbles runs 4c, 4c + 1 (sub-block 2c), high ones 4c + 2,
    // 4c + 3 (sub-block 2c + 1); Q5_K's fifth bits are bit 2c (low) or 2c + 1 (high) of qh.
    for c in 0..4 {
        for (half, bytes) in [&qs[32 * c..], &qs[32 * c + 16..]].into_iter().enumerate() {
            let bytes = load16(bytes);
            for (high, mut v) in [v128_and(bytes, low4), u8x16_shr(bytes, 4)]
                .into_iter()
                .enumerate()
            {
                if let Some(qh) = qh {
                    let bits = if half == 0 { qh.0 } else { qh.1 };
                    let fifth = v128_and(u8x16_shr(bits, (2 * c + high) as u32), u8x16_splat(1));
                    v = v128_or(v, i8x16_shl(fifth, 4));
                }
                k.runs[4 * c + 2 * high + half] = v;
            }
        }
    }
    k
}

/// Register `w`'s byte products with `y` as 16-bit pair sums (|w| <= 63, |y| <= 127).
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn pairs(w: v128, y: v128) -> v128 {
    i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y))
}

/// A Q4_K or Q5_K sub-block's products (runs `w0`, `w1` of values in 0..=31, against `y0`,
/// `y1`) in four i32 lanes.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn unsigned_sub_block(w0: v128, y0: v128, w1: v128, y1: v128) -> v128 {
    // Four products a lane: under 4 * 31 * 127 < 2^15.
    i32x4_extadd_pairwise_i16x8(i16x8_add(pairs(w0, y0), pairs(w1, y1)))
}

/// [`unsigned_sub_block`] by relaxed SIMD's dot product (exact for values in 0..=127: see
/// [`super::q32`]); the lanes group the products differently, and the sub-block's sum (what
/// [`reduce4`] keeps) is the same integer.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
fn unsigned_sub_block(w0: v128, y0: v128, w1: v128, y1: v128) -> v128 {
    let dot = i32x4_relaxed_dot_i8x16_i7x16_add;
    dot(y1, w1, dot(y0, w0, i32x4_splat(0)))
}

/// A Q6_K sub-block's products (runs `g0`, `g1` against `y0`, `y1`), each run's scaled, in
/// four i32 lanes.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn q6k_sub_block(k: &Decoded, (g0, y0): (usize, v128), (g1, y1): (usize, v128)) -> v128 {
    i32x4_add(
        i32x4_dot_i16x8(pairs(k.runs[g0], y0), i16x8_splat(k.run_scales[g0])),
        i32x4_dot_i16x8(pairs(k.runs[g1], y1), i16x8_splat(k.run_scales[g1])),
    )
}

/// The plain build's runs hold the values less 32 already.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn q6k_offsets(_: &Decoded, _: &BlockQ8K, _: &mut [v128; 2]) {}

/// [`q6k_sub_block`] by relaxed SIMD's dot product on the values as stored (0..=63), the
/// offset of 32 left for [`q6k_offsets`].
#[cfg(target_feature = "relaxed-simd")]
#[inline]
fn q6k_sub_block(k: &Decoded, (g0, y0): (usize, v128), (g1, y1): (usize, v128)) -> v128 {
    let dot = i32x4_relaxed_dot_i8x16_i7x16_add;
    let zero = i32x4_splat(0);
    i32x4_add(
        i32x4_mul(
            dot(y0, k.runs[g0], zero),
            i32x4_splat(k.run_scales[g0].into()),
        ),
        i32x4_mul(
            dot(y1, k.runs[g1], zero),
            i32x4_splat(k.run_scales[g1].into()),
        ),
    )
}

/// Takes the values' offset out of each sub-block's sum: `32 * (scale_g * sum(x over run g))`
/// for its two runs (the activations' run sums are `bsums`), exact integers as
/// [`scalar::k_lane_sums`]'s `(q - 32) * x` summed.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
fn q6k_offsets(k: &Decoded, x: &BlockQ8K, sumi: &mut [v128; 2]) {
    for (h, s) in sumi.iter_mut().enumerate() {
        // SAFETY: eight i16 (16 bytes) of each array.
        let (bsums, scales) = unsafe {
            (
                v128_load(x.bsums[8 * h..8 * h + 8].as_ptr() as *const v128),
                v128_load(k.run_scales[8 * h..8 * h + 8].as_ptr() as *const v128),
            )
        };
        *s = i32x4_sub(*s, i32x4_shl(i32x4_dot_i16x8(bsums, scales), 5));
    }
}

/// `[f(0), .., f(7)]`, written out: through `array::from_fn` a sub-block's closure stayed a
/// call of its own (a third of the K-quants' time in the page, by `perf` over V8's code map).
#[inline(always)]
fn eight(f: impl Fn(usize) -> v128) -> [v128; 8] {
    [f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)]
}

/// One row's step for a super-block: `acc` (lanes 0..4, 4..8) plus [`scalar::k_lane_step`].
#[inline]
fn row_step(f: KFormat, k: &Decoded, x: &BlockQ8K, acc: &mut [v128; 2]) {
    let y = |g: usize| load16_i8(&x.qs[16 * g..]);
    // Lane l: sub-block l's products (Q6_K: scaled per run).
    let s = if f == KFormat::Q6_K {
        eight(|l| q6k_sub_block(k, (2 * l, y(2 * l)), (2 * l + 1, y(2 * l + 1))))
    } else {
        eight(|l| unsigned_sub_block(k.runs[2 * l], y(2 * l), k.runs[2 * l + 1], y(2 * l + 1)))
    };
    let mut sumi = [
        reduce4(s[0], s[1], s[2], s[3]),
        reduce4(s[4], s[5], s[6], s[7]),
    ];
    if f == KFormat::Q6_K {
        q6k_offsets(k, x, &mut sumi);
    }
    let dd = f32x4_splat(k.d * x.d);
    if f == KFormat::Q6_K {
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = f32x4_add(*a, f32x4_mul(dd, f32x4_convert_i32x4(s)));
        }
        return;
    }
    let md = f32x4_splat(k.dmin * x.d);
    // SAFETY: 16 i16 (32 bytes) in two loads of 16.
    let bsums = |at: usize| unsafe { v128_load(x.bsums[at..at + 8].as_ptr() as *const v128) };
    for (h, a) in acc.iter_mut().enumerate() {
        let sumi = i32x4_mul(sumi[h], k.scales[h]);
        let summ = i32x4_mul(i32x4_extadd_pairwise_i16x8(bsums(8 * h)), k.mins[h]);
        let step = f32x4_sub(
            f32x4_mul(dd, f32x4_convert_i32x4(sumi)),
            f32x4_mul(md, f32x4_convert_i32x4(summ)),
        );
        *a = f32x4_add(*a, step);
    }
}

/// See [`crate::kernels::Kernels::k_rows`].
pub fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], mut out: Out) {
    let n = out.tile();
    if !(1..=TILE).contains(&n) {
        return each_row(w, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o));
    }
    let nb = x.len() / n;
    for (r, w_row) in w.chunks_exact(row_bytes).enumerate() {
        let mut acc = [[f32x4_splat(0.0); 2]; TILE];
        for (b, block) in w_row.chunks_exact(f.block_bytes()).enumerate() {
            let k = decode(f, block);
            for (t, acc) in acc.iter_mut().enumerate().take(n) {
                row_step(f, &k, &x[t * nb + b], acc);
            }
        }
        let sums: [f32; TILE] = std::array::from_fn(|t| hsum8(&lanes8(acc[t][0], acc[t][1])));
        out.put(r, &sums[..n]);
    }
}
