//! A span of eight 32-element blocks for the q32 tile kernel (`q32.rs`): its eight
//! weight registers in the activations' span layout (register `q`, lane `o`: elements
//! `4q..4q + 4` of block `o`), from the file's order or packed ([`crate::packed`]), so that
//! eight byte products per row leave one exact sum per block in each lane; and the step that
//! turns the half-block sums of the groups after a row's spans into the same lanes.

use std::arch::x86_64::*;

use super::q32_group::{five_bits, nibbles, transpose8};
use super::{load16, load32, prefetch_ahead};
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::layout::{GROUP, SPAN};
use crate::packed;

/// A span's weights in the file's order (`span`: its eight blocks' bytes) as registers:
/// unsigned for the 4- and 5-bit formats, signed for Q8_0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn decode_span<const F: u8>(span: &[u8]) -> [__m256i; SPAN] {
    let bb = block_bytes(F);
    let b = &span[..SPAN * bb];
    let block = |o: usize| &b[o * bb..(o + 1) * bb];
    // (Called here, not through `array::from_fn`, whose closure is compiled without the target
    // features: one call a block.)
    let values = |o: usize| match F {
        Q4_0 => nibbles(&block(o)[2..]),
        Q4_1 => nibbles(&block(o)[4..]),
        Q5_0 | Q5_1 => five_bits::<F>(block(o)),
        _ => load32(&block(o)[2..]),
    };
    transpose8([
        values(0),
        values(1),
        values(2),
        values(3),
        values(4),
        values(5),
        values(6),
        values(7),
    ])
}

/// The f16 scale `d` (at byte 0) and offset `m` (byte 2, garbage for formats without one) of
/// the eight blocks of `span` in the file's order, as eight f32 each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scales8<const F: u8>(span: &[u8]) -> (__m256, __m256) {
    let bb = block_bytes(F);
    let span = &span[..SPAN * bb];
    let head = |o: usize| {
        let h = &span[o * bb..o * bb + 4];
        i32::from_le_bytes([h[0], h[1], h[2], h[3]])
    };
    let heads = _mm256_setr_epi32(
        head(0),
        head(1),
        head(2),
        head(3),
        head(4),
        head(5),
        head(6),
        head(7),
    );
    // Each word: d in its low half, m in its high half.
    let d = low_halves(_mm256_and_si256(heads, _mm256_set1_epi32(0xffff)));
    let m = low_halves(_mm256_srli_epi32::<16>(heads));
    (_mm256_cvtph_ps(d), _mm256_cvtph_ps(m))
}

/// The low 16 bits of each of eight 32-bit words (each under 2^16), as eight 16-bit words.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn low_halves(v: __m256i) -> __m128i {
    // `packus` takes each lane's four words to 16 bits (no saturation below 2^16).
    let packed = _mm256_packus_epi32(v, v);
    _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_10_00>(packed))
}

/// The span of weight row `w_row` that starts at group `g` (packed when `P`), its weights 4 KB
/// on asked for: its registers, and its blocks' scales and offsets as [`scales8`] gives them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn span_at<const F: u8, const P: bool>(
    w_row: &[u8],
    g: usize,
) -> ([__m256i; SPAN], __m256, __m256) {
    let bb = block_bytes(F);
    let first = g * GROUP * bb;
    prefetch_ahead(w_row.as_ptr().wrapping_add(first), SPAN * bb);
    let span = &w_row[first..first + SPAN * bb];
    if P {
        decode_packed_span::<F>(span)
    } else {
        let (dw, mw) = scales8::<F>(span);
        (decode_span::<F>(span), dw, mw)
    }
}

/// A packed span ([`crate::packed`]): its registers as [`decode_span`] gives them, and its
/// blocks' scales and offsets (zero without) as [`scales8`] gives them: a load, a shift and a
/// mask per pair of registers, no transposes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn decode_packed_span<const F: u8>(span: &[u8]) -> ([__m256i; SPAN], __m256, __m256) {
    let g = &span[..SPAN * block_bytes(F)];
    let (qh, values) = packed::span_offsets(format(F));
    let dw = _mm256_cvtph_ps(load16(g));
    let mw = if format(F).has_min() {
        _mm256_cvtph_ps(load16(&g[16..]))
    } else {
        _mm256_setzero_ps()
    };
    // (Registers written out, not through `array::from_fn`: see `decode_span`.)
    let r = |q: usize| load32(&g[values + 32 * q..]);
    if F == Q8_0 {
        return ([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)], dw, mw);
    }
    let mask = _mm256_set1_epi8(0x0f);
    let p = [r(0), r(1), r(2), r(3)];
    let low = |s: usize| _mm256_and_si256(p[s], mask);
    let high = |s: usize| _mm256_and_si256(_mm256_srli_epi16::<4>(p[s]), mask);
    let mut r = [
        low(0),
        low(1),
        low(2),
        low(3),
        high(0),
        high(1),
        high(2),
        high(3),
    ];
    if qh != values {
        // Register q's fifth bits: bit q of each byte.
        let bits = load32(&g[qh..]);
        let sixteen = _mm256_set1_epi8(0x10);
        for (q, r) in r.iter_mut().enumerate() {
            let select = _mm256_set1_epi8((1u8 << q) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(bits, select), select);
            *r = _mm256_or_si256(*r, _mm256_and_si256(set, sixteen));
        }
    }
    (r, dw, mw)
}

/// One row's step over the groups after its spans: the half-block sums of group `a` and of
/// the group after it `b` (lanes `[first halves | second halves]`, zero where there is none)
/// added to whole blocks `[a's four | b's four]`, scaled by the weights' scales `dw8` (the
/// same order) times the activations' (`da`, `db`: each group's four, twice; zero for no
/// group), and added to `acc`: the span lanes of the scalar definition.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn group_pair_step(
    acc: __m256,
    dw8: __m256,
    a: __m256i,
    b: __m256i,
    da: __m256,
    db: __m256,
) -> __m256 {
    let sums = _mm256_add_epi32(
        _mm256_blend_epi32::<0xf0>(a, b),
        _mm256_permute2x128_si256::<0x21>(a, b),
    );
    let dd = _mm256_mul_ps(dw8, _mm256_blend_ps::<0xf0>(da, db));
    _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sums)))
}
