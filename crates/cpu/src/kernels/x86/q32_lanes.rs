//! 32-element block formats in [`Layout::Lanes16`] ([`crate::packed_lanes`]) against 8-bit
//! activation blocks, with AVX-512 VNNI: sixteen weight rows in the sixteen lanes of a register,
//! four activations broadcast to all of them, so eight `vpdpbusd` leave each row's exact block
//! sum in its lane, and each float step ([`crate::kernels::scalar::q32_tile`]'s scale multiply, the sum's
//! conversion, multiply and add) serves sixteen rows.
//!
//! The order is the definition's: [`crate::kernels::scalar::q32_tile`]'s lane `l` adds the products of blocks
//! `l, l + 8, l + 16, ..` in turn; here each lane's chain is a register per activation row
//! (sixteen weight rows each), walked block after block for small tiles and lane after lane for
//! larger ones (see [`SEQUENTIAL_ROWS`]), and [`crate::kernels::scalar::hsum8`]'s additions are done between the
//! eight chains' registers, lane by lane. So the bits are the scalar kernel's (and every other instruction set's), whatever
//! the tile's rows. The offsets' products of Q4_1 and Q5_1 are a pass of their own per
//! [`GROUP`] lane, in the same way. A block absent from a lane's chain (past the row's last)
//! is skipped where the definition adds a zero product: a chain that starts at +0.0 never holds
//! -0.0, so adding +0.0 would change nothing.
//!
//! [`Layout::Lanes16`]: crate::layout::Layout::Lanes16

use std::arch::x86_64::*;

use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::Out;
use crate::layout::{interleaved_position, span_position, Q8Layout};
use crate::layout::{GROUP, SPAN};
use crate::packed_lanes::{offsets, LANES};
use crate::q8::Q8Slice;

/// See [`crate::kernels::Kernels::q32_rows`], the rows in [`crate::layout::Layout::Lanes16`].
///
/// # Safety
/// The CPU must support AVX-512 F and VNNI; `w` must hold whole groups of packed rows, and a
/// tile of several rows must be arranged block by block ([`Q8Slice::lanes_by_tile`]).
#[target_feature(enable = "avx512f,avx512vnni,f16c")]
pub unsafe fn q32_rows(f: Q32Format, w: &[u8], row_bytes: usize, x: Q8Slice, out: Out) {
    debug_assert!(crate::packed_lanes::fits(f, w.len(), row_bytes));
    debug_assert!(out.tile() == 1 || x.lanes_by_tile());
    let n = out.tile();
    // SAFETY: the caller's promise; a tile has 1..=8 rows (`by_tile!`'s fallback is never
    // taken, and computes nothing).
    unsafe {
        match f {
            Q32Format::Q4_0 => by_tile!(n, rows::<Q4_0>(w, row_bytes, x, out), ()),
            Q32Format::Q4_1 => by_tile!(n, rows::<Q4_1>(w, row_bytes, x, out), ()),
            Q32Format::Q5_0 => by_tile!(n, rows::<Q5_0>(w, row_bytes, x, out), ()),
            Q32Format::Q5_1 => by_tile!(n, rows::<Q5_1>(w, row_bytes, x, out), ()),
            Q32Format::Q8_0 => by_tile!(n, rows::<Q8_0>(w, row_bytes, x, out), ()),
        }
    }
}

/// Rows `w` (whole groups of [`LANES`] rows of `row_bytes`, packed) times the tile's `T` rows
/// `x` into `out`.
///
/// # Safety
/// The CPU must support AVX-512 F and VNNI; `w` must hold whole groups of rows of format `F`
/// in [`crate::packed_lanes`]'s layout, and `x` `T` rows of the blocks `row_bytes` implies
/// (padded).
#[target_feature(enable = "avx512f,avx512vnni,f16c")]
unsafe fn rows<const F: u8, const T: usize>(w: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    let bb = block_bytes(F);
    let nb = row_bytes / bb;
    let group_bytes = LANES * row_bytes;
    let stride = x.len() / T; // blocks per activation row
    let has_min = format(F).has_min();
    // What the unsigned products hold over the signed ones, in units of the activations' sum.
    let bias: i32 = match F {
        Q4_0 => 8,
        Q5_0 => 16,
        Q8_0 => 128,
        _ => 0,
    };
    let m_at = offsets(format(F)).0;
    let low4 = _mm512_set1_epi8(0x0f);
    let fifth = _mm512_set1_epi8(0x10);
    let arranged = x.lanes_by_tile();
    // Each pass's sums (every lane written before it is read: set once, not per group).
    let mut lanes = [[_mm512_setzero_ps(); SPAN]; T];
    let mut offset_lanes = [[_mm512_setzero_ps(); GROUP]; T];
    for (g, group) in w.chunks_exact(group_bytes).enumerate() {
        let gp = group.as_ptr();
        let ctx = Blocks {
            group: gp,
            x: &x,
            arranged,
            bias,
            low4,
            fifth,
        };
        if T <= SEQUENTIAL_ROWS {
            // Block after block: one stream from memory, prefetched `AHEAD`, each lane's chain
            // in registers.
            let mut acc = [[_mm512_setzero_ps(); T]; SPAN];
            for span in 0..nb / SPAN {
                for (l, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: the group holds nb blocks; the caller's promises.
                    unsafe { ctx.block::<F, T>(SPAN * span + l, AHEAD, acc) };
                }
            }
            for (l, acc) in acc.iter_mut().enumerate().take(nb % SPAN) {
                // SAFETY: as above.
                unsafe { ctx.block::<F, T>(nb - nb % SPAN + l, AHEAD, acc) };
            }
            for (l, acc) in acc.iter().enumerate() {
                for (lane, &a) in lanes.iter_mut().zip(acc) {
                    lane[l] = a;
                }
            }
        } else {
            // Lane after lane: a register per row, the group's blocks in cache after the first
            // pass, the next group's prefetched block by block.
            for l in 0..SPAN {
                let mut acc = [_mm512_setzero_ps(); T];
                for b in (l..nb).step_by(SPAN) {
                    // SAFETY: as above.
                    unsafe { ctx.block::<F, T>(b, group_bytes, &mut acc) };
                }
                for (lane, acc) in lanes.iter_mut().zip(acc) {
                    lane[l] = acc;
                }
            }
        }
        if has_min {
            for k in 0..GROUP {
                let mut acc = [_mm512_setzero_ps(); T];
                let mut b = k;
                while b < nb {
                    // SAFETY: block b's offsets, within the group.
                    let mw = unsafe {
                        _mm512_cvtph_ps(_mm256_loadu_si256(
                            gp.add(b * LANES * bb + m_at) as *const __m256i
                        ))
                    };
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let s = _mm512_set1_ps(x.s[t * stride + b]);
                        *acc = _mm512_add_ps(*acc, _mm512_mul_ps(mw, s));
                    }
                    b += GROUP;
                }
                for (lane, acc) in offset_lanes.iter_mut().zip(acc) {
                    lane[k] = acc;
                }
            }
        }
        for t in 0..T {
            let a = &lanes[t];
            let add = _mm512_add_ps;
            let (s0, s1) = (add(a[0], a[4]), add(a[1], a[5]));
            let (s2, s3) = (add(a[2], a[6]), add(a[3], a[7]));
            let mut sum = add(add(s0, s2), add(s1, s3));
            if has_min {
                let m = &offset_lanes[t];
                sum = add(sum, add(add(m[0], m[2]), add(m[1], m[3])));
            }
            let row = out.row(t);
            // SAFETY: the group's sixteen outputs of row t (out has a value per weight row).
            unsafe { _mm512_storeu_ps(row[g * LANES..(g + 1) * LANES].as_mut_ptr(), sum) };
        }
    }
}

/// Tiles of up to this many rows take a group's blocks in order, each of the eight lanes'
/// chains in registers (8 a row); larger ones a lane's chain at a time, which keeps their
/// accumulators in registers. SmolLM2's forwards behind 512 entries on two threads: four rows
/// 3.83 ms in order, 4.13-4.71 lane by lane; eight rows 6.08-6.29 and 5.98-5.99.
const SEQUENTIAL_ROWS: usize = 4;

/// How far ahead of a block the in-order tiles prefetch: 8 KB. SmolLM2's one-row forward
/// (behind 64 entries, 150 forwards) 2.53-2.58 ms on two threads at 4 KB, 2.22-2.23 at 8 KB,
/// 2.19-2.24 at 12 KB; the Qwen 0.5B's 7.55-7.77 ms at 4 KB, 6.96 at 8 KB, 7.28-7.43 at 16 KB.
const AHEAD: usize = 8 << 10;

/// What a group's blocks are multiplied with.
struct Blocks<'a> {
    group: *const u8,
    x: &'a Q8Slice<'a>,
    /// Whether the rows are arranged block by block (always for several; for one, when only
    /// these kernels take them, see `Q8Rows::quantize_for_lanes`).
    arranged: bool,
    bias: i32,
    low4: __m512i,
    fifth: __m512i,
}

impl Blocks<'_> {
    /// Block `b`'s products with the tile's `T` rows, added into `acc` (the chains of its
    /// lane); what is `ahead` bytes past the block is prefetched.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and VNNI; the group must hold block `b` of format `F`,
    /// and the tile's rows their blocks. (Inlined into [`rows`], whose target features it
    /// then has: a call would pass the accumulators through memory.)
    #[inline(always)]
    unsafe fn block<const F: u8, const T: usize>(
        &self,
        b: usize,
        ahead: usize,
        acc: &mut [__m512; T],
    ) {
        let bb = block_bytes(F);
        let (_, qh_at, values_at) = offsets(format(F));
        // SAFETY: block b of the group is within it (the caller's promise); what is `ahead`
        // of it is only prefetched (no fault past the end).
        let bp = unsafe { self.group.add(b * LANES * bb) };
        for line in (0..LANES * bb).step_by(64) {
            // SAFETY: a prefetch is a hint (an address past the weights' end faults nothing),
            // and the caller's CPU has the features this function enables.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(ahead + line) as *const i8) };
        }
        // SAFETY: a packed block's parts (above).
        let (dw, weights) = unsafe {
            (
                _mm512_cvtph_ps(_mm256_loadu_si256(bp as *const __m256i)),
                decode::<F>(bp.add(values_at), bp.add(qh_at), self.low4, self.fifth),
            )
        };
        let x = self.x;
        let step = Step {
            weights,
            dw,
            bias: self.bias,
        };
        // SAFETY: the tile's rows hold this block (the caller's promise): one row's blocks, or
        // several rows arranged block by block (`rows` checks).
        unsafe {
            if T > 1 || self.arranged {
                // Row t's quads, scale and sum of block b at fixed offsets from the block's.
                let at = b * T;
                let p = x.lanes_qs.as_ptr().add(at) as *const u8;
                let (d, sum) = (x.lanes_d.as_ptr().add(at), x.lanes_sum.as_ptr().add(at));
                step.rows::<T, BLOCK_QUADS>(p, d, sum, acc);
                return;
            }
            // One row in its own layout (four consecutive elements stay together in each).
            let p = (x.qs.as_ptr() as *const u8).add(x.quad_at(b, 0));
            let d = x.d.as_ptr().add(b);
            let sum = if self.bias != 0 { x.block_sum(0, b) } else { 0 };
            if x.layout == Q8Layout::Blocks {
                step.rows::<T, BLOCK_QUADS>(p, d, &sum, acc);
            } else if b < SPAN * x.spans {
                step.rows::<T, SPAN_QUADS>(p, d, &sum, acc);
            } else {
                step.rows::<T, GROUP_QUADS>(p, d, &sum, acc);
            }
        }
    }
}

/// Where quad `q` of a block sits from its quad 0: in an interleaved span (lane `o` of register
/// `q`), in element order, and in an interleaved group after the spans
/// ([`crate::layout::interleaved_position`]: quads 0..4 of the block's first half 32
/// bytes apart, those of its second half 16 bytes after them).
const SPAN_QUADS: u8 = 0;
const BLOCK_QUADS: u8 = 1;
const GROUP_QUADS: u8 = 2;

const fn quad_offset(kind: u8, q: usize) -> usize {
    match kind {
        SPAN_QUADS => span_position(0, 4 * q),
        BLOCK_QUADS => 4 * q,
        _ => interleaved_position(0, 4 * q),
    }
}

/// One block of sixteen weight rows, decoded, against each row of a tile.
struct Step {
    weights: [__m512i; SPAN],
    dw: __m512,
    bias: i32,
}

impl Step {
    /// Adds a block's products with each of the tile's `T` rows into `acc[t]`: row `t`'s quad 0
    /// of the block at `p + 32 * t` (its other quads placed as `KIND` says), its scale at
    /// `d + t`, its values' sum at `sum + t`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and VNNI; the pointers must hold the tile's rows.
    #[inline(always)]
    unsafe fn rows<const T: usize, const KIND: u8>(
        &self,
        p: *const u8,
        d: *const f32,
        sum: *const i32,
        acc: &mut [__m512; T],
    ) {
        let w = &self.weights;
        for (t, acc) in acc.iter_mut().enumerate() {
            // SAFETY: the caller's promise; a quad is four bytes inside its block.
            let bc = |q: usize| unsafe {
                let at = p.add(32 * t + quad_offset(KIND, q)) as *const i32;
                _mm512_set1_epi32(at.read_unaligned())
            };
            // SAFETY: the caller's CPU has AVX-512 VNNI (this function's contract).
            let dp = |a, b, c| unsafe { _mm512_dpbusd_epi32(a, b, c) };
            // SAFETY: as above.
            let zero = unsafe { _mm512_setzero_si512() };
            let low = dp(dp(zero, w[0], bc(0)), w[1], bc(1));
            let low = dp(dp(low, w[2], bc(2)), w[3], bc(3));
            let high = dp(dp(zero, w[4], bc(4)), w[5], bc(5));
            let high = dp(dp(high, w[6], bc(6)), w[7], bc(7));
            // SAFETY: the caller's promise.
            unsafe {
                let mut sums = _mm512_add_epi32(low, high);
                if self.bias != 0 {
                    let taken = self.bias * *sum.add(t);
                    sums = _mm512_sub_epi32(sums, _mm512_set1_epi32(taken));
                }
                let dd = _mm512_mul_ps(self.dw, _mm512_set1_ps(*d.add(t)));
                *acc = _mm512_add_ps(*acc, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sums)));
            }
        }
    }
}

/// A packed block's eight registers of unsigned weights (register `q`: elements `4q..4q + 4`
/// of each lane's row).
///
/// # Safety
/// `values` (and for the 5-bit formats `qh`) must point to a packed block's parts.
#[inline]
#[target_feature(enable = "avx512f,avx512vnni,f16c")]
unsafe fn decode<const F: u8>(
    values: *const u8,
    qh: *const u8,
    low4: __m512i,
    fifth: __m512i,
) -> [__m512i; SPAN] {
    // SAFETY: `values` points to a packed block's parts (the caller's promise), whose
    // registers `i` take 64 bytes each.
    let load = |i: usize| unsafe { _mm512_loadu_si512(values.add(64 * i) as *const __m512i) };
    if F == Q8_0 {
        return [
            load(0),
            load(1),
            load(2),
            load(3),
            load(4),
            load(5),
            load(6),
            load(7),
        ];
    }
    let v = [load(0), load(1), load(2), load(3)];
    let high = |v: __m512i| _mm512_and_si512(_mm512_srli_epi32::<4>(v), low4);
    let mut w = [
        _mm512_and_si512(v[0], low4),
        _mm512_and_si512(v[1], low4),
        _mm512_and_si512(v[2], low4),
        _mm512_and_si512(v[3], low4),
        high(v[0]),
        high(v[1]),
        high(v[2]),
        high(v[3]),
    ];
    if matches!(F, Q5_0 | Q5_1) {
        // SAFETY: the caller's promise.
        let h = unsafe { _mm512_loadu_si512(qh as *const __m512i) };
        // Bit q of each byte to bit 4 (32-bit shifts: what crosses into a neighbouring byte
        // lands outside bit 4 and is masked off).
        let bits = [
            _mm512_slli_epi32::<4>(h),
            _mm512_slli_epi32::<3>(h),
            _mm512_slli_epi32::<2>(h),
            _mm512_slli_epi32::<1>(h),
            h,
            _mm512_srli_epi32::<1>(h),
            _mm512_srli_epi32::<2>(h),
            _mm512_srli_epi32::<3>(h),
        ];
        for (w, bits) in w.iter_mut().zip(bits) {
            *w = _mm512_or_si512(*w, _mm512_and_si512(bits, fifth));
        }
    }
    w
}
