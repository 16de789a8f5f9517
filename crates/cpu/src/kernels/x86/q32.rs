//! 32-element block formats against 8-bit activation blocks of 32, eight blocks (a span) at a
//! time, in the interleaved layout ([`Q8Layout::Interleaved`]): the eight registers of a span
//! hold, at lane `o`, one quad each of block `o` ([`super::q32_span`]), so the byte products of
//! all eight leave the whole-block sums of [`scalar::q32_tile`] in its lanes; the one or two
//! groups of four after a row's spans keep the half-block layout ([`super::q32_group`]) and add
//! their halves into the same lanes.
//!
//! What an activation row costs per span is what a verified draft token costs, so it is kept
//! to the byte products and the float steps the definition needs: eight byte products, one
//! conversion, the scales' multiply (against [`Q8Rows::d8`], the row's scales already laid out
//! per lane), one multiply and one add. The 4- and 5-bit formats all multiply unsigned weights:
//! Q4_0 and Q5_0 (stored as `q - 8`, `q - 16`) take their offset back out of the exact integer
//! sums with the activations' lane sums ([`Q8Rows::ysum`]), two instructions where flipping the
//! activations' signs took four, and with VNNI so does Q8_0 (its bytes biased by 128 once a
//! tile; AVX2's 16-bit pair sums would saturate on those, so there it flips the activations'
//! signs per row); the offsets' products of Q4_1 and Q5_1 are summed two rows to a register
//! after the span loop, so that the tile's eight accumulators, the weights and the constants
//! stay in registers. The weights' decoding is paid once per tile. A tile's activations come
//! arranged by tile on whole cache lines ([`Q8Rows::arrange_tile_values`]): each row of a group
//! at a fixed offset from the group's place, so no address is computed per row and no load
//! splits a line; and the tile's eight rows are summed side by side at the end
//! ([`tile_hsum8`]), the same additions as each row's own.
//!
//! [`Q8Rows::arrange_tile_values`]: crate::q8::Q8Rows::arrange_tile_values
//! [`Q8Rows::d8`]: crate::q8::Q8Rows::d8
//! [`Q8Rows::ysum`]: crate::q8::Q8Rows::ysum

use std::arch::x86_64::*;
use std::ops::Range;

use super::q32_group::decode_at;
use super::q32_pairs::spans_in_pairs;
use super::q32_span::{group_pair_step, span_at};
use super::q32_sums::{
    lane_sums, lane_sums_vnni, offset_shift, offset_shift_vnni, span_sums, span_sums_vnni,
    unsigned_weights, unsigned_weights_vnni,
};
use super::{lanes, tile_hsum4, tile_hsum8};
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8};
use crate::kernels::{each_row, Out};
use crate::layout::{Layout, Q8Layout, GROUP, SPAN};
use crate::packed;
use crate::q8::{tile_chunk, Q8Slice};

/// See [`crate::kernels::Kernels::q32_rows`]; `vnni`: the integer sums by AVX-512 VNNI.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C, and with `vnni` AVX-512 F, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q32_rows(
    f: Q32Format,
    layout: Layout,
    w: &[u8],
    row_bytes: usize,
    x: Q8Slice,
    out: Out,
    vnni: bool,
) {
    // SAFETY: the caller vouches for VNNI where it asks for it.
    unsafe {
        match f {
            Q32Format::Q4_0 => by_layout::<Q4_0>(layout, w, row_bytes, x, out, vnni),
            Q32Format::Q4_1 => by_layout::<Q4_1>(layout, w, row_bytes, x, out, vnni),
            Q32Format::Q5_0 => by_layout::<Q5_0>(layout, w, row_bytes, x, out, vnni),
            Q32Format::Q5_1 => by_layout::<Q5_1>(layout, w, row_bytes, x, out, vnni),
            Q32Format::Q8_0 => by_layout::<Q8_0>(layout, w, row_bytes, x, out, vnni),
        }
    }
}

/// [`rows`] (or, with `vnni`, [`rows_vnni`]) of format `F` for the rows' layout and the
/// tile's size.
///
/// # Safety
/// With `vnni`, the CPU must support AVX-512 F, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn by_layout<const F: u8>(
    layout: Layout,
    w: &[u8],
    row_bytes: usize,
    x: Q8Slice,
    out: Out,
    vnni: bool,
) {
    let n = out.tile();
    let fallback = |out: Out| {
        let mut rows = w.to_vec(); // unreachable: tiles have 1..=8 rows
        match layout {
            Layout::Packed => packed::unpack_rows(format(F), w, row_bytes, &mut rows),
            Layout::Lanes16 => crate::packed_lanes::unpack_rows(format(F), w, row_bytes, &mut rows),
            Layout::Gguf => {}
        }
        each_row(&rows, row_bytes, out, |w, o| {
            scalar::q32_tile(format(F), w, x, o)
        })
    };
    match (layout, vnni) {
        (Layout::Gguf, false) => by_tile!(n, rows::<F, GGUF>(w, row_bytes, x, out), fallback(out)),
        (Layout::Packed, false) => {
            by_tile!(n, rows::<F, PACKED>(w, row_bytes, x, out), fallback(out))
        }
        // Never passed here (`Kernels::q32_rows` sends these to their own kernel).
        (Layout::Lanes16, _) => fallback(out),
        // SAFETY: the caller has VNNI (above).
        (Layout::Gguf, true) => unsafe {
            by_tile!(n, rows_vnni::<F, GGUF>(w, row_bytes, x, out), fallback(out))
        },
        // SAFETY: as above.
        (Layout::Packed, true) => unsafe {
            by_tile!(
                n,
                rows_vnni::<F, PACKED>(w, row_bytes, x, out),
                fallback(out)
            )
        },
    }
}

/// The activations a tile of several rows keeps in the L1 cache (three quarters of the 32 KB
/// most x86 cores have), and what one row's group takes there: values, per-lane scales and lane
/// sums, the offsets' scales.
const TILE_CHUNK_BYTES: usize = 24 << 10;
const GROUP_ACTIVATION_BYTES: usize = 128 + 32 + 32 + 16;

/// The `P` argument of [`rows`]: the rows' whole groups in the file's order, or packed.
const GGUF: bool = false;
const PACKED: bool = true;

/// Defines the tile kernel `$name` (format `F`, layout `P`, `T` rows) on the target features
/// `$features`, its integer lane sums by `$lane_sums` of the weights' unsigned operand
/// `$unsigned`, less the activations' lane sums shifted by `$offset_shift`: AVX2's byte
/// products, or AVX-512 VNNI's `vpdpbusd` (the same exact sums in one instruction a register
/// where AVX2 takes two). The rest of the kernel is one text, so the two cannot drift apart.
macro_rules! tile_kernel {
    ($name:ident, $features:literal, $span_sums:ident, $lane_sums:ident, $unsigned:ident, $offset_shift:ident, $rows_in_pairs:literal) => {
        #[target_feature(enable = $features)]
        fn $name<const F: u8, const P: bool, const T: usize>(
            w_rows: &[u8],
            row_bytes: usize,
            x: Q8Slice,
            mut out: Out,
        ) {
            /// The one or two groups `g..c1` after a row's spans (`c1`: the chunk's end, an even
            /// group or the row's end): their half-block sums added into the span lanes of `acc`
            /// (returned), group g's in lanes 0..4; their offsets into `mws`. Out of line: its
            /// code, inlined, made the span loop spill (Q8_0's tiles took a fifth longer).
            ///
            /// # Safety
            /// `qs`, `d8` and `ysum` (as the kernel takes them) hold `T` rows of every group
            /// through `c1`.
            #[inline(never)]
            #[target_feature(enable = $features)]
            unsafe fn groups_after_spans<const F: u8, const P: bool, const T: usize>(
                w_row: &[u8],
                Range { start: g, end: c1 }: Range<usize>,
                present: usize,
                padded: &mut [u8; GROUP * 34],
                (qs, d8, ysum): (*const __m256i, *const __m256, *const __m256i),
                mws: &mut [__m128],
                mut acc: [__m256; T],
            ) -> [__m256; T] {
                // SAFETY: this function's callers run on AVX2, FMA and F16C, as `decode_at` needs.
                let (wa, dwa, mwa) = unsafe { decode_at::<F, P, T>(w_row, g, present, padded) };
                let with_b = g + 1 < c1;
                let (wb, dwb, mwb) = if with_b {
                    // SAFETY: as above.
                    unsafe { decode_at::<F, P, T>(w_row, g + 1, present, padded) }
                } else {
                    (
                        [_mm256_setzero_si256(); GROUP],
                        _mm_setzero_ps(),
                        _mm_setzero_ps(),
                    )
                };
                let (ua, ub) = ($unsigned::<F, GROUP>(&wa), $unsigned::<F, GROUP>(&wb));
                if format(F).has_min() {
                    mws[g] = mwa;
                    if with_b {
                        mws[g + 1] = mwb;
                    }
                }
                let dw8 = _mm256_set_m128(dwb, dwa);
                // Group gr's sums against row t, less the unsigned weights' offset.
                let group_sums = |w, u, gr: usize, t: usize| {
                    let at = (gr * T + t) * GROUP;
                    // SAFETY: row t of a group through c1 (the caller's promise); unaligned.
                    let y = |c: usize| unsafe { _mm256_loadu_si256(qs.add(at + c)) };
                    let sums = $lane_sums::<F>(w, u, [y(0), y(1), y(2), y(3)]);
                    match $offset_shift(F) {
                        0 => sums,
                        shift => {
                            // SAFETY: as above (formats with an offset have every group's).
                            let ys = unsafe { _mm256_loadu_si256(ysum.add(gr * T + t)) };
                            let off = _mm256_sll_epi32(ys, _mm_cvtsi32_si128(shift));
                            _mm256_sub_epi32(sums, off)
                        }
                    }
                };
                // SAFETY: as above.
                let d8_at = |gr: usize, t: usize| unsafe {
                    _mm256_loadu_ps(d8.add(gr * T + t) as *const f32)
                };
                // (Two loops: one with a branch inside kept neither in registers.)
                if with_b {
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let (a, da) = (group_sums(&wa, &ua, g, t), d8_at(g, t));
                        let (b, db) = (group_sums(&wb, &ub, g + 1, t), d8_at(g + 1, t));
                        *acc = group_pair_step(*acc, dw8, a, b, da, db);
                    }
                } else {
                    let (b, db) = (_mm256_setzero_si256(), _mm256_setzero_ps());
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let (a, da) = (group_sums(&wa, &ua, g, t), d8_at(g, t));
                        *acc = group_pair_step(*acc, dw8, a, b, da, db);
                    }
                }
                acc
            }

            /// The group after a row's spans when it holds two blocks, over a tile arranged two
            /// rows to a register ([`Q8Slice::paired_tail`]): four byte products a pair of rows
            /// where [`groups_after_spans`] takes four a row; each block's halves added, scaled
            /// as there, and added to lanes 0 and 1 of each row's `acc` (returned), with +0 in
            /// the others as the padding's lanes add there. Its offsets into `mws`.
            ///
            /// # Safety
            /// `qs`, `d8` and `ysum` (as the kernel takes them) hold `T` rows of every group
            /// through `g`, group `g` arranged in pairs.
            #[inline(never)]
            #[target_feature(enable = $features)]
            unsafe fn paired_tail<const F: u8, const P: bool, const T: usize>(
                w_row: &[u8],
                g: usize,
                padded: &mut [u8; GROUP * 34],
                (qs, d8, ysum): (*const __m256i, *const __m256, *const __m256i),
                mws: &mut [__m128],
                mut acc: [__m256; T],
            ) -> [__m256; T] {
                // SAFETY: this function's callers run on AVX2, FMA and F16C, as `decode_at` needs.
                let (w, dw, mw) = unsafe { decode_at::<F, P, T>(w_row, g, 2, padded) };
                if format(F).has_min() {
                    mws[g] = mw;
                }
                // Each register's blocks 0 and 1, first halves then second, for either row.
                let pick = _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5);
                let w = [
                    _mm256_permutevar8x32_epi32(w[0], pick),
                    _mm256_permutevar8x32_epi32(w[1], pick),
                    _mm256_permutevar8x32_epi32(w[2], pick),
                    _mm256_permutevar8x32_epi32(w[3], pick),
                ];
                let u = $unsigned::<F, GROUP>(&w);
                let dw2 = _mm256_set_m128(dw, dw);
                let zero = _mm256_setzero_ps();
                for p in 0..T.div_ceil(2) {
                    // The pair's place.
                    let at = g * T + 2 * p;
                    // SAFETY: group g's rows (the caller's promise); unaligned loads.
                    let y = |c: usize| unsafe { _mm256_loadu_si256(qs.add(at * GROUP + c)) };
                    let sums = $lane_sums::<F>(&w, &u, [y(0), y(1), y(2), y(3)]);
                    let sums = match $offset_shift(F) {
                        0 => sums,
                        shift => {
                            // SAFETY: as above (formats with an offset have every group's).
                            let ys = unsafe { _mm256_loadu_si256(ysum.add(at)) };
                            _mm256_sub_epi32(sums, _mm256_sll_epi32(ys, _mm_cvtsi32_si128(shift)))
                        }
                    };
                    // Lane 2h + k holds half h of block k: the halves added.
                    let whole = _mm256_add_epi32(sums, _mm256_shuffle_epi32::<0b01_00_11_10>(sums));
                    // SAFETY: as above.
                    let d8p = unsafe { _mm256_loadu_ps(d8.add(at) as *const f32) };
                    let dd = _mm256_mul_ps(dw2, d8p);
                    let prod = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(whole));
                    let prod = _mm256_blend_ps::<0b0011_0011>(zero, prod);
                    let t = 2 * p;
                    acc[t] = _mm256_add_ps(acc[t], _mm256_permute2f128_ps::<0x80>(prod, prod));
                    if t + 1 < T {
                        let high = _mm256_permute2f128_ps::<0x81>(prod, prod);
                        acc[t + 1] = _mm256_add_ps(acc[t + 1], high);
                    }
                }
                acc
            }

            let format = format(F);
            let has_min = format.has_min();
            let bb = block_bytes(F);
            debug_assert_eq!(x.layout, Q8Layout::Interleaved);
            let stride = x.len() / T; // activation blocks per row, padded to whole groups
            let groups = stride / GROUP;
            // A tile of several rows comes arranged by tile (Kernels::q32_rows sees to it): each
            // group's rows side by side, at fixed offsets from the group's place. One row's
            // arrangement is its own order.
            let (qs, d8, ysum, s) = if T == 1 {
                (x.qs, x.d8, x.ysum, x.s)
            } else {
                (x.tile_qs, x.tile_d8, x.tile_ysum, x.tile_s)
            };
            // Every read of the activations below is in bounds by these (`T * groups` groups each).
            assert!(
                qs.len() == T * groups * GROUP
                    && d8.len() == T * groups
                    && ($offset_shift(F) == 0 || ysum.len() == T * groups)
                    && s.len() == T * stride,
                "activations of {T} rows of {groups} groups, arranged by tile"
            );
            let qs = qs.as_ptr() as *const __m256i; // [groups][T][GROUP]
            let d8 = d8.as_ptr() as *const __m256; // [groups][T]
            let ysum = ysum.as_ptr() as *const __m256i; // [groups][T] (formats with an offset)
            let s = s.as_ptr(); // [groups][T][GROUP]: two rows' offsets' scales are eight f32
            let s_at = |g: usize, t: usize| (g * T + t) * GROUP;
            // A row's last group when it has fewer than four blocks (the same count in every row):
            // the blocks it has, then zeros (scale 0 against padded activations of 0: exactly the
            // scalar kernel's empty blocks). Zeroed once; each row copies its blocks in.
            let present = row_bytes / bb % GROUP;
            let mut padded = [0u8; GROUP * 34];
            // The groups of the row's whole spans (the activations' spans too).
            let span_groups = row_bytes / bb / SPAN * 2;
            assert_eq!(
                x.spans * 2,
                span_groups,
                "activations in spans of the weights'"
            );
            let in_pairs = T > 1 && x.paired_tail; // the tail's arrangement (by tile)
            assert_eq!(
                x.paired_tail,
                row_bytes / bb % SPAN == 2,
                "activations' tail of two blocks where the weights' is"
            );
            // Each group's offsets (formats with a minimum), for the pass after each chunk's group
            // loop: on the stack for rows of up to 8,192 elements.
            let (mut on_stack, mut on_heap) = ([_mm_setzero_ps(); 64], Vec::new());
            let mws: &mut [__m128] = match (has_min, groups) {
                (false, _) => &mut [],
                (true, g) if g <= on_stack.len() => &mut on_stack[..g],
                (true, g) => {
                    on_heap.resize(g, _mm_setzero_ps());
                    &mut on_heap
                }
            };
            // A tile of several rows walks long rows in chunks of groups whose activations stay
            // in the L1 cache, every weight row through one chunk before the next (eight rows of
            // 4,864 columns took half as long again per block without): each row's accumulators
            // wait in `paused` between chunks, and each lane still adds its groups in order.
            let chunk = if T > 1 {
                // As many chunks as the budget needs, of equal length.
                let most = (TILE_CHUNK_BYTES / (T * GROUP_ACTIVATION_BYTES)).max(1);
                let chunk = groups.div_ceil(groups.div_ceil(most).max(1)).max(1);
                chunk + chunk % 2 // whole spans
            } else {
                groups
            };
            let zeros = (
                [_mm256_setzero_ps(); T],
                [_mm256_setzero_ps(); 4],
                _mm_setzero_ps(),
            );
            let mut paused = Vec::new();
            if chunk < groups {
                paused.resize(w_rows.len() / row_bytes, zeros);
            }
            for c0 in (0..groups.max(1)).step_by(chunk) {
                let c1 = (c0 + chunk).min(groups);
                for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
                    // Offsets' sums: rows 2p and 2p + 1 in the halves of `macc2[p]`, an odd last
                    // row in `macc1`.
                    // (A row past its first chunk has its state in `paused`, which then holds
                    // every row.)
                    let (mut acc, mut macc2, mut macc1) = if c0 > 0 { paused[r] } else { zeros };
                    // The pairs a tile of T rows leaves unused, zeros whatever they held: carried
                    // between rows, they would be copied through memory row after row, by
                    // 64-byte moves that split a line and stall every weight row (two-row tiles
                    // ~20% slower).
                    for m in macc2.iter_mut().skip(T / 2) {
                        *m = _mm256_setzero_ps();
                    }
                    let mut g = c0;
                    // The first group whose offsets the pass after the group loop adds.
                    let mut offsets_from = c0;
                    if $rows_in_pairs && T > 1 {
                        // The chunk's spans two rows to a 512-bit register (c0 and the chunk are
                        // even, so these are whole spans), their offsets with them.
                        let end = c1.min(span_groups).max(g);
                        // SAFETY: this kernel's features are AVX-512 F, VL and VNNI (only
                        // `rows_vnni` pairs rows); the activations hold `T` rows of every group
                        // (asserted above).
                        (acc, (macc2, macc1)) = unsafe {
                            spans_in_pairs::<F, P, T>(
                                w_row,
                                g..end,
                                (qs, d8, ysum, s),
                                (acc, c0 == 0),
                                (macc2, macc1),
                            )
                        };
                        (g, offsets_from) = (end, end);
                    }
                    while g < c1 && g < span_groups {
                        // Span g / 2: groups g and g + 1, one whole-block sum per lane.
                        let (w, dw, mw) = span_at::<F, P>(w_row, g);
                        let u = $unsigned::<F, SPAN>(&w);
                        if has_min {
                            // (formats with a minimum: one per group)
                            mws[g] = _mm256_castps256_ps128(mw);
                            mws[g + 1] = _mm256_extractf128_ps::<1>(mw);
                        }
                        // SAFETY: groups g and g + 1's rows: in bounds (asserted above). Each
                        // row below is at a fixed offset from these (T is a constant).
                        let (ya, yb, d8g) = unsafe {
                            (
                                qs.add(g * T * GROUP),
                                qs.add((g + 1) * T * GROUP),
                                d8.add(g * T),
                            )
                        };
                        // (Read only by formats with an offset, whose `ysum` has every group.)
                        let ysg = ysum.wrapping_add(g * T);
                        for (t, acc) in acc.iter_mut().enumerate() {
                            // SAFETY: row t < T of groups g and g + 1, as above; unaligned.
                            let y = |c: usize| unsafe {
                                let at = tile_chunk(T, t, c % GROUP); // (row t's own when T = 1)
                                _mm256_loadu_si256(if c < GROUP { ya.add(at) } else { yb.add(at) })
                            };
                            let ys = [y(0), y(1), y(2), y(3), y(4), y(5), y(6), y(7)];
                            let sums = $span_sums::<F>(&w, &u, ys);
                            let sums = match $offset_shift(F) {
                                0 => sums,
                                shift => {
                                    // SAFETY: as above (formats with an offset have `T * groups`).
                                    let ys = unsafe { _mm256_loadu_si256(ysg.add(t)) };
                                    let off = _mm256_sll_epi32(ys, _mm_cvtsi32_si128(shift));
                                    _mm256_sub_epi32(sums, off)
                                }
                            };
                            // SAFETY: as above.
                            let d8 = unsafe { _mm256_loadu_ps(d8g.add(t) as *const f32) };
                            let dd = _mm256_mul_ps(dw, d8);
                            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sums)));
                        }
                        g += 2;
                    }
                    if g < c1 && in_pairs {
                        // SAFETY: as below; the one group after the spans, arranged in pairs
                        // (`in_pairs`: by tile, several rows).
                        acc = unsafe {
                            paired_tail::<F, P, T>(w_row, g, &mut padded, (qs, d8, ysum), mws, acc)
                        };
                    } else if g < c1 {
                        // SAFETY: the activations' pointers hold `T * groups` groups (asserted
                        // above), and g < c1 <= groups.
                        acc = unsafe {
                            groups_after_spans::<F, P, T>(
                                w_row,
                                g..c1,
                                present,
                                &mut padded,
                                (qs, d8, ysum),
                                mws,
                                acc,
                            )
                        };
                    }
                    if has_min {
                        // The offsets' products of the groups the span loop did not add (all of
                        // them for AVX2, whose group loop had no registers left for their
                        // accumulators; the tail's with VNNI), in a pass of their own.
                        for g in offsets_from..c1 {
                            let mw = mws[g];
                            let mw2 = _mm256_set_m128(mw, mw);
                            for (p, macc) in macc2.iter_mut().enumerate().take(T / 2) {
                                // SAFETY: rows 2p and 2p + 1 of group g, side by side: in bounds
                                // (asserted above).
                                let s8 = unsafe { _mm256_loadu_ps(s.add(s_at(g, 2 * p))) };
                                *macc = _mm256_add_ps(*macc, _mm256_mul_ps(mw2, s8));
                            }
                            if T % 2 == 1 {
                                // SAFETY: as above.
                                let s4 = unsafe { _mm_loadu_ps(s.add(s_at(g, T - 1))) };
                                macc1 = _mm_add_ps(macc1, _mm_mul_ps(mw, s4));
                            }
                        }
                    }
                    if c1 < groups {
                        paused[r] = (acc, macc2, macc1);
                        continue;
                    }
                    if T == 1 {
                        let mut m = [0f32; 4];
                        // SAFETY: `m` holds four f32.
                        unsafe { _mm_storeu_ps(m.as_mut_ptr(), macc1) };
                        out.put(r, &[finish_q32(format, hsum8(&lanes(acc[0])), hsum4(&m))]);
                        continue;
                    }
                    // The tile's rows summed side by side: padded to eight with zeros, whose sums
                    // are dropped.
                    // (Written out, not by `array::from_fn`: its closure, compiled without the
                    // target features, took the lanes by reference, which kept them in memory,
                    // and copying them there stalled every weight row.)
                    let pick = |t: usize| acc.get(t).copied().unwrap_or(_mm256_setzero_ps());
                    let acc8 = [
                        pick(0),
                        pick(1),
                        pick(2),
                        pick(3),
                        pick(4),
                        pick(5),
                        pick(6),
                        pick(7),
                    ];
                    let mut sums = tile_hsum8(acc8);
                    if has_min {
                        let pick = |p: usize| match p {
                            p if p < T / 2 => macc2[p],
                            p if p == T / 2 && T % 2 == 1 => {
                                _mm256_set_m128(_mm_setzero_ps(), macc1)
                            }
                            _ => _mm256_setzero_ps(),
                        };
                        let macc = [pick(0), pick(1), pick(2), pick(3)];
                        sums = _mm256_add_ps(sums, tile_hsum4(macc));
                    }
                    let mut v = [0f32; 8];
                    // SAFETY: `v` holds eight f32.
                    unsafe { _mm256_storeu_ps(v.as_mut_ptr(), sums) };
                    out.put(r, &v[..T]);
                }
            }
        }
    };
}

tile_kernel!(
    rows,
    "avx2,fma,f16c",
    span_sums,
    lane_sums,
    unsigned_weights,
    offset_shift,
    false
);
tile_kernel!(
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    span_sums_vnni,
    lane_sums_vnni,
    unsigned_weights_vnni,
    offset_shift_vnni,
    true
);
