//! [`crate::packed::pack_rows`] with AVX2: a span or group is decoded as the GGUF-order kernels
//! decode it (straight into the registers the packed layout stores) and written back packed,
//! so loading a model costs about a pass over its bytes.

use std::arch::x86_64::*;

use super::q32_group::decode_group;
use super::q32_span::decode_span;
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::layout::{GROUP, SPAN};
use crate::packed;

/// Same bytes as [`packed::pack_rows`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn pack_rows(f: Q32Format, rows: &[u8], row_bytes: usize, out: &mut [u8]) {
    match f {
        Q32Format::Q4_0 => pack::<Q4_0>(rows, row_bytes, out),
        Q32Format::Q4_1 => pack::<Q4_1>(rows, row_bytes, out),
        Q32Format::Q5_0 => pack::<Q5_0>(rows, row_bytes, out),
        Q32Format::Q5_1 => pack::<Q5_1>(rows, row_bytes, out),
        Q32Format::Q8_0 => pack::<Q8_0>(rows, row_bytes, out),
    }
}

/// 32 bytes to `dst[..32]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store32(dst: &mut [u8], v: __m256i) {
    assert!(dst.len() >= 32);
    // SAFETY: 32 writable bytes (checked); unaligned store.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr() as *mut __m256i, v) }
}

/// Bit 4 of each of a register's bytes, as one bit per byte.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn fifth_bits(r: __m256i) -> u32 {
    _mm256_movemask_epi8(_mm256_slli_epi16::<3>(r)) as u32
}

/// Two registers of values under 16 as one of nibbles: `a` low, `b` high.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibbles(a: __m256i, b: __m256i) -> __m256i {
    let low = _mm256_set1_epi8(0x0f);
    let high = _mm256_slli_epi16::<4>(_mm256_and_si256(b, low));
    _mm256_or_si256(_mm256_and_si256(a, low), high)
}

/// A span of eight GGUF blocks (`s`) packed into `d`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_span<const F: u8>(s: &[u8], d: &mut [u8]) {
    let f = format(F);
    let bb = block_bytes(F);
    for o in 0..SPAN {
        d[2 * o..2 * o + 2].copy_from_slice(&s[o * bb..o * bb + 2]);
        if f.has_min() {
            d[16 + 2 * o..18 + 2 * o].copy_from_slice(&s[o * bb + 2..o * bb + 4]);
        }
    }
    let (qh, values) = packed::span_offsets(f);
    let r = decode_span::<F>(s);
    if F == Q8_0 {
        for (q, r) in r.into_iter().enumerate() {
            store32(&mut d[values + 32 * q..], r);
        }
        return;
    }
    for s in 0..4 {
        store32(&mut d[values + 32 * s..], nibbles(r[s], r[s + 4]));
    }
    if qh != values {
        let mut fifth = [0u32; SPAN];
        for (bits, r) in fifth.iter_mut().zip(r) {
            *bits = fifth_bits(r);
        }
        for (j, byte) in d[qh..qh + 32].iter_mut().enumerate() {
            *byte = (0..SPAN).fold(0, |a, q| a | (((fifth[q] >> j) & 1) << q) as u8);
        }
    }
}

/// A group of four GGUF blocks (`s`) packed into `d`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_group<const F: u8>(s: &[u8], d: &mut [u8]) {
    let f = format(F);
    let bb = block_bytes(F);
    let (qh, values) = packed::offsets(f);
    for k in 0..GROUP {
        d[2 * k..2 * k + 2].copy_from_slice(&s[k * bb..k * bb + 2]);
        if f.has_min() {
            d[8 + 2 * k..10 + 2 * k].copy_from_slice(&s[k * bb + 2..k * bb + 4]);
        }
    }
    let r = decode_group::<F>(s);
    if F == Q8_0 {
        for (q, r) in r.into_iter().enumerate() {
            store32(&mut d[values + 32 * q..], r);
        }
        return;
    }
    store32(&mut d[values..], nibbles(r[0], r[1]));
    store32(&mut d[values + 32..], nibbles(r[2], r[3]));
    if qh != values {
        let fifth = [
            fifth_bits(r[0]),
            fifth_bits(r[1]),
            fifth_bits(r[2]),
            fifth_bits(r[3]),
        ];
        for j in 0..16 {
            d[qh + j] = (0..GROUP)
                .map(|q| {
                    let (lo, hi) = ((fifth[q] >> j) & 1, (fifth[q] >> (16 + j)) & 1);
                    ((lo << (2 * q)) | (hi << (2 * q + 1))) as u8
                })
                .fold(0, |a, b| a | b);
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn pack<const F: u8>(rows: &[u8], row_bytes: usize, out: &mut [u8]) {
    let f = format(F);
    let sb = SPAN * block_bytes(F);
    let (spans, group_bytes) = packed::spans_and_group(f, row_bytes);
    for (src, dst) in rows
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for (s, d) in src[..spans]
            .chunks_exact(sb)
            .zip(dst[..spans].chunks_exact_mut(sb))
        {
            pack_span::<F>(s, d);
        }
        let whole = spans + group_bytes;
        if group_bytes > 0 {
            pack_group::<F>(&src[spans..whole], &mut dst[spans..whole]);
        }
        packed::tail(f, &src[whole..], &mut dst[whole..], packed::pack_pair);
    }
}
