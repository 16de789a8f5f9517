//! [`crate::packed::pack_rows`] with AVX2: a group is decoded as the GGUF-order kernels decode
//! it (straight into the registers the packed layout stores) and written back packed, so
//! loading a model costs about a pass over its bytes.

use std::arch::x86_64::*;

use super::q32::decode_group;
use crate::formats::Q32Format;
use crate::kernels::q32_ids::{block_bytes, format, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::GROUP;
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

#[target_feature(enable = "avx2,fma,f16c")]
fn pack<const F: u8>(rows: &[u8], row_bytes: usize, out: &mut [u8]) {
    let f = format(F);
    let bb = block_bytes(F);
    let gb = GROUP * bb;
    let whole = row_bytes / gb * gb;
    let (qh, values) = packed::offsets(f);
    for (src, dst) in rows
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for (s, d) in src[..whole]
            .chunks_exact(gb)
            .zip(dst[..whole].chunks_exact_mut(gb))
        {
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
                continue;
            }
            let low = _mm256_set1_epi8(0x0f);
            let nibbles = |a: __m256i, b: __m256i| {
                let high = _mm256_slli_epi16::<4>(_mm256_and_si256(b, low));
                _mm256_or_si256(_mm256_and_si256(a, low), high)
            };
            store32(&mut d[values..], nibbles(r[0], r[1]));
            store32(&mut d[values + 32..], nibbles(r[2], r[3]));
            if qh != values {
                // Bit 4 of each byte, as one bit per byte of each register.
                let bits = |r: __m256i| _mm256_movemask_epi8(_mm256_slli_epi16::<3>(r)) as u32;
                let fifth = [bits(r[0]), bits(r[1]), bits(r[2]), bits(r[3])];
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
        packed::tail(f, &src[whole..], &mut dst[whole..], packed::pack_pair);
    }
}
