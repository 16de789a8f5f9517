//! 32-element block formats against 8-bit activation blocks of 32.

use std::arch::x86_64::*;

use super::{by_tile, dot_signed, dot_unsigned, f16_at, lanes, load32, load32_i8};
use crate::activations::BlockQ8;
use crate::formats::Q32Format;
use crate::kernels::scalar::{self, finish_q32, hsum8};

// Formats as const generic parameters, so each kernel is compiled for one layout.
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q5_1: u8 = 3;
const Q8_0: u8 = 4;

/// See [`crate::kernels::Kernels::q32_tile`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q32_tile(f: Q32Format, w_row: &[u8], x: &[BlockQ8], out: &mut [f32]) {
    let n = out.len();
    let fallback = scalar::q32_tile;
    match f {
        Q32Format::Q4_0 => by_tile!(n, tile::<Q4_0>(w_row, x, out), fallback(f, w_row, x, out)),
        Q32Format::Q4_1 => by_tile!(n, tile::<Q4_1>(w_row, x, out), fallback(f, w_row, x, out)),
        Q32Format::Q5_0 => by_tile!(n, tile::<Q5_0>(w_row, x, out), fallback(f, w_row, x, out)),
        Q32Format::Q5_1 => by_tile!(n, tile::<Q5_1>(w_row, x, out), fallback(f, w_row, x, out)),
        Q32Format::Q8_0 => by_tile!(n, tile::<Q8_0>(w_row, x, out), fallback(f, w_row, x, out)),
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

/// `(d, m, q)` of one block as in [`scalar::decode_q32`], `q` as 32 bytes in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn decode<const F: u8>(b: &[u8]) -> (f32, f32, __m256i) {
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    match F {
        Q4_0 => (
            f16_at(b, 0),
            0.0,
            _mm256_sub_epi8(nibbles(&b[2..18]), _mm256_set1_epi8(8)),
        ),
        Q4_1 => (f16_at(b, 0), f16_at(b, 2), nibbles(&b[4..20])),
        Q5_0 => {
            // (nibble | fifth << 4) - 16: OR 0xf0 (= -16 + nibble) where the fifth bit is clear.
            let high = _mm256_andnot_si256(bytes_from_bits(u32_at(2)), _mm256_set1_epi8(-16));
            (f16_at(b, 0), 0.0, _mm256_or_si256(nibbles(&b[6..22]), high))
        }
        Q5_1 => {
            let high = _mm256_and_si256(bytes_from_bits(u32_at(4)), _mm256_set1_epi8(0x10));
            (
                f16_at(b, 0),
                f16_at(b, 2),
                _mm256_or_si256(nibbles(&b[8..24]), high),
            )
        }
        _ => (f16_at(b, 0), 0.0, load32(&b[2..34])),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const F: u8, const T: usize>(w_row: &[u8], x: &[BlockQ8], out: &mut [f32]) {
    let (format, signed) = match F {
        Q4_0 => (Q32Format::Q4_0, true),
        Q4_1 => (Q32Format::Q4_1, false),
        Q5_0 => (Q32Format::Q5_0, true),
        Q5_1 => (Q32Format::Q5_1, false),
        _ => (Q32Format::Q8_0, true),
    };
    let nb = x.len() / T;
    let mut acc = [_mm256_setzero_ps(); T];
    let mut msum = [0f32; T];
    for (b, block) in w_row.chunks_exact(format.block_bytes()).enumerate() {
        let (d, m, q) = decode::<F>(block);
        for t in 0..T {
            let xb = &x[t * nb + b];
            let y = load32_i8(&xb.qs);
            let sums = if signed {
                dot_signed(q, y)
            } else {
                dot_unsigned(q, y)
            };
            let scaled = _mm256_mul_ps(_mm256_set1_ps(d * xb.d), _mm256_cvtepi32_ps(sums));
            acc[t] = _mm256_add_ps(acc[t], scaled);
            if format.has_min() {
                msum[t] += m * xb.s;
            }
        }
    }
    for t in 0..T {
        out[t] = finish_q32(format, hsum8(&lanes(acc[t])), msum[t]);
    }
}
