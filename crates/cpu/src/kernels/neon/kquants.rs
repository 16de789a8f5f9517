//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256, as the
//! `simd128` kernel takes them: a super-block is decoded once, for every activation row of the
//! tile, into sixteen registers of signed bytes (register `g`: run `g` of 16, Q6_K's offset
//! taken out); a row's products of each sub-block (runs `2l` and `2l + 1`) are summed in 16
//! bits and widened, the eight sub-blocks' sums reduced side by side to the lanes of
//! [`scalar::k_lane_sums`] (exact: integers), and the float step of [`scalar::k_lane_step`]
//! runs on those lanes four at a time (the same multiplies, conversions and adds on the same
//! operands, so the same bits).

use core::arch::aarch64::*;

use super::{lanes8, load16, load16_i8};
use crate::formats::KFormat;
use crate::kernels::scalar::{self, f16_at, hsum8, k_scales_mins};
use crate::kernels::{each_row, Out};
use crate::layout::TILE;
use crate::q8::BlockQ8K;

/// A decoded super-block.
struct Decoded {
    d: f32,
    dmin: f32,
    /// Register `g`: the values of run `g` (elements `16g..16g + 16`), signed.
    runs: [int8x16_t; 16],
    /// Q4_K/Q5_K: sub-blocks 0..4's and 4..8's scales and minimums.
    scales: [int32x4_t; 2],
    mins: [int32x4_t; 2],
    /// Q6_K: each run's scale.
    run_scales: [i32; 16],
}

/// The eight bytes of `v` (one a sub-block) as two i32x4 (sub-blocks 0..4, 4..8).
#[inline]
#[target_feature(enable = "neon")]
fn widen8(v: u64) -> [int32x4_t; 2] {
    let words = vmovl_u8(vcreate_u8(v));
    [
        vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(words))),
        vreinterpretq_s32_u32(vmovl_high_u16(words)),
    ]
}

/// `v` shifted right by `n` (0..8) in each byte.
#[inline]
#[target_feature(enable = "neon")]
fn shr(v: uint8x16_t, n: usize) -> uint8x16_t {
    vshlq_u8(v, vdupq_n_s8(-(n as i8)))
}

#[target_feature(enable = "neon")]
fn decode(f: KFormat, b: &[u8]) -> Decoded {
    let low4 = vdupq_n_u8(0x0f);
    let mut k = Decoded {
        d: 0.0,
        dmin: 0.0,
        runs: [vdupq_n_s8(0); 16],
        scales: [vdupq_n_s32(0); 2],
        mins: [vdupq_n_s32(0); 2],
        run_scales: [0; 16],
    };
    if f == KFormat::Q6_K {
        k.d = f16_at(b, 208);
        for (s, &byte) in k.run_scales.iter_mut().zip(&b[192..208]) {
            *s = byte as i8 as i32;
        }
        let (three, offset) = (vdupq_n_u8(3), vdupq_n_s8(32));
        for h in 0..2 {
            let (ql, qh) = (&b[64 * h..64 * h + 64], &b[128 + 32 * h..128 + 32 * h + 32]);
            // Runs of 32 (four a half): ql's low nibbles (runs 0, 1) or high ones (2, 3) and
            // two bits of qh; each run of 32 is two registers (its elements l < 16, l >= 16).
            for r4 in 0..4 {
                for half in 0..2 {
                    let l0 = 16 * half;
                    let low = load16(&ql[32 * (r4 % 2) + l0..]);
                    let low = if r4 < 2 {
                        vandq_u8(low, low4)
                    } else {
                        vshrq_n_u8::<4>(low)
                    };
                    let top = vandq_u8(shr(load16(&qh[l0..]), 2 * r4), three);
                    let value = vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8::<4>(top)));
                    k.runs[8 * h + 2 * r4 + half] = vsubq_s8(value, offset);
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
            for (high, mut v) in [vandq_u8(bytes, low4), vshrq_n_u8::<4>(bytes)]
                .into_iter()
                .enumerate()
            {
                if let Some(qh) = qh {
                    let bits = if half == 0 { qh.0 } else { qh.1 };
                    let fifth = vandq_u8(shr(bits, 2 * c + high), vdupq_n_u8(1));
                    v = vorrq_u8(v, vshlq_n_u8::<4>(fifth));
                }
                k.runs[4 * c + 2 * high + half] = vreinterpretq_s8_u8(v);
            }
        }
    }
    k
}

/// `[sum(a), sum(b), sum(c), sum(d)]` of four i32x4.
#[inline]
#[target_feature(enable = "neon")]
fn sums4(a: int32x4_t, b: int32x4_t, c: int32x4_t, d: int32x4_t) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d))
}

/// Register `w`'s byte products with `y` as 16-bit pair sums (|w| <= 63, |y| <= 127).
#[inline]
#[target_feature(enable = "neon")]
fn pairs(w: int8x16_t, y: int8x16_t) -> int16x8_t {
    vaddq_s16(
        vmull_s8(vget_low_s8(w), vget_low_s8(y)),
        vmull_high_s8(w, y),
    )
}

/// `[f(0), .., f(7)]`, written out: through `array::from_fn` the simd128 kernel's closure
/// stayed a call of its own per sub-block.
#[inline(always)]
fn eight(f: impl Fn(usize) -> int32x4_t) -> [int32x4_t; 8] {
    [f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)]
}

/// One row's step for a super-block: `acc` (lanes 0..4, 4..8) plus [`scalar::k_lane_step`].
#[inline]
#[target_feature(enable = "neon")]
fn row_step(f: KFormat, k: &Decoded, x: &BlockQ8K, acc: &mut [float32x4_t; 2]) {
    let y = |g: usize| load16_i8(&x.qs[16 * g..]);
    // Lane l: sub-block l's products (Q6_K: scaled per run).
    let sub_block = |l: usize| {
        let (g0, g1) = (2 * l, 2 * l + 1);
        let (p0, p1) = (pairs(k.runs[g0], y(g0)), pairs(k.runs[g1], y(g1)));
        if f == KFormat::Q6_K {
            vmlaq_n_s32(
                vmulq_n_s32(vpaddlq_s16(p0), k.run_scales[g0]),
                vpaddlq_s16(p1),
                k.run_scales[g1],
            )
        } else {
            // Four products a lane: under 4 * 31 * 127 < 2^15.
            vpaddlq_s16(vaddq_s16(p0, p1))
        }
    };
    let s = eight(sub_block);
    let sumi = [sums4(s[0], s[1], s[2], s[3]), sums4(s[4], s[5], s[6], s[7])];
    let dd = vdupq_n_f32(k.d * x.d);
    if f == KFormat::Q6_K {
        for (a, s) in acc.iter_mut().zip(sumi) {
            *a = vaddq_f32(*a, vmulq_f32(dd, vcvtq_f32_s32(s)));
        }
        return;
    }
    let md = vdupq_n_f32(k.dmin * x.d);
    for (h, a) in acc.iter_mut().enumerate() {
        let bsums = &x.bsums[8 * h..8 * h + 8];
        // SAFETY: eight readable i16.
        let bsums = unsafe { vld1q_s16(bsums.as_ptr()) };
        let sumi = vmulq_s32(sumi[h], k.scales[h]);
        let summ = vmulq_s32(vpaddlq_s16(bsums), k.mins[h]);
        let step = vsubq_f32(
            vmulq_f32(dd, vcvtq_f32_s32(sumi)),
            vmulq_f32(md, vcvtq_f32_s32(summ)),
        );
        *a = vaddq_f32(*a, step);
    }
}

/// See [`crate::kernels::Kernels::k_rows`].
#[target_feature(enable = "neon")]
pub fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], mut out: Out) {
    let n = out.tile();
    if !(1..=TILE).contains(&n) {
        return each_row(w, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o));
    }
    let nb = x.len() / n;
    for (r, w_row) in w.chunks_exact(row_bytes).enumerate() {
        let mut acc = [[vdupq_n_f32(0.0); 2]; TILE];
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
