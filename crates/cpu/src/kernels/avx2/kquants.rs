//! K-quant super-blocks (256 elements) against 8-bit activation blocks of 256. A super-block
//! is decoded once into eight registers of 32 small unsigned values plus their scales, then
//! multiplied by every activation row of the tile. A row's integer sums stay in lanes until the
//! tile's rows are summed side by side ([`tile_sum8`]: exact, so any order), and the float step
//! of [`scalar::k_step`] runs on the tile's rows at once, lane `t` row `t`: the same multiplies,
//! conversions and adds on the same operands, so the same bits, without a horizontal sum and
//! scalar float steps per row and super-block. One row takes eight super-blocks side by side
//! instead (lane `i`: block `b + i`) and adds their steps to its sum one after another. With
//! AVX-512 VNNI, `vpdpwssd` takes a register's scaling multiply and its add in one instruction.

use std::arch::x86_64::*;

use super::{f16_at, lanes as lanes_ps, load32, load32_i8};
use crate::activations::BlockQ8K;
use crate::formats::KFormat;
use crate::kernels::scalar;
use crate::kernels::{each_row, Out};

const Q4_K: u8 = 0;
const Q5_K: u8 = 1;
const Q6_K: u8 = 2;

/// See [`crate::kernels::Kernels::k_rows`]; `vnni`: the scaled sums by AVX-512 VNNI.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C, and with `vnni` AVX-512 F, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn k_rows(f: KFormat, w: &[u8], row_bytes: usize, x: &[BlockQ8K], out: Out, vnni: bool) {
    // SAFETY: the caller vouches for VNNI where it asks for it.
    unsafe {
        match f {
            KFormat::Q4_K => by_isa::<Q4_K>(w, row_bytes, x, out, vnni),
            KFormat::Q5_K => by_isa::<Q5_K>(w, row_bytes, x, out, vnni),
            KFormat::Q6_K => by_isa::<Q6_K>(w, row_bytes, x, out, vnni),
        }
    }
}

/// [`rows`] (or, with `vnni`, [`rows_vnni`]) of format `F` for the tile's size.
///
/// # Safety
/// With `vnni`, the CPU must support AVX-512 F, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn by_isa<const F: u8>(w: &[u8], row_bytes: usize, x: &[BlockQ8K], out: Out, vnni: bool) {
    let n = out.tile();
    let fallback = |out: Out| {
        each_row(w, row_bytes, out, |w, o| {
            scalar::k_tile(format(F), w, x, o) // unreachable: tiles have 1..=8 rows
        })
    };
    if vnni {
        // SAFETY: the caller has VNNI (above).
        unsafe { by_tile!(n, rows_vnni::<F>(w, row_bytes, x, out), fallback(out)) }
    } else {
        by_tile!(n, rows::<F>(w, row_bytes, x, out), fallback(out))
    }
}

const fn format(f: u8) -> KFormat {
    match f {
        Q4_K => KFormat::Q4_K,
        Q5_K => KFormat::Q5_K,
        _ => KFormat::Q6_K,
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

/// Q4_K's and Q5_K's eight 6-bit scales and eight 6-bit minimums (`s`: their 12 bytes), one a
/// byte, as [`scalar::k_scale_min`] reads them (`j`: byte `j`), four at a time in 32-bit words.
#[inline]
fn scales_mins(s: &[u8]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let (low6, low4, top2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    // j < 4: the low six bits of bytes j and j + 4; j >= 4: four bits of byte j + 4 and the top
    // two of byte j - 4 (scales) or j (minimums).
    let scales_low = w0 & low6;
    let mins_low = w1 & low6;
    let scales_high = (w2 & low4) | (((w0 >> 6) & top2) << 4);
    let mins_high = ((w2 >> 4) & low4) | (((w1 >> 6) & top2) << 4);
    (
        scales_low as u64 | (scales_high as u64) << 32,
        mins_low as u64 | (mins_high as u64) << 32,
    )
}

/// A `pshufb` index pair picking i16 element `e` of a 128-bit lane.
const fn word_bytes(e: usize) -> i16 {
    ((2 * e) | ((2 * e + 1) << 8)) as i16
}

/// 16 bytes from `b[..16]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load16(b: &[u8]) -> __m128i {
    assert!(b.len() >= 16);
    // SAFETY: 16 readable bytes (checked); unaligned load.
    unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) }
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
        // The sixteen i8 scales as i16: each run's weight, and (two to a register, one per
        // 128-bit lane) each register's scales.
        let sc = _mm256_cvtepi8_epi16(load16(&b[192..208]));
        k.run_weights = sc;
        let halves = [
            _mm256_permute2x128_si256::<0x00>(sc, sc),
            _mm256_permute2x128_si256::<0x11>(sc, sc),
        ];
        for j in 0..8 {
            // Scale 2j in the low lane, 2j + 1 in the high, from the half holding both.
            let (lo, hi) = (word_bytes(2 * (j % 4)), word_bytes(2 * (j % 4) + 1));
            let pick = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
            k.scales[j] = _mm256_shuffle_epi8(halves[j / 4], pick);
        }
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
        return k;
    }
    k.d = f16_at(b, 0);
    k.dmin = f16_at(b, 2);
    let (scales, mins) = scales_mins(&b[4..16]);
    // Scale j of a whole register j; each minimum weighs two runs of 16.
    let scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64)));
    for j in 0..8 {
        k.scales[j] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(word_bytes(j)));
    }
    let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64));
    k.run_weights = _mm256_set_m128i(
        _mm_unpackhi_epi16(mins, mins),
        _mm_unpacklo_epi16(mins, mins),
    );
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

/// Lane `t`: the sum of `v[t]`'s eight i32 lanes (exact: integers, so in any order).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_sum8(v: [__m256i; 8]) -> __m256i {
    // Rows (0, 1, 2, 3) in each 128-bit lane of `a`, rows (4, 5, 6, 7) in `b`'s, each lane
    // holding half of a row's lanes.
    let a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    let b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(a, b),
        _mm256_permute2x128_si256::<0x31>(a, b),
    )
}

/// Defines the tile kernel `$name` (format `F`, `T` rows) on the target features `$features`,
/// a register's scaled sums added by `$scaled_add(acc, pair_sums, scales)`. One text for both
/// instruction sets, so they cannot drift apart.
macro_rules! k_tile_kernel {
    ($name:ident, $features:literal, $scaled_add:ident) => {
        #[target_feature(enable = $features)]
        fn $name<const F: u8, const T: usize>(
            w_rows: &[u8],
            row_bytes: usize,
            x: &[BlockQ8K],
            mut out: Out,
        ) {
            let bb = format(F).block_bytes();
            let nb = x.len() / T;
            let zero = _mm256_setzero_si256();
            // A super-block's integer sums (lanes) against activation block `xb`, in four
            // chains of two: one chain of eight accumulating `vpdpwssd` waits on its latency.
            let sums = |k: &Decoded, xb: &BlockQ8K| {
                let mut s = [zero; 4];
                for j in 0..8 {
                    let y = load32_i8(&xb.qs[32 * j..]);
                    s[j % 4] = $scaled_add(s[j % 4], _mm256_maddubs_epi16(k.q[j], y), k.scales[j]);
                }
                _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]))
            };
            for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
                if T == 1 {
                    // One row: eight super-blocks side by side (lane i: block b + i), their
                    // float steps at once, then added to the row's sum one after the other, in
                    // the scalar order.
                    let mut acc = 0f32;
                    for (c, chunk) in w_row.chunks(8 * bb).enumerate() {
                        let (mut s, mut runs) = ([zero; 8], [zero; 8]);
                        let (mut d, mut dmin, mut xd) = ([0f32; 8], [0f32; 8], [0f32; 8]);
                        for (i, block) in chunk.chunks_exact(bb).enumerate() {
                            let (k, xb) = (decode::<F>(block), &x[8 * c + i]);
                            s[i] = sums(&k, xb);
                            runs[i] = run_sums(&k, xb);
                            (d[i], dmin[i], xd[i]) = (k.d, k.dmin, xb.d);
                        }
                        let steps = k_steps::<F>(
                            load8(&d),
                            load8(&dmin),
                            load8(&xd),
                            tile_sum8(s),
                            tile_sum8(runs),
                        );
                        for step in lanes_ps(steps).into_iter().take(chunk.len() / bb) {
                            acc += step;
                        }
                    }
                    out.put(r, &[acc]);
                    continue;
                }
                let mut acc = _mm256_setzero_ps(); // lane t: row t
                for (b, block) in w_row.chunks_exact(bb).enumerate() {
                    let k = decode::<F>(block);
                    let (mut s, mut runs) = ([zero; 8], [zero; 8]);
                    // Register by register, each against the tile's rows: the row sums, a
                    // register of weights and its scales stay in registers (AVX2 has sixteen).
                    for j in 0..8 {
                        let (q, scales) = (k.q[j], k.scales[j]);
                        for (t, s) in s.iter_mut().enumerate().take(T) {
                            let y = load32_i8(&x[t * nb + b].qs[32 * j..]);
                            *s = $scaled_add(*s, _mm256_maddubs_epi16(q, y), scales);
                        }
                    }
                    let mut xd = [0f32; 8];
                    for t in 0..T {
                        let xb = &x[t * nb + b];
                        xd[t] = xb.d;
                        runs[t] = run_sums(&k, xb);
                    }
                    let steps = k_steps::<F>(
                        _mm256_set1_ps(k.d),
                        _mm256_set1_ps(k.dmin),
                        load8(&xd),
                        tile_sum8(s),
                        tile_sum8(runs),
                    );
                    acc = _mm256_add_ps(acc, steps);
                }
                out.put(r, &lanes_ps(acc)[..T]);
            }
        }
    };
}

/// A super-block's run sums against activation block `xb` (lanes): each run of 16 activations'
/// sum times its run weight.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn run_sums(k: &Decoded, xb: &BlockQ8K) -> __m256i {
    // SAFETY: 16 i16 (32 bytes).
    let bsums = unsafe { _mm256_loadu_si256(xb.bsums.as_ptr() as *const __m256i) };
    _mm256_madd_epi16(k.run_weights, bsums)
}

/// What [`scalar::k_step`] adds to the sum, in eight lanes at once (the same multiplies,
/// conversions and subtraction on the same operands): `d`, `dmin` the weights' scales, `xd`
/// the activations', `sumi` and `summ` the exact integer sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_steps<const F: u8>(
    d: __m256,
    dmin: __m256,
    xd: __m256,
    sumi: __m256i,
    summ: __m256i,
) -> __m256 {
    let dxd = _mm256_mul_ps(d, xd);
    if F == Q6_K {
        // q - 32: take 32 * scale * (sum of the run's activations) back out.
        let sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<5>(summ));
        return _mm256_mul_ps(dxd, _mm256_cvtepi32_ps(sumi));
    }
    let mxd = _mm256_mul_ps(dmin, xd);
    _mm256_sub_ps(
        _mm256_mul_ps(dxd, _mm256_cvtepi32_ps(sumi)),
        _mm256_mul_ps(mxd, _mm256_cvtepi32_ps(summ)),
    )
}

/// Eight f32 from `v`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load8(v: &[f32; 8]) -> __m256 {
    // SAFETY: eight f32.
    unsafe { _mm256_loadu_ps(v.as_ptr()) }
}

/// `acc + madd(p, scales)`: AVX2's scaled pair sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_add(acc: __m256i, p: __m256i, scales: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales))
}

/// [`scaled_add`] in one `vpdpwssd` (exact: no saturation, as the sums stay far inside i32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn scaled_add_vnni(acc: __m256i, p: __m256i, scales: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, p, scales)
}

k_tile_kernel!(rows, "avx2,fma,f16c", scaled_add);
k_tile_kernel!(
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    scaled_add_vnni
);
