//! 32-element block formats against 8-bit activation blocks of 32, four blocks at a time, as
//! [`scalar::q32_tile`]: per block an exact whole-block sum (its two halves' partial sums
//! added, then reduced), the four blocks' sums in one register, scaled and added to the span's
//! first four lanes (an even group) or its last four.

use core::arch::aarch64::*;

use super::{f16x4_to_f32, lanes8, load16, load16_i8, load4, store4};
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8};
use crate::kernels::{each_row, Out};
use crate::layout::GROUP;
use crate::q8::Q8Slice;

/// See [`crate::kernels::Kernels::q32_rows`].
#[target_feature(enable = "neon")]
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

/// Byte `j` is 0xff where bit `j` of the low 16 bits of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "neon")]
fn bytes_from_bits(bits: u32) -> uint8x16_t {
    let table = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    let first_two = [0u8, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    let spread = vqtbl1q_u8(table, load16(&first_two));
    let each = load16(&[1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128]);
    vtstq_u8(spread, each)
}

/// The values of one block as in [`scalar::decode_q32`]: elements 0..16 and 16..32.
#[inline]
#[target_feature(enable = "neon")]
fn decode<const F: u8>(b: &[u8]) -> (int8x16_t, int8x16_t) {
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let nibbles = |qs: &[u8]| {
        let q = load16(qs);
        (vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q))
    };
    let signed = vreinterpretq_s8_u8;
    match F {
        Q4_0 => {
            let (lo, hi) = nibbles(&b[2..18]);
            let eight = vdupq_n_s8(8);
            (vsubq_s8(signed(lo), eight), vsubq_s8(signed(hi), eight))
        }
        Q4_1 => {
            let (lo, hi) = nibbles(&b[4..20]);
            (signed(lo), signed(hi))
        }
        Q5_0 => {
            // (nibble | fifth << 4) - 16: OR 0xf0 (= -16 + nibble) where the fifth bit is clear.
            let (lo, hi) = nibbles(&b[6..22]);
            let bits = u32_at(2);
            let minus16 = vdupq_n_u8(0xf0);
            (
                signed(vorrq_u8(lo, vbicq_u8(minus16, bytes_from_bits(bits)))),
                signed(vorrq_u8(hi, vbicq_u8(minus16, bytes_from_bits(bits >> 16)))),
            )
        }
        Q5_1 => {
            let (lo, hi) = nibbles(&b[8..24]);
            let bits = u32_at(4);
            let sixteen = vdupq_n_u8(0x10);
            (
                signed(vorrq_u8(lo, vandq_u8(sixteen, bytes_from_bits(bits)))),
                signed(vorrq_u8(hi, vandq_u8(sixteen, bytes_from_bits(bits >> 16)))),
            )
        }
        _ => (signed(load16(&b[2..18])), signed(load16(&b[18..34]))),
    }
}

/// Four partial sums (i32) of `w[i] * y[i]` over 16 signed bytes. Products are at most
/// 128 * 127 in magnitude (activations never hold -128), so two of them fit an i16.
#[inline]
#[target_feature(enable = "neon")]
fn dot16(w: int8x16_t, y: int8x16_t) -> int32x4_t {
    let pairs = vaddq_s16(
        vmull_s8(vget_low_s8(w), vget_low_s8(y)),
        vmull_high_s8(w, y),
    );
    vpaddlq_s16(pairs)
}

/// `[sum a, sum b, sum c, sum d]` of four i32x4 (exact integers: any order).
#[inline]
#[target_feature(enable = "neon")]
fn reduce4(a: int32x4_t, b: int32x4_t, c: int32x4_t, d: int32x4_t) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d))
}

/// The f16 scale `d` (at byte 0) and offset `m` (byte 2, garbage for formats without one) of
/// the four blocks of `group`, as four f32 each.
#[inline]
#[target_feature(enable = "neon")]
fn scales4<const F: u8>(group: &[u8]) -> (float32x4_t, float32x4_t) {
    let bb = block_bytes(F);
    let head = |k: usize| {
        let h = &group[k * bb..k * bb + 4];
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    };
    let heads = [head(0), head(1), head(2), head(3)];
    // SAFETY: four readable u32.
    let heads = unsafe { vld1q_u32(heads.as_ptr()) };
    (f16x4_to_f32(heads), f16x4_to_f32(vshrq_n_u32::<16>(heads)))
}

#[target_feature(enable = "neon")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    let format = format(F);
    let with_min = format.has_min();
    let bb = block_bytes(F);
    let stride = x.len() / T; // activation blocks per row, padded to whole groups
                              // A row's last group when it has fewer than four blocks: the blocks it has, then zeros
                              // (scale 0 against padded activations of 0: exactly the scalar kernel's empty blocks).
    let mut padded = [0u8; GROUP * 34];
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let zero = vdupq_n_f32(0.0);
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
            let w: [(int8x16_t, int8x16_t); GROUP] =
                std::array::from_fn(|k| decode::<F>(&group[k * bb..]));
            let (dw, mw) = scales4::<F>(group);
            for t in 0..T {
                let row = t * stride + g * GROUP;
                let ys = &x.qs[row..row + GROUP];
                // Block k's whole sum: its two halves' partial sums added, then reduced.
                let block = |k: usize| {
                    let (lo, hi) = w[k];
                    vaddq_s32(
                        dot16(lo, load16_i8(&ys[k][..16])),
                        dot16(hi, load16_i8(&ys[k][16..])),
                    )
                };
                let whole = reduce4(block(0), block(1), block(2), block(3));
                let d4 = vmulq_f32(dw, load4(&x.d[row..row + GROUP]));
                let scaled = vmulq_f32(d4, vcvtq_f32_s32(whole));
                // Lanes 0..4 of the span for an even group, 4..8 for an odd one.
                if g % 2 == 0 {
                    acc_lo[t] = vaddq_f32(acc_lo[t], scaled);
                } else {
                    acc_hi[t] = vaddq_f32(acc_hi[t], scaled);
                }
                if with_min {
                    let m4 = vmulq_f32(mw, load4(&x.s[row..row + GROUP]));
                    macc[t] = vaddq_f32(macc[t], m4);
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
