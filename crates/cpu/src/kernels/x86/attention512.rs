//! Attention's widening and weighted sums with 512-bit registers (AVX-512 F and VL): each lane does
//! what a lane of the 256-bit kernels ([`super::attention`]) does, one exact conversion, or the
//! products added slot after slot in the same order, sixteen lanes to an instruction, so the bits
//! are the same. (A core that multiplies 512 bits as fast as 256, Zen 5 or a Xeon, halves their
//! instructions; the scores keep eight lanes a slot, the definition's order.)

use std::arch::x86_64::*;

use super::attention::weighted_sum_dense_tail;
use crate::kernels::F16Rows;

/// See [`super::widen`].
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn widen_avx512(rows: F16Rows, count: usize, out: &mut [f32]) {
    let len = rows.len;
    let (by16, by8) = (len / 16 * 16, len / 8 * 8);
    for (slot, dst) in out.chunks_exact_mut(len.max(1)).enumerate().take(count) {
        let row = rows.row(slot);
        super::prefetch_ahead(row.as_ptr() as *const u8, 2 * len);
        for c in (0..by16).step_by(16) {
            let (src, to) = (&row[c..c + 16], &mut dst[c..c + 16]);
            // SAFETY: 16 f16 (32 bytes) and 16 f32, in bounds (sliced above); unaligned.
            unsafe {
                let wide = _mm512_cvtph_ps(_mm256_loadu_si256(src.as_ptr() as *const __m256i));
                _mm512_storeu_ps(to.as_mut_ptr(), wide);
            }
        }
        for c in (by16..by8).step_by(8) {
            let (src, to) = (&row[c..c + 8], &mut dst[c..c + 8]);
            // SAFETY: 8 f16 (16 bytes) and 8 f32, in bounds (sliced above); unaligned.
            unsafe {
                let wide = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr() as *const __m128i));
                _mm256_storeu_ps(to.as_mut_ptr(), wide);
            }
        }
        for (d, v) in dst[by8..].iter_mut().zip(&row[by8..]) {
            *d = v.to_f32();
        }
    }
}

/// See [`super::weighted_sum_dense`]: each block of 64 values of the output in four registers
/// across the slots, the rest as the 256-bit kernel takes it.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn weighted_sum_dense_avx512(v: &[f32], stride: usize, p: &[f32], out: &mut [f32]) {
    let len = stride.min(out.len());
    let v = &v[..p.len() * stride];
    let by64 = len / 64 * 64;
    // SAFETY: this function's features are the kernel's.
    unsafe { weighted_sums_dense_avx512(v, stride, [p], [&mut out[..by64]]) };
    // SAFETY: this function's features include the tail's.
    unsafe { weighted_sum_dense_tail(v, stride, p, &mut out[..len], by64) };
}

/// `out[j][e] += p[j][s] * v[s * stride + e]` slot after slot for each of `Q` pairs whose
/// outputs are whole 64s (every `p[j]` as long): [`weighted_sum_dense_avx512`]'s bits for
/// each, with each row of values loaded once for all of them (one pair loaded four registers
/// and a weight for every four multiplies and adds, and waited on the loads).
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 F and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub unsafe fn weighted_sums_dense_avx512<const Q: usize>(
    v: &[f32],
    stride: usize,
    p: [&[f32]; Q],
    mut out: [&mut [f32]; Q],
) {
    let count = p.first().map_or(0, |p| p.len());
    assert!(p.iter().all(|p| p.len() == count), "as many weights a pair");
    let len = out.first().map_or(0, |o| o.len());
    assert!(
        len.is_multiple_of(64) && out.iter().all(|o| o.len() == len) && len <= stride,
        "outputs of one length, whole 64s, within a row"
    );
    let v = &v[..count * stride];
    for start in (0..len).step_by(64) {
        let mut acc = [[_mm512_setzero_ps(); 4]; Q];
        for (acc, o) in acc.iter_mut().zip(out.iter()) {
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: values start..start + 64 of an output of `len`; unaligned.
                *a = unsafe { _mm512_loadu_ps(o.as_ptr().add(start + 16 * r)) };
            }
        }
        let mut row = v.as_ptr().wrapping_add(start);
        for s in 0..count {
            // SAFETY: elements start..start + 64 of row s of `v` (`count` rows of `stride >=
            // len`); unaligned.
            let x = |r: usize| unsafe { _mm512_loadu_ps(row.add(16 * r)) };
            let x = [x(0), x(1), x(2), x(3)];
            for (acc, p) in acc.iter_mut().zip(&p) {
                let pv = _mm512_set1_ps(p[s]);
                for (a, &x) in acc.iter_mut().zip(&x) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(pv, x));
                }
            }
            row = row.wrapping_add(stride);
        }
        for (acc, o) in acc.iter().zip(out.iter_mut()) {
            for (r, &a) in acc.iter().enumerate() {
                // SAFETY: as above; unaligned stores.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(start + 16 * r), a) };
            }
        }
    }
}
