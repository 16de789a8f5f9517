//! A group of four 32-element blocks for the q32 tile kernel (`q32.rs`), in the
//! half-block layout the groups after a row's spans keep: its four weight registers (register
//! `q`, lane `l`: one quad of half-block sum `l`, block `l % 4`, half `l / 4`) from the file's
//! order, packed, or a packed pair; and the activations' arrangement into spans and groups.

use std::arch::x86_64::*;

use super::prefetch_ahead;
use super::{load16, load32};
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::layout::{GROUP, SPAN};
use crate::packed;
/// The 32 nibbles of `qs[..16]` as bytes in element order: low nibbles (elements 0..16),
/// then high nibbles (16..32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nibbles(qs: &[u8]) -> __m256i {
    let low = load16(qs);
    let both = _mm256_set_m128i(_mm_srli_epi16(low, 4), low);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0f))
}

/// Byte `j` is 0xff where bit `j` of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes_from_bits(bits: u32) -> __m256i {
    // Byte j takes byte j / 8 of `bits`; OR-ing every bit but bit j % 8 leaves 0xff iff set.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0,
        ),
    );
    let others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1))
}

/// A 5-bit block's 32 unsigned values (nibble and fifth bit, without Q5_0's offset of 16) in
/// element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn five_bits<const F: u8>(b: &[u8]) -> __m256i {
    let (qh, qs) = if F == Q5_0 { (2, 6) } else { (4, 8) };
    let bits = u32::from_le_bytes([b[qh], b[qh + 1], b[qh + 2], b[qh + 3]]);
    let high = _mm256_and_si256(bytes_from_bits(bits), _mm256_set1_epi8(0x10));
    _mm256_or_si256(nibbles(&b[qs..]), high)
}

/// Four blocks in element order to the interleaved layout: register `q` takes quad `q` of each
/// half-block sum `4h + k` (block `k`, half `h` = 128-bit lane), a 4 x 4 transpose of 32-bit
/// words in each lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn interleave(b: [__m256i; GROUP]) -> [__m256i; GROUP] {
    let t0 = _mm256_unpacklo_epi32(b[0], b[1]);
    let t1 = _mm256_unpackhi_epi32(b[0], b[1]);
    let t2 = _mm256_unpacklo_epi32(b[2], b[3]);
    let t3 = _mm256_unpackhi_epi32(b[2], b[3]);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
}

/// Rearranges a row's activation blocks (whole groups, the first `spans` pairs of them spans)
/// from element order to [`crate::layout::Q8Layout::Interleaved`].
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn interleave_blocks(blocks: &mut [[i8; 32]], spans: usize) {
    let (spans, groups) = blocks.split_at_mut(SPAN * spans);
    for span in spans.chunks_exact_mut(SPAN) {
        let p = span.as_mut_ptr() as *mut __m256i;
        // SAFETY: a span is eight blocks of 32 bytes: unaligned loads and stores.
        unsafe {
            let b = |o: usize| _mm256_loadu_si256(p.add(o));
            let r = transpose8([b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)]);
            for (q, v) in r.into_iter().enumerate() {
                _mm256_storeu_si256(p.add(q), v);
            }
        }
    }
    for group in groups.chunks_exact_mut(GROUP) {
        let p = group.as_mut_ptr() as *mut __m256i;
        // SAFETY: a group is four blocks of 32 bytes: unaligned loads and stores.
        unsafe {
            let b = interleave([
                _mm256_loadu_si256(p),
                _mm256_loadu_si256(p.add(1)),
                _mm256_loadu_si256(p.add(2)),
                _mm256_loadu_si256(p.add(3)),
            ]);
            for (k, v) in b.into_iter().enumerate() {
                _mm256_storeu_si256(p.add(k), v);
            }
        }
    }
}

/// A group's weights (`group`: its four blocks' bytes) in the interleaved layout: unsigned for
/// the 4- and 5-bit formats, signed for Q8_0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn decode_group<const F: u8>(group: &[u8]) -> [__m256i; GROUP] {
    let bb = block_bytes(F);
    let b = &group[..GROUP * bb];
    match F {
        Q4_0 | Q4_1 => {
            // (Transposing the nibbles' words across the blocks before splitting them, with
            // 64- and 128-bit permutes, measured slower than this.)
            let qs = if F == Q4_0 { 2 } else { 4 };
            interleave([
                nibbles(&b[qs..]),
                nibbles(&b[bb + qs..]),
                nibbles(&b[2 * bb + qs..]),
                nibbles(&b[3 * bb + qs..]),
            ])
        }
        Q5_0 | Q5_1 => interleave([
            five_bits::<F>(&b[..bb]),
            five_bits::<F>(&b[bb..2 * bb]),
            five_bits::<F>(&b[2 * bb..3 * bb]),
            five_bits::<F>(&b[3 * bb..]),
        ]),
        _ => interleave([
            load32(&b[2..]),
            load32(&b[bb + 2..]),
            load32(&b[2 * bb + 2..]),
            load32(&b[3 * bb + 2..]),
        ]),
    }
}

/// The f16 scale `d` (at byte 0) and offset `m` (byte 2, garbage for formats without one) of
/// the four blocks of `group`, as four f32 each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scales4<const F: u8>(group: &[u8]) -> (__m128, __m128) {
    let bb = block_bytes(F);
    let group = &group[..GROUP * bb];
    // The first four bytes of each block: d in the low half, m in the high half.
    let head = |k: usize| {
        let h = &group[k * bb..k * bb + 4];
        i32::from_le_bytes([h[0], h[1], h[2], h[3]])
    };
    let heads = _mm_set_epi32(head(3), head(2), head(1), head(0));
    // Bytes 0..8: the four d; bytes 8..16: the four m.
    let split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    let halves = _mm_shuffle_epi8(heads, split);
    (
        _mm_cvtph_ps(halves),
        _mm_cvtph_ps(_mm_unpackhi_epi64(halves, halves)),
    )
}

/// A packed group ([`crate::packed`]): its weights in the interleaved layout as
/// [`decode_group`] gives them, and its blocks' scales and offsets (zero without) as
/// [`scales4`] gives them: a load or two and a shift and two masks per pair of registers, no
/// transposes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_packed<const F: u8>(group: &[u8]) -> ([__m256i; GROUP], __m128, __m128) {
    let g = &group[..GROUP * block_bytes(F)];
    let (qh, values) = packed::offsets(format(F));
    let scales = load16(g); // d (and m), then whatever follows
    let dw = _mm_cvtph_ps(scales);
    let mw = if format(F).has_min() {
        _mm_cvtph_ps(_mm_unpackhi_epi64(scales, scales))
    } else {
        _mm_setzero_ps()
    };
    if F == Q8_0 {
        let r = |q: usize| load32(&g[values + 32 * q..]);
        return ([r(0), r(1), r(2), r(3)], dw, mw);
    }
    let mask = _mm256_set1_epi8(0x0f);
    let (p0, p1) = (load32(&g[values..]), load32(&g[values + 32..]));
    let mut r = [
        _mm256_and_si256(p0, mask),
        _mm256_and_si256(_mm256_srli_epi16::<4>(p0), mask),
        _mm256_and_si256(p1, mask),
        _mm256_and_si256(_mm256_srli_epi16::<4>(p1), mask),
    ];
    if qh != values {
        // Register q's fifth bits: bit 2q of each byte (low lane), 2q + 1 (high lane).
        let bits = _mm256_broadcastsi128_si256(load16(&g[qh..]));
        add_fifth_bits(&mut r, bits);
    }
    (r, dw, mw)
}

/// Sets bit 4 of register `q`'s bytes where `bits` has bit `2q` (low 128-bit lane) or `2q + 1`
/// (high lane) set: the packed fifth bits of the 5-bit formats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn add_fifth_bits(r: &mut [__m256i; GROUP], bits: __m256i) {
    let sixteen = _mm256_set1_epi8(0x10);
    for (q, r) in r.iter_mut().enumerate() {
        let select = _mm256_set_m128i(
            _mm_set1_epi8((1u8 << (2 * q + 1)) as i8),
            _mm_set1_epi8((1u8 << (2 * q)) as i8),
        );
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(bits, select), select);
        *r = _mm256_or_si256(*r, _mm256_and_si256(set, sixteen));
    }
}

/// A packed pair ([`crate::packed`]), as [`decode_packed`] gives a group whose blocks 2 and 3
/// are empty (zero values and scales).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_pair<const F: u8>(pair: &[u8]) -> ([__m256i; GROUP], __m128, __m128) {
    let g = &pair[..2 * block_bytes(F)];
    let (qh, values) = packed::pair_offsets(format(F));
    let scales = |at: usize| {
        let d = u32::from_le_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
        _mm_cvtph_ps(_mm_cvtsi32_si128(d as i32))
    };
    let dw = scales(0);
    let mw = if format(F).has_min() {
        scales(4)
    } else {
        _mm_setzero_ps()
    };
    if F == Q8_0 {
        // Register q's 16 bytes to its bytes 0..8 and 16..24.
        let r = |q: usize| {
            let x = _mm256_zextsi128_si256(load16(&g[values + 16 * q..]));
            _mm256_permute4x64_epi64::<0b11_01_10_00>(x)
        };
        return ([r(0), r(1), r(2), r(3)], dw, mw);
    }
    let mask = _mm256_set1_epi8(0x0f);
    let p = load32(&g[values..]);
    let (low, high) = (
        _mm256_and_si256(p, mask),
        _mm256_and_si256(_mm256_srli_epi16::<4>(p), mask),
    );
    let zero = _mm256_setzero_si256();
    let mut r = [
        _mm256_unpacklo_epi64(low, zero),
        _mm256_srli_si256::<8>(low),
        _mm256_unpacklo_epi64(high, zero),
        _mm256_srli_si256::<8>(high),
    ];
    if qh != values {
        let h = u64::from_le_bytes(std::array::from_fn(|j| g[qh + j]));
        // Bytes 0..8 of each lane: the fifth bits; 8..16 hold no values.
        let bits = _mm256_unpacklo_epi64(_mm256_set1_epi64x(h as i64), zero);
        add_fifth_bits(&mut r, bits);
    }
    (r, dw, mw)
}

/// Group `g` of a row (`present`: the blocks of its last group when fewer than four, `padded`
/// their zeroed scratch): its weights in the interleaved layout, scales and offsets, as
/// [`decode_packed`] or [`decode_group`] and [`scales4`] give them.
///
/// No target features of its own, so that it can be `inline(always)` (a function with them
/// cannot), taking its callers' once inlined: as an `#[inline]` target-feature function it
/// stayed a call per group and row, 13-15% of a one-row Q5_0 product of 576 or 896 columns.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (called only from kernels that require them).
#[inline(always)]
pub(super) unsafe fn decode_at<const F: u8, const P: bool, const T: usize>(
    w_row: &[u8],
    g: usize,
    present: usize,
    padded: &mut [u8; GROUP * 34],
) -> ([__m256i; GROUP], __m128, __m128) {
    // SAFETY: the caller's CPU has AVX2, FMA and F16C (this function's contract), all the
    // decoders below require.
    unsafe {
        let bb = block_bytes(F);
        let first = g * GROUP * bb;
        prefetch_ahead(w_row.as_ptr().wrapping_add(first), GROUP * bb);
        // (A packed row's last blocks are a packed pair or in the file's order.)
        match w_row.get(first..first + GROUP * bb) {
            Some(whole) if P => decode_packed::<F>(whole),
            Some(whole) => {
                let (dw, mw) = scales4::<F>(whole);
                (decode_group::<F>(whole), dw, mw)
            }
            None if P && present == 2 => decode_pair::<F>(&w_row[first..]),
            None => {
                // Block by block: copies of a size known at compile time, no call.
                for k in 0..present {
                    let at = first + k * bb;
                    padded[k * bb..(k + 1) * bb].copy_from_slice(&w_row[at..at + bb]);
                }
                let (dw, mw) = scales4::<F>(&padded[..]);
                (decode_group::<F>(&padded[..]), dw, mw)
            }
        }
    }
}

/// Eight blocks in element order (`b[o]`: block `o`'s 32 bytes) to a span's registers: an
/// 8 x 8 transpose of 32-bit words.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn transpose8(b: [__m256i; SPAN]) -> [__m256i; SPAN] {
    // Within each 128-bit lane: words of blocks (0..4) and (4..8) gathered, then the lanes
    // swapped across: register q takes word q of every block.
    let t = [
        _mm256_unpacklo_epi32(b[0], b[1]),
        _mm256_unpackhi_epi32(b[0], b[1]),
        _mm256_unpacklo_epi32(b[2], b[3]),
        _mm256_unpackhi_epi32(b[2], b[3]),
        _mm256_unpacklo_epi32(b[4], b[5]),
        _mm256_unpackhi_epi32(b[4], b[5]),
        _mm256_unpacklo_epi32(b[6], b[7]),
        _mm256_unpackhi_epi32(b[6], b[7]),
    ];
    let u = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    // u[k] (k < 4): word k of blocks 0..4 in the low lane, word k + 4 in the high; u[k + 4]
    // the same of blocks 4..8.
    [
        _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
        _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
    ]
}
