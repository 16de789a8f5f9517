//! The spans of a VNNI tile of several rows (`q32.rs`) two activation rows to a 512-bit
//! register: a span's weights decoded once into both halves, each pair of rows' same register
//! side by side in the arranged activations ([`tile_chunk`]), so one `vpdpbusd` multiplies the
//! weights by two rows, and the float steps scale and add both rows' lanes at once.
//!
//! Each lane computes exactly what `q32.rs`'s 256-bit span loop computes for its row (the
//! same exact integer sums, then the same multiplies and adds of the same operands in the same
//! order), so the bits are the same; what changes is the instruction count, halved where a core
//! multiplies 512 bits as fast as 256 (Zen 5 and the Xeons: eight-row products ~40% faster).
//! An odd tile's last row takes a register of its own, beside zeros.

use std::arch::x86_64::*;
use std::ops::Range;

use super::q32_span::span_at;
use super::q32_sums::{offset_shift_vnni, unsigned_weights_vnni};
use crate::kernels::q32_ids::format;
use crate::layout::{GROUP, SPAN};
use crate::q8::tile_chunk;

/// Rows `2p` (low half) and `2p + 1` (high half) of `acc` in one register; zeros for a row past
/// the tile.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn join<const T: usize>(acc: &[__m256; T], p: usize) -> __m512 {
    let low = _mm512_zextps256_ps512(acc[2 * p]);
    match acc.get(2 * p + 1) {
        Some(&high) => _mm512_castpd_ps(_mm512_insertf64x4::<1>(
            _mm512_castps_pd(low),
            _mm256_castps_pd(high),
        )),
        None => low,
    }
}

/// [`join`] undone: rows `2p` and `2p + 1` (when the tile has it) back into `acc`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn split<const T: usize>(both: __m512, acc: &mut [__m256; T], p: usize) {
    acc[2 * p] = _mm512_castps512_ps256(both);
    if let Some(high) = acc.get_mut(2 * p + 1) {
        *high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(both)));
    }
}

/// 64 bytes from `at` (two rows' same register, or two rows' lanes of `d8`/`ysum`), or, for an
/// odd tile's last row, its 32 beside zeros.
///
/// # Safety
/// `at` must point to 64 readable bytes (32 when `!two`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn load_pair(at: *const __m256i, two: bool) -> __m512i {
    // SAFETY: the caller's promise; unaligned loads.
    unsafe {
        if two {
            _mm512_loadu_si512(at as *const __m512i)
        } else {
            _mm512_zextsi256_si512(_mm256_loadu_si256(at))
        }
    }
}

/// The span groups `groups` (whole spans) of weight row `w_row` (format `F`, packed when `P`)
/// against the tile's `T` rows, added into each row's span lanes `acc` (returned; all zeros when
/// `fresh`, the row's first chunk: not read, since reading back lanes just stored to memory
/// stalled the loop a quarter of its time), as `q32.rs`'s span loop adds them. Formats
/// with a minimum add each group's offsets' products into `offsets` (rows 2p and 2p + 1 in the
/// halves of register p, an odd last row in the last: what `q32.rs`'s pass after the
/// group loop adds, group after group, in the same order), here beside the byte products that
/// wait on their loads, where a pass of their own took a fifth of a Q4_1 tile's time.
///
/// # Safety
/// The CPU must support AVX-512 F, VL and VNNI. `qs`, `d8`, `ysum` and `s` are the tile's
/// arranged activations as `q32.rs` takes them, holding `T` rows of every group in
/// `groups`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn spans_in_pairs<const F: u8, const P: bool, const T: usize>(
    w_row: &[u8],
    groups: Range<usize>,
    (qs, d8, ysum, s): (*const __m256i, *const __m256, *const __m256i, *const f32),
    (mut acc, fresh): ([__m256; T], bool),
    mut offsets: ([__m256; 4], __m128),
) -> ([__m256; T], ([__m256; 4], __m128)) {
    let pairs = T.div_ceil(2);
    let mut both = [_mm512_setzero_ps(); 4]; // [pairs]: a tile has at most eight rows
    if !fresh {
        for (p, b) in both.iter_mut().enumerate().take(pairs) {
            *b = join(&acc, p);
        }
    }
    let dp = _mm512_dpbusd_epi32;
    let zero = _mm512_setzero_si512();
    let mut g = groups.start;
    while g < groups.end {
        let (w, dw, mw) = span_at::<F, P>(w_row, g);
        let u = unsigned_weights_vnni::<F, SPAN>(&w);
        if format(F).has_min() {
            let (macc2, macc1) = &mut offsets;
            for (at, mw) in [
                (g, _mm256_castps256_ps128(mw)),
                (g + 1, _mm256_extractf128_ps::<1>(mw)),
            ] {
                let mw2 = _mm256_set_m128(mw, mw);
                // Row t's offsets' scales of group `at`.
                let s_at = |t: usize| s.wrapping_add((at * T + t) * GROUP);
                for (p, macc) in macc2.iter_mut().enumerate().take(T / 2) {
                    // SAFETY: rows 2p and 2p + 1 of the group, side by side (the caller's).
                    let s8 = unsafe { _mm256_loadu_ps(s_at(2 * p)) };
                    *macc = _mm256_add_ps(*macc, _mm256_mul_ps(mw2, s8));
                }
                if T % 2 == 1 {
                    // SAFETY: as above.
                    let s4 = unsafe { _mm_loadu_ps(s_at(T - 1)) };
                    *macc1 = _mm_add_ps(*macc1, _mm_mul_ps(mw, s4));
                }
            }
        }
        // The span's weights and scales in both halves. (Written out: a closure given to
        // `from_fn` is compiled without the target features.)
        let twice = |v: __m256i| _mm512_broadcast_i64x4(v);
        let u2 = [
            twice(u[0]),
            twice(u[1]),
            twice(u[2]),
            twice(u[3]),
            twice(u[4]),
            twice(u[5]),
            twice(u[6]),
            twice(u[7]),
        ];
        let dw2 = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(dw)));
        // Groups g and g + 1's registers, and their rows' scales and lane sums (the span's
        // are group g's).
        // SAFETY: groups g and g + 1 hold `T` rows (the caller's promise).
        let (ya, yb) = unsafe { (qs.add(g * T * GROUP), qs.add((g + 1) * T * GROUP)) };
        let (d8g, ysg) = (d8.wrapping_add(g * T), ysum.wrapping_add(g * T));
        for (p, b) in both.iter_mut().enumerate().take(pairs) {
            let two = 2 * p + 1 < T;
            // Register c of rows 2p and 2p + 1: side by side (`tile_chunk`).
            // SAFETY: within the groups' T rows (above).
            let y = |c: usize| unsafe {
                let at = tile_chunk(T, 2 * p, c % GROUP);
                load_pair(if c < GROUP { ya.add(at) } else { yb.add(at) }, two)
            };
            // `span_sums_vnni`'s two chains of four, for two rows.
            let low = dp(
                dp(dp(dp(zero, u2[0], y(0)), u2[1], y(1)), u2[2], y(2)),
                u2[3],
                y(3),
            );
            let high = dp(
                dp(dp(dp(zero, u2[4], y(4)), u2[5], y(5)), u2[6], y(6)),
                u2[7],
                y(7),
            );
            let mut sums = _mm512_add_epi32(low, high);
            let shift = offset_shift_vnni(F);
            if shift != 0 {
                // SAFETY: formats with an offset have every group's lane sums (the caller's).
                let ys = unsafe { load_pair(ysg.add(2 * p), two) };
                sums = _mm512_sub_epi32(sums, _mm512_sll_epi32(ys, _mm_cvtsi32_si128(shift)));
            }
            // SAFETY: as above.
            let d8p = unsafe { _mm512_castsi512_ps(load_pair(d8g.add(2 * p) as *const _, two)) };
            let dd = _mm512_mul_ps(dw2, d8p);
            *b = _mm512_add_ps(*b, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sums)));
        }
        g += 2;
    }
    for (p, &b) in both.iter().enumerate().take(pairs) {
        split(b, &mut acc, p);
    }
    (acc, offsets)
}
