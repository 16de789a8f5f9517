//! 32-element block formats against 8-bit activation blocks of 32, four blocks at a time, as
//! [`scalar::q32_tile`]: per block an exact whole-block sum (its two halves' partial sums
//! added, then reduced; with relaxed SIMD, Q4_0's and Q5_0's stored offset taken out of it by
//! the activations' block sums), the four blocks' sums in one register, scaled and added to
//! the span's first four lanes (an even group) or its last four.

use core::arch::wasm32::*;

use super::{f16x4_to_f32, lanes8, load16, load16_i8, load4, load4_i32, reduce4, store4};
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8};
use crate::kernels::{each_row, Out};
use crate::layout::GROUP;
use crate::q8::Q8Slice;

/// See [`crate::kernels::Kernels::q32_rows`].
pub fn q32_rows(f: Q32Format, w: &[u8], row_bytes: usize, x: Q8Slice, out: Out) {
    let n = out.tile();
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::q32_tile(f, w, x, o));
    match f {
        Q32Format::Q4_0 => by_tile!(n, rows::<Q4_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q4_1 => by_tile!(n, rows::<Q4_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_0 => by_tile!(n, rows::<Q5_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_1 => by_tile!(n, rows::<Q5_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q8_0 => by_tile!(n, rows::<Q8_0>(w, row_bytes, x, out), fallback(out)),
    }
}

/// Masks of the bits of `bits`: byte `j` of the first is 0xff where bit `j` is set, of the
/// second where bit `16 + j` is (one splat for both halves of a block).
#[inline]
fn bytes_from_bits(bits: u32) -> (v128, v128) {
    let all = u32x4_splat(bits);
    let each = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let mask = |spread: v128| i8x16_eq(v128_and(spread, each), each);
    (
        mask(i8x16_swizzle(
            all,
            i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        )),
        mask(i8x16_swizzle(
            all,
            i8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
        )),
    )
}

/// The values of one block as in [`scalar::decode_q32`]: elements 0..16 and 16..32.
#[inline]
fn decode<const F: u8>(b: &[u8]) -> (v128, v128) {
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let nibbles = |qs: &[u8]| {
        let q = load16(qs);
        (v128_and(q, u8x16_splat(0x0f)), u8x16_shr(q, 4))
    };
    match F {
        // With relaxed SIMD, Q4_0 and Q5_0 keep their values as stored (0..=31): the offset
        // comes out of the block's sum after ([`offset_shift`]).
        Q4_0 if RELAXED => nibbles(&b[2..18]),
        Q4_0 => {
            let (lo, hi) = nibbles(&b[2..18]);
            let eight = i8x16_splat(8);
            (i8x16_sub(lo, eight), i8x16_sub(hi, eight))
        }
        Q4_1 => nibbles(&b[4..20]),
        Q5_0 if RELAXED => five_bits(&b[6..22], u32_at(2)),
        Q5_0 => {
            // (nibble | fifth << 4) - 16: OR 0xf0 (= -16 + nibble) where the fifth bit is clear.
            let (lo, hi) = nibbles(&b[6..22]);
            let (set_lo, set_hi) = bytes_from_bits(u32_at(2));
            let minus16 = i8x16_splat(-16);
            (
                v128_or(lo, v128_andnot(minus16, set_lo)),
                v128_or(hi, v128_andnot(minus16, set_hi)),
            )
        }
        Q5_1 => five_bits(&b[8..24], u32_at(4)),
        _ => (load16(&b[2..18]), load16(&b[18..34])),
    }
}

/// A 5-bit block's unsigned values (nibbles `qs`, fifth bits `bits`): elements 0..16, 16..32.
#[inline]
fn five_bits(qs: &[u8], bits: u32) -> (v128, v128) {
    let q = load16(qs);
    let (lo, hi) = (v128_and(q, u8x16_splat(0x0f)), u8x16_shr(q, 4));
    let (set_lo, set_hi) = bytes_from_bits(bits);
    let sixteen = i8x16_splat(0x10);
    (
        v128_or(lo, v128_and(sixteen, set_lo)),
        v128_or(hi, v128_and(sixteen, set_hi)),
    )
}

/// Whether the kernels multiply with relaxed SIMD's dot product.
const RELAXED: bool = cfg!(target_feature = "relaxed-simd");

/// The stored offset of format `F`'s values as a power of two (Q4_0: 8, Q5_0: 16), which the
/// relaxed SIMD build takes out of each block's sum times the activations' sum; 0 where the
/// values are decoded signed (the plain build, Q8_0) or the format has a minimum instead.
const fn offset_shift<const F: u8>() -> u32 {
    match F {
        Q4_0 if RELAXED => 3,
        Q5_0 if RELAXED => 4,
        _ => 0,
    }
}

/// Four partial sums (i32) of `w[i] * y[i]` over 16 signed bytes. Products are at most
/// 128 * 127 in magnitude (activations never hold -128), so two of them fit an i16.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn dot16(w: v128, y: v128) -> v128 {
    let pairs = i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y));
    i32x4_extadd_pairwise_i16x8(pairs)
}

/// Block `w`'s products with activations `y`, summed in four i32 lanes (exact integers, so
/// the lanes' grouping never shows in the block's sum).
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn block_sum<const F: u8>((lo, hi): (v128, v128), y: &[i8; 32]) -> v128 {
    i32x4_add(
        dot16(lo, load16_i8(&y[..16])),
        dot16(hi, load16_i8(&y[16..])),
    )
}

/// [`block_sum`] by relaxed SIMD's dot product of signed bytes with bytes in 0..=127, whose
/// result every engine computes exactly (the 16-bit pair sums cannot overflow): one
/// instruction per 16 products where plain SIMD takes four (an x86 VNNI `vpdpbusd` or an Arm
/// `sdot`, where the engine has them). The 4- and 5-bit formats multiply their stored weights
/// (0..=31) with the activations as the signed side (Q4_0's and Q5_0's offsets taken out
/// after, [`offset_shift`]); Q8_0's signed weights multiply the activations' positive and
/// negative parts (each in 0..=127: activations never hold -128), subtracted.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
fn block_sum<const F: u8>((lo, hi): (v128, v128), y: &[i8; 32]) -> v128 {
    let dot = i32x4_relaxed_dot_i8x16_i7x16_add;
    let (y_lo, y_hi) = (load16_i8(&y[..16]), load16_i8(&y[16..]));
    let zero = i32x4_splat(0);
    if F != Q8_0 {
        return dot(y_hi, hi, dot(y_lo, lo, zero));
    }
    let (pos_lo, pos_hi) = (i8x16_max(y_lo, zero), i8x16_max(y_hi, zero));
    let (neg_lo, neg_hi) = (i8x16_sub(pos_lo, y_lo), i8x16_sub(pos_hi, y_hi));
    i32x4_sub(
        dot(hi, pos_hi, dot(lo, pos_lo, zero)),
        dot(hi, neg_hi, dot(lo, neg_lo, zero)),
    )
}

/// The f16 scale `d` (at byte 0) and offset `m` (byte 2, garbage for formats without one) of
/// the four blocks of `group`, as four f32 each.
#[inline]
fn scales4<const F: u8>(group: &[u8]) -> (v128, v128) {
    let bb = block_bytes(F);
    let head = |k: usize| {
        let h = &group[k * bb..k * bb + 4];
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    };
    let heads = u32x4(head(0), head(1), head(2), head(3));
    (f16x4_to_f32(heads), f16x4_to_f32(u32x4_shr(heads, 16)))
}

fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    let format = format(F);
    let with_min = format.has_min();
    let bb = block_bytes(F);
    // Activation blocks per row, padded to whole groups.
    let stride = x.len() / T;
    // A row's last group when it has fewer than four blocks: the blocks it has, then zeros
    // (scale 0 against padded activations of 0: exactly the scalar kernel's empty blocks).
    let mut padded = [0u8; GROUP * 34];
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let zero = f32x4_splat(0.0);
        let (mut acc_lo, mut acc_hi, mut macc) = ([zero; T], [zero; T], [zero; T]);
        for g in 0..stride / GROUP {
            let first = g * GROUP * bb;
            let group = match w_row.get(first..first + GROUP * bb) {
                Some(whole) => whole,
                None => {
                    let part = &w_row[first.min(w_row.len())..];
                    padded.fill(0);
                    padded[..part.len()].copy_from_slice(part);
                    &padded[..GROUP * bb]
                }
            };
            let w: [(v128, v128); GROUP] = std::array::from_fn(|k| decode::<F>(&group[k * bb..]));
            let (dw, mw) = scales4::<F>(group);
            for t in 0..T {
                let row = t * stride + g * GROUP;
                let ys = &x.qs[row..row + GROUP];
                // Block k's whole sum: its two halves' partial sums added, then reduced.
                let block = |k: usize| block_sum::<F>(w[k], &ys[k]);
                let mut whole = reduce4(block(0), block(1), block(2), block(3));
                if offset_shift::<F>() > 0 {
                    // The stored values' offset times the activations' sums (exact integers).
                    let sums = load4_i32(&x.sums[row..row + GROUP]);
                    whole = i32x4_sub(whole, i32x4_shl(sums, offset_shift::<F>()));
                }
                let d4 = f32x4_mul(dw, load4(&x.d[row..row + GROUP]));
                let scaled = f32x4_mul(d4, f32x4_convert_i32x4(whole));
                // Lanes 0..4 of the span for an even group, 4..8 for an odd one.
                if g % 2 == 0 {
                    acc_lo[t] = f32x4_add(acc_lo[t], scaled);
                } else {
                    acc_hi[t] = f32x4_add(acc_hi[t], scaled);
                }
                if with_min {
                    let m4 = f32x4_mul(mw, load4(&x.s[row..row + GROUP]));
                    macc[t] = f32x4_add(macc[t], m4);
                }
            }
        }
        let mut o = [0f32; T];
        for t in 0..T {
            let mut m = [0f32; 4];
            store4(&mut m, macc[t]);
            o[t] = finish_q32(format, hsum8(&lanes8(acc_lo[t], acc_hi[t])), hsum4(&m));
        }
        out.put(r, &o);
    }
}
