//! Activations quantized to 8 bits in blocks of 32 (see [`crate::q8`]).

use std::arch::x86_64::*;

use crate::q8::{push_quantized, q8_blocks_per_row, Q8Rows};

/// [`crate::q8::quantize_q8`] in AVX2 by hand, the same IEEE operations (the
/// compiler's own vectorization of it took 2.5 times as long): a block's largest magnitude in
/// eight lanes (a maximum, exact in any order), then `v * id + MAGIC` for all 32 values and
/// their sum. A block holding NaN or an infinity takes the portable function.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8(x: &[f32], out: &mut Q8Rows) {
    debug_assert!(x.len().is_multiple_of(32));
    let blocks = q8_blocks_per_row(x.len());
    out.qs.reserve(blocks);
    out.d.reserve(blocks);
    out.s.reserve(blocks);
    let magnitude = _mm256_set1_epi32(i32::MAX);
    let magic = _mm256_set1_ps(12_582_912.0);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for block in x.chunks_exact(32) {
        // SAFETY: 32 readable f32; unaligned loads.
        let v = unsafe {
            let p = block.as_ptr();
            [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ]
        };
        let abs = [
            _mm256_and_si256(_mm256_castps_si256(v[0]), magnitude),
            _mm256_and_si256(_mm256_castps_si256(v[1]), magnitude),
            _mm256_and_si256(_mm256_castps_si256(v[2]), magnitude),
            _mm256_and_si256(_mm256_castps_si256(v[3]), magnitude),
        ];
        // Finite magnitudes order as their bits: NaN and infinities are those from 0x7f800000.
        let top = _mm256_max_epi32(
            _mm256_max_epi32(abs[0], abs[1]),
            _mm256_max_epi32(abs[2], abs[3]),
        );
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds eight i32.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, top) };
        let top = lanes.into_iter().max().unwrap_or(0);
        if top >= 0x7f80_0000 {
            push_quantized(block, out);
            continue;
        }
        let amax = f32::from_bits(top as u32);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax > 0.0 { 127.0 / amax } else { 0.0 });
        let q = |v: __m256| {
            let rounded = _mm256_add_ps(_mm256_mul_ps(v, id), magic);
            _mm256_sub_epi32(_mm256_castps_si256(rounded), _mm256_castps_si256(magic))
        };
        let q = [q(v[0]), q(v[1]), q(v[2]), q(v[3])];
        let sum8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        // SAFETY: as above.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum8) };
        let sum: i32 = lanes.iter().sum();
        // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, which
        // the permutation puts back in element order.
        let packed = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        let mut qs = [0i8; 32];
        // SAFETY: `qs` holds 32 bytes.
        unsafe {
            _mm256_storeu_si256(
                qs.as_mut_ptr() as *mut __m256i,
                _mm256_permutevar8x32_epi32(packed, order),
            )
        };
        out.push_block(qs, d, sum);
    }
    out.pad_row(x.len());
}
