//! The portable kernels, and the definition of what every kernel computes.
//!
//! Each output is the product of one weight row with one activation row, reduced in an order
//! fixed by the format alone (never by how many rows are computed together, nor by the
//! instruction set), so a SIMD kernel that follows it gives the same bits:
//!
//! - float formats: eight f32 lanes, lane `l` summing elements `i ≡ l (mod 8)` in order (a
//!   product rounded, then added), then [`hsum8`];
//! - 32-element blocks, in spans of [`SPAN`] = 8 blocks (the last span padded with empty
//!   blocks, whose products and scales are zero): per span, one exact integer sum per block
//!   (its 32 products), and lane `l` adds `(d_w * d_x)[block l] * sum_l` span after span; then
//!   [`hsum8`], plus, for formats with an offset, four lanes adding `m_w * s_x` of block `k` of
//!   each group of [`GROUP`] = 4, group after group, then [`hsum4`]. (One float step per eight
//!   blocks and row: an eight-row verification tile is bound by its float multiplies and its
//!   activations' loads together, and sums of half blocks took twice the steps.)
//! - K-quant super-blocks: per super-block, exact integer sums `sumi` (scaled products) and
//!   `summ` (scaled minimums); one f32 accumulator adds `d*d_x * sumi - dmin*d_x * summ`
//!   super-block after super-block.
//!
//! Every `*_tile` function computes `out[t] = w_row · x[t]` for the `out.len()` activation
//! rows of a tile; `x` holds those rows one after another.

use half::{bf16, f16};

use super::{Rows, Widen};

use crate::formats::{FloatFormat, KFormat, Q32Format};
use crate::layout::{GROUP, SPAN, TILE};
use crate::q8::{BlockQ8K, Q8Slice};

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`: the one horizontal sum of eight lanes
/// (what a 256-bit register halves, then halves again).
pub fn hsum8(a: &[f32; 8]) -> f32 {
    let s = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (s[0] + s[2]) + (s[1] + s[3])
}

/// `(m0 + m2) + (m1 + m3)`: the horizontal sum of four lanes.
pub fn hsum4(m: &[f32; 4]) -> f32 {
    (m[0] + m[2]) + (m[1] + m[3])
}

#[inline]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Weight element `i` of a float row.
fn float_at(f: FloatFormat, w: &[u8], i: usize) -> f32 {
    match f {
        FloatFormat::F32 => {
            f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]])
        }
        FloatFormat::F16 => f16_at(w, 2 * i),
        FloatFormat::BF16 => bf16::from_le_bytes([w[2 * i], w[2 * i + 1]]).to_f32(),
    }
}

pub fn float_tile(f: FloatFormat, w_row: &[u8], x: &[f32], out: &mut [f32]) {
    let cols = w_row.len() / f.element_bytes();
    let mut acc = [[0f32; 8]; TILE];
    for i in 0..cols {
        let w = float_at(f, w_row, i);
        for (t, a) in acc.iter_mut().enumerate().take(out.len()) {
            a[i % 8] += w * x[t * cols + i];
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = hsum8(a);
    }
}

/// One block of a 32-element format: `(d, m, q)` with the weights `q[i] * d + m` (`m` is 0
/// for formats without an offset, whose `q` carries the sign).
pub fn decode_q32(f: Q32Format, b: &[u8]) -> (f32, f32, [i8; 32]) {
    let mut q = [0i8; 32];
    let nibbles = |q: &mut [i8; 32], qs: &[u8], offset: i8| {
        for j in 0..16 {
            q[j] = (qs[j] & 0xf) as i8 - offset;
            q[j + 16] = (qs[j] >> 4) as i8 - offset;
        }
    };
    // The fifth bit of element j is bit j of `qh`.
    let fifth_bits = |q: &mut [i8; 32], qh: u32, offset: i8| {
        for (j, v) in q.iter_mut().enumerate() {
            *v = (*v + offset) | ((((qh >> j) & 1) as i8) << 4);
            *v -= offset;
        }
    };
    match f {
        Q32Format::Q4_0 => {
            nibbles(&mut q, &b[2..18], 8);
            (f16_at(b, 0), 0.0, q)
        }
        Q32Format::Q4_1 => {
            nibbles(&mut q, &b[4..20], 0);
            (f16_at(b, 0), f16_at(b, 2), q)
        }
        Q32Format::Q5_0 => {
            nibbles(&mut q, &b[6..22], 16);
            fifth_bits(&mut q, u32::from_le_bytes([b[2], b[3], b[4], b[5]]), 16);
            (f16_at(b, 0), 0.0, q)
        }
        Q32Format::Q5_1 => {
            nibbles(&mut q, &b[8..24], 0);
            fifth_bits(&mut q, u32::from_le_bytes([b[4], b[5], b[6], b[7]]), 0);
            (f16_at(b, 0), f16_at(b, 2), q)
        }
        Q32Format::Q8_0 => {
            for (v, &byte) in q.iter_mut().zip(&b[2..34]) {
                *v = byte as i8;
            }
            (f16_at(b, 0), 0.0, q)
        }
    }
}

/// `sum(w[i] * x[i])` (exact in i32).
fn int_dot(w: &[i8; 32], x: &[i8; 32]) -> i32 {
    w.iter().zip(x).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// `x` holds [`crate::q8::q8_blocks_per_row`] blocks per row.
pub fn q32_tile(f: Q32Format, w_row: &[u8], x: Q8Slice, out: &mut [f32]) {
    let bb = f.block_bytes();
    let nb = w_row.len() / bb;
    let stride = x.len() / out.len();
    let mut acc = [[0f32; 8]; TILE];
    let mut macc = [[0f32; 4]; TILE];
    for span in 0..nb.div_ceil(SPAN) {
        // The span's blocks, decoded once for every row of the tile; `None` pads.
        let blocks: [Option<(f32, f32, [i8; 32])>; SPAN] = std::array::from_fn(|l| {
            let b = span * SPAN + l;
            (b < nb).then(|| decode_q32(f, &w_row[b * bb..(b + 1) * bb]))
        });
        for t in 0..out.len() {
            let (mut sums, mut dd) = ([0i32; SPAN], [0f32; SPAN]);
            for (l, block) in blocks.iter().enumerate() {
                if let Some((d, m, q)) = block {
                    let i = t * stride + span * SPAN + l;
                    sums[l] = int_dot(q, &x.block_values(i));
                    dd[l] = d * x.d[i];
                    // (An empty block adds nothing here where SIMD kernels add +0.0: the same
                    // sum, which starts at +0.0 and so never becomes -0.0.)
                    macc[t][l % GROUP] += m * x.s[i];
                }
            }
            for (l, a) in acc[t].iter_mut().enumerate() {
                *a += dd[l] * sums[l] as f32;
            }
        }
    }
    for t in 0..out.len() {
        out[t] = finish_q32(f, hsum8(&acc[t]), hsum4(&macc[t]));
    }
}

/// The last step of a 32-element-block product, shared by every instruction set.
pub fn finish_q32(f: Q32Format, lanes: f32, msum: f32) -> f32 {
    if f.has_min() {
        lanes + msum
    } else {
        lanes
    }
}

/// One K-quant super-block: `q` (signed for Q6_K, which carries its offset), a scale per run
/// of 16 (Q4_K/Q5_K repeat the 6-bit scale of each 32), the 8 minimums per 32 (Q4_K/Q5_K),
/// and `(d, dmin)`.
pub struct KBlock {
    pub d: f32,
    pub dmin: f32,
    pub q: [i8; 256],
    pub scales: [i32; 16],
    pub mins: [i32; 8],
}

/// The 6-bit scale and minimum of sub-block `j` (0..8) from the 12 packed bytes of a
/// Q4_K/Q5_K block (ggml's `get_scale_min_k4`).
pub fn k_scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Q4_K's and Q5_K's eight 6-bit scales and eight 6-bit minimums (`s`: their 12 bytes), one a
/// byte, as [`k_scale_min`] reads them (`j`: byte `j`), four at a time in 32-bit words.
#[inline]
pub fn k_scales_mins(s: &[u8]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let (low6, low4, top2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    // j < 4: the low six bits of bytes j and j + 4; j >= 4: four bits of byte j + 4 and the top
    // two of byte j - 4 (scales) or j (minimums).
    let scales_low = w0 & low6;
    let mins_low = w1 & low6;
    let scales_high = (w2 & low4) | (((w0 >> 6) & top2) << 4);
    let mins_high = ((w2 >> 4) & low4) | (((w1 >> 6) & top2) << 4);
    (
        scales_low as u64 | (scales_high as u64) << 32,
        mins_low as u64 | (mins_high as u64) << 32,
    )
}

pub fn decode_k(f: KFormat, b: &[u8]) -> KBlock {
    let mut k = KBlock {
        d: 0.0,
        dmin: 0.0,
        q: [0; 256],
        scales: [0; 16],
        mins: [0; 8],
    };
    match f {
        KFormat::Q4_K | KFormat::Q5_K => {
            k.d = f16_at(b, 0);
            k.dmin = f16_at(b, 2);
            for j in 0..8 {
                let (sc, m) = k_scale_min(j, &b[4..16]);
                k.scales[2 * j] = sc as i32;
                k.scales[2 * j + 1] = sc as i32;
                k.mins[j] = m as i32;
            }
            let (qh, qs) = match f {
                KFormat::Q5_K => (Some(&b[16..48]), &b[48..176]),
                _ => (None, &b[16..144]),
            };
            // Each 32 bytes of qs hold sub-blocks 2c (low nibbles) and 2c + 1 (high).
            for c in 0..4 {
                for l in 0..32 {
                    let (mut lo, mut hi) = (qs[32 * c + l] & 0xf, qs[32 * c + l] >> 4);
                    if let Some(qh) = qh {
                        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                    }
                    k.q[64 * c + l] = lo as i8;
                    k.q[64 * c + 32 + l] = hi as i8;
                }
            }
        }
        KFormat::Q6_K => {
            k.d = f16_at(b, 208);
            for (s, &byte) in k.scales.iter_mut().zip(&b[192..208]) {
                *s = byte as i8 as i32;
            }
            // Two halves of 128: ql's 64 bytes give the low 4 bits (low nibbles: runs 0 and 1
            // of 32, high nibbles: runs 2 and 3), qh's 32 bytes the top 2 bits of each run.
            for h in 0..2 {
                let ql = &b[64 * h..64 * h + 64];
                let qh = &b[128 + 32 * h..128 + 32 * h + 32];
                let q = &mut k.q[128 * h..128 * h + 128];
                for l in 0..32 {
                    let bits =
                        |low: u8, shift: u32| (low | (((qh[l] >> shift) & 3) << 4)) as i8 - 32;
                    q[l] = bits(ql[l] & 0xf, 0);
                    q[l + 32] = bits(ql[l + 32] & 0xf, 2);
                    q[l + 64] = bits(ql[l] >> 4, 4);
                    q[l + 96] = bits(ql[l + 32] >> 4, 6);
                }
            }
        }
    }
    k
}

/// The exact integer sums of a super-block product in eight lanes, lane `l` sub-block `l`
/// (elements `32l..32l + 32`, runs `2l` and `2l + 1`): `sumi[l] = sum over its runs g of
/// scale_g * (w · x)_g`, and for Q4_K/Q5_K `summ[l] = min_l * sum(x over sub-block l)`.
/// Exact in i32 (|sumi| < 2^26).
pub fn k_lane_sums(k: &KBlock, x: &BlockQ8K) -> ([i32; 8], [i32; 8]) {
    let run = |g: usize| -> i32 {
        (16 * g..16 * g + 16)
            .map(|i| k.q[i] as i32 * x.qs[i] as i32)
            .sum()
    };
    let sumi = std::array::from_fn(|l| {
        k.scales[2 * l] * run(2 * l) + k.scales[2 * l + 1] * run(2 * l + 1)
    });
    let summ =
        std::array::from_fn(|l| k.mins[l] * (x.bsums[2 * l] as i32 + x.bsums[2 * l + 1] as i32));
    (sumi, summ)
}

/// One super-block's contribution to the accumulator's eight lanes (see [`k_lane_sums`]),
/// shared by every instruction set: `d`, `dmin` the block's scales, `xd` the activations'.
pub fn k_lane_step(
    f: KFormat,
    acc: &mut [f32; 8],
    d: f32,
    dmin: f32,
    xd: f32,
    sumi: &[i32; 8],
    summ: &[i32; 8],
) {
    let (dd, md) = (d * xd, dmin * xd);
    for (a, (&s, &m)) in acc.iter_mut().zip(sumi.iter().zip(summ)) {
        *a += match f {
            KFormat::Q6_K => dd * s as f32,
            _ => dd * s as f32 - md * m as f32,
        };
    }
}

/// A K-quant row against a tile: each row's lanes accumulated block by block in block order
/// ([`k_lane_step`]), then summed by [`hsum8`] (as the 32-element formats' lanes are).
pub fn k_tile(f: KFormat, w_row: &[u8], x: &[BlockQ8K], out: &mut [f32]) {
    let nb = x.len() / out.len();
    let mut acc = [[0f32; 8]; TILE];
    for (b, block) in w_row.chunks_exact(f.block_bytes()).enumerate() {
        let k = decode_k(f, block);
        for (t, acc) in acc.iter_mut().enumerate().take(out.len()) {
            let xb = &x[t * nb + b];
            let (sumi, summ) = k_lane_sums(&k, xb);
            k_lane_step(f, acc, k.d, k.dmin, xb.d, &sumi, &summ);
        }
    }
    for (o, acc) in out.iter_mut().zip(&acc) {
        *o = hsum8(acc);
    }
}

/// `out[j] = dot(q, rows.row(slots[j])) * scale`, the dot in [`float_tile`]'s order.
pub fn scores<E: Widen>(q: &[f32], rows: Rows<E>, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
    out.clear();
    for &slot in slots {
        let mut acc = [0f32; 8];
        for (i, (&a, b)) in q.iter().zip(rows.row(slot)).enumerate() {
            acc[i % 8] += a * b.widen();
        }
        out.push(hsum8(&acc) * scale);
    }
}

/// `out[e] += p[j] * rows.row(slots[j])[e]`, slot after slot.
pub fn weighted_sum<E: Widen>(rows: Rows<E>, slots: &[usize], p: &[f32], out: &mut [f32]) {
    for (&slot, &p) in slots.iter().zip(p) {
        for (o, v) in out.iter_mut().zip(rows.row(slot)) {
            *o += p * v.widen();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time unpacking of Q4_K/Q5_K's scales and minimums reads what ggml's
    /// byte-at-a-time one reads, on every value of each of the 12 bytes.
    #[test]
    fn scales_and_minimums_unpack_like_ggml() {
        for seed in 0..4096u32 {
            let s: [u8; 12] = std::array::from_fn(|i| {
                let x =
                    seed.wrapping_mul(2_654_435_761).rotate_left(i as u32 * 5) ^ (i as u32 * 97);
                (x >> 8) as u8 ^ if seed < 256 { seed as u8 } else { 0 }
            });
            let (scales, mins) = k_scales_mins(&s);
            for j in 0..8 {
                let (sc, m) = k_scale_min(j, &s);
                assert_eq!(
                    ((scales >> (8 * j)) as u8, (mins >> (8 * j)) as u8),
                    (sc, m),
                    "{s:?} {j}"
                );
            }
        }
    }
}
