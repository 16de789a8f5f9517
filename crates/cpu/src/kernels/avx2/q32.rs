//! 32-element block formats against 8-bit activation blocks of 32, four blocks at a time, in the
//! interleaved layout ([`Q8Layout::Interleaved`]): the four registers of a group hold, at lane
//! `l`, one quad each of half-block sum `l`, so the byte products of all four add up as 16-bit
//! pairs and one `madd` leaves the half-block sums of [`scalar::q32_tile`] in its order. Each
//! group then costs an activation row four byte products, three adds, one `madd`, one
//! conversion, one multiply and one add; the weights' transpose into that layout is paid once
//! per tile.

use std::arch::x86_64::*;

use super::{lanes, load32, load32_i8};
use crate::activations::{Q8Layout, Q8Slice};
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::{self, finish_q32, hsum4, hsum8, GROUP};
use crate::kernels::{each_row, Out};

/// See [`crate::kernels::Kernels::q32_rows`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q32_rows(f: Q32Format, w: &[u8], row_bytes: usize, x: Q8Slice, out: Out) {
    let n = out.tile;
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::q32_tile(f, w, x, o));
    match f {
        Q32Format::Q4_0 => by_tile!(n, rows::<Q4_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q4_1 => by_tile!(n, rows::<Q4_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_0 => by_tile!(n, rows::<Q5_0>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q5_1 => by_tile!(n, rows::<Q5_1>(w, row_bytes, x, out), fallback(out)),
        Q32Format::Q8_0 => by_tile!(n, rows::<Q8_0>(w, row_bytes, x, out), fallback(out)),
    }
}

/// The 32 nibbles of `qs[..16]` as bytes in element order: low nibbles (elements 0..16),
/// then high nibbles (16..32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibbles(qs: &[u8]) -> __m256i {
    assert!(qs.len() >= 16);
    // SAFETY: 16 readable bytes (checked).
    let low = unsafe { _mm_loadu_si128(qs.as_ptr() as *const __m128i) };
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

/// The values of one block as in [`scalar::decode_q32`]: 32 bytes in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn decode<const F: u8>(b: &[u8]) -> __m256i {
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    match F {
        Q4_0 => _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8)),
        Q4_1 => nibbles(&b[4..20]),
        Q5_0 => {
            // (nibble | fifth << 4) - 16: OR 0xf0 (= -16 + nibble) where the fifth bit is clear.
            let high = _mm256_andnot_si256(bytes_from_bits(u32_at(2)), _mm256_set1_epi8(-16));
            _mm256_or_si256(nibbles(&b[6..22]), high)
        }
        Q5_1 => {
            let high = _mm256_and_si256(bytes_from_bits(u32_at(4)), _mm256_set1_epi8(0x10));
            _mm256_or_si256(nibbles(&b[8..24]), high)
        }
        _ => load32(&b[2..34]),
    }
}

/// The f16 scale `d` (at byte 0) and offset `m` (byte 2, garbage for formats without one) of
/// the four blocks of `group`, as four f32 each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales4<const F: u8>(group: &[u8]) -> (__m128, __m128) {
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

/// Rearranges whole groups of activation blocks from element order to [`Q8Layout::Interleaved`].
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn interleave_blocks(blocks: &mut [[i8; 32]]) {
    for group in blocks.chunks_exact_mut(GROUP) {
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

/// Four f32 from `v[..4]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load4(v: &[f32; GROUP]) -> __m128 {
    // SAFETY: four readable f32.
    unsafe { _mm_loadu_ps(v.as_ptr()) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn rows<const F: u8, const T: usize>(w_rows: &[u8], row_bytes: usize, x: Q8Slice, mut out: Out) {
    let format = format(F);
    let signed = !format.has_min();
    let bb = block_bytes(F);
    debug_assert_eq!(x.layout, Q8Layout::Interleaved);
    let stride = x.len() / T; // activation blocks per row, padded to whole groups
                              // A row's last group when it has fewer than four blocks: the blocks it has, then zeros
                              // (scale 0 against padded activations of 0: exactly the scalar kernel's empty blocks).
    let mut padded = [0u8; GROUP * 34];
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let mut acc = [_mm256_setzero_ps(); T];
        let mut macc = [_mm_setzero_ps(); T];
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
            // Decoded and interleaved once for the tile; for signed formats `w` gives the
            // activations its sign and `abs_w` the magnitudes.
            let block = |k: usize| &group[k * bb..(k + 1) * bb];
            // (Arrays written out: a closure passed to `from_fn` or `map` is compiled without
            // the target features, so nothing SIMD inlines into it.)
            let w = interleave([
                decode::<F>(block(0)),
                decode::<F>(block(1)),
                decode::<F>(block(2)),
                decode::<F>(block(3)),
            ]);
            let abs_w = if signed {
                [
                    _mm256_sign_epi8(w[0], w[0]),
                    _mm256_sign_epi8(w[1], w[1]),
                    _mm256_sign_epi8(w[2], w[2]),
                    _mm256_sign_epi8(w[3], w[3]),
                ]
            } else {
                w
            };
            let (dw, mw) = scales4::<F>(group);
            for t in 0..T {
                let row = t * stride + g * GROUP;
                let (Ok(ys), Ok(dx), Ok(sx)) = (
                    <&[[i8; 32]; GROUP]>::try_from(&x.qs[row..row + GROUP]),
                    <&[f32; GROUP]>::try_from(&x.d[row..row + GROUP]),
                    <&[f32; GROUP]>::try_from(&x.s[row..row + GROUP]),
                ) else {
                    continue; // unreachable: the ranges have GROUP elements
                };
                let products = |c: usize| {
                    let y = load32_i8(&ys[c]);
                    let y = if signed { _mm256_sign_epi8(y, w[c]) } else { y };
                    _mm256_maddubs_epi16(abs_w[c], y)
                };
                let (p0, p1, p2, p3) = (products(0), products(1), products(2), products(3));
                let ones = _mm256_set1_epi16(1);
                let halves = if F == Q8_0 {
                    // |w| up to 128: a pair sum takes most of i16, so each widens alone.
                    let wide = |p| _mm256_madd_epi16(p, ones);
                    _mm256_add_epi32(
                        _mm256_add_epi32(wide(p0), wide(p1)),
                        _mm256_add_epi32(wide(p2), wide(p3)),
                    )
                } else {
                    // |w| <= 31: four pair sums stay under 4 * 2 * 31 * 127 = 31,496 < 2^15.
                    let p = _mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3));
                    _mm256_madd_epi16(p, ones)
                };
                let d4 = _mm_mul_ps(dw, load4(dx));
                let d8 = _mm256_set_m128(d4, d4);
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d8, _mm256_cvtepi32_ps(halves)));
                if format.has_min() {
                    macc[t] = _mm_add_ps(macc[t], _mm_mul_ps(mw, load4(sx)));
                }
            }
        }
        let o = out.row(r);
        for t in 0..T {
            let mut m = [0f32; 4];
            // SAFETY: `m` holds four f32.
            unsafe { _mm_storeu_ps(m.as_mut_ptr(), macc[t]) };
            o[t] = finish_q32(format, hsum8(&lanes(acc[t])), hsum4(&m));
        }
    }
}
