//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256. A super-block
//! is decoded once into eight registers of 32 small unsigned values plus their scales, then
//! multiplied by every activation row of the tile.

use std::arch::x86_64::*;

use super::{f16_at, load32, load32_i8};
use crate::activations::BlockQ8K;
use crate::formats::KFormat;
use crate::kernels::scalar::{self, k_scale_min, k_step};
use crate::kernels::{each_row, Out};

const Q4_K: u8 = 0;
const Q5_K: u8 = 1;
const Q6_K: u8 = 2;

/// See [`crate::kernels::Kernels::k_rows`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], out: Out) {
    let n = out.tile();
    let fallback = |out: Out| each_row(w, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o));
    match f {
        KFormat::Q4_K => by_tile!(n, rows::<Q4_K>(w, row_bytes, x, out), fallback(out)),
        KFormat::Q5_K => by_tile!(n, rows::<Q5_K>(w, row_bytes, x, out), fallback(out)),
        KFormat::Q6_K => by_tile!(n, rows::<Q6_K>(w, row_bytes, x, out), fallback(out)),
    }
}

/// A decoded super-block: `q[j]` holds elements `32j..32j + 32` as unsigned bytes (Q6_K's
/// carry +32), `scales[j]` the i16 scale of each of their 16 pair sums.
struct Decoded {
    d: f32,
    dmin: f32,
    q: [__m256i; 8],
    scales: [__m256i; 8],
    /// i16 weight of each run of 16 activations' sum: Q4_K/Q5_K the minimum of its 32
    /// (`summ`), Q6_K its scale (for the +32 correction).
    run_weights: __m256i,
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn decode<const F: u8>(b: &[u8]) -> Decoded {
    let low4 = _mm256_set1_epi8(0x0f);
    let zero = _mm256_setzero_si256();
    let mut k = Decoded {
        d: 0.0,
        dmin: 0.0,
        q: [zero; 8],
        scales: [zero; 8],
        run_weights: zero,
    };
    if F == Q6_K {
        k.d = f16_at(b, 208);
        let sc: [i16; 16] = std::array::from_fn(|g| b[192 + g] as i8 as i16);
        // SAFETY: 16 i16 (32 bytes).
        k.run_weights = unsafe { _mm256_loadu_si256(sc.as_ptr() as *const __m256i) };
        let three = _mm256_set1_epi8(3);
        for h in 0..2 {
            let (ql0, ql1) = (load32(&b[64 * h..]), load32(&b[64 * h + 32..]));
            let qh = load32(&b[128 + 32 * h..]);
            // Top two bits of run r are bits 2r..2r + 2 of qh, moved to bits 4..6.
            let top = |r: i32| {
                let bits = match r {
                    0 => qh,
                    1 => _mm256_srli_epi16(qh, 2),
                    2 => _mm256_srli_epi16(qh, 4),
                    _ => _mm256_srli_epi16(qh, 6),
                };
                _mm256_slli_epi16(_mm256_and_si256(bits, three), 4)
            };
            let hi0 = _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4);
            let hi1 = _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4);
            k.q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, low4), top(0));
            k.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), top(1));
            k.q[4 * h + 2] = _mm256_or_si256(hi0, top(2));
            k.q[4 * h + 3] = _mm256_or_si256(hi1, top(3));
        }
        for j in 0..8 {
            let (a, c) = (sc[2 * j], sc[2 * j + 1]);
            k.scales[j] = _mm256_set_m128i(_mm_set1_epi16(c), _mm_set1_epi16(a));
        }
        return k;
    }
    k.d = f16_at(b, 0);
    k.dmin = f16_at(b, 2);
    let mut mins = [0i16; 16];
    for j in 0..8 {
        let (sc, m) = k_scale_min(j, &b[4..16]);
        k.scales[j] = _mm256_set1_epi16(sc as i16);
        mins[2 * j] = m as i16;
        mins[2 * j + 1] = m as i16;
    }
    // SAFETY: 16 i16 (32 bytes).
    k.run_weights = unsafe { _mm256_loadu_si256(mins.as_ptr() as *const __m256i) };
    let qs = if F == Q5_K { &b[48..176] } else { &b[16..144] };
    let qh = if F == Q5_K { load32(&b[16..48]) } else { zero };
    let one = _mm256_set1_epi8(1);
    for c in 0..4 {
        let bits = load32(&qs[32 * c..]);
        let mut lo = _mm256_and_si256(bits, low4);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
        if F == Q5_K {
            // Fifth bits: bit 2c of qh[l] for the low half, bit 2c + 1 for the high half.
            let shifted = _mm256_srlv_epi32(qh, _mm256_set1_epi32(2 * c as i32));
            let b_lo = _mm256_and_si256(shifted, one);
            let b_hi = _mm256_and_si256(_mm256_srli_epi16(shifted, 1), one);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(b_lo, 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(b_hi, 4));
        }
        k.q[2 * c] = lo;
        k.q[2 * c + 1] = hi;
    }
    k
}

/// `(sumi, summ)` of a decoded super-block and one activation block, as [`scalar::k_sums`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sums<const F: u8>(k: &Decoded, x: &BlockQ8K) -> (i32, i32) {
    let mut acc = _mm256_setzero_si256();
    for j in 0..8 {
        let y = load32_i8(&x.qs[32 * j..]);
        let products = _mm256_madd_epi16(_mm256_maddubs_epi16(k.q[j], y), k.scales[j]);
        acc = _mm256_add_epi32(acc, products);
    }
    // SAFETY: 16 i16 (32 bytes).
    let bsums = unsafe { _mm256_loadu_si256(x.bsums.as_ptr() as *const __m256i) };
    let runs = _mm256_madd_epi16(k.run_weights, bsums);
    // Both sums at once: [sum of acc, sum of runs] in lanes 0 and 1 (exact: integers).
    let h = _mm256_hadd_epi32(acc, runs);
    let h = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    let h = _mm_hadd_epi32(h, h);
    let (sumi, runs) = (_mm_cvtsi128_si32(h), _mm_extract_epi32(h, 1));
    if F == Q6_K {
        // q - 32: take 32 * scale * (sum of the run's activations) back out.
        return (sumi - 32 * runs, 0);
    }
    (sumi, runs)
}

#[target_feature(enable = "avx2,fma,f16c")]
fn rows<const F: u8, const T: usize>(
    w_rows: &[u8],
    row_bytes: usize,
    x: &[BlockQ8K],
    mut out: Out,
) {
    let format = match F {
        Q4_K => KFormat::Q4_K,
        Q5_K => KFormat::Q5_K,
        _ => KFormat::Q6_K,
    };
    let nb = x.len() / T;
    for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
        let mut acc = [0f32; T];
        for (b, block) in w_row.chunks_exact(format.block_bytes()).enumerate() {
            let k = decode::<F>(block);
            for t in 0..T {
                let xb = &x[t * nb + b];
                let (sumi, summ) = sums::<F>(&k, xb);
                acc[t] = k_step(format, acc[t], k.d, k.dmin, xb.d, sumi, summ);
            }
        }
        out.put(r, &acc);
    }
}
