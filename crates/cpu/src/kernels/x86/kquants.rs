//! K-quant super-blocks (256 elements), packed at load ([`crate::packed_k`]), against 8-bit
//! activation blocks of 256 in the same order. A super-block is decoded once into eight
//! registers of 32 small unsigned values, each holding two values of every run of 16, so one
//! register of scales serves all eight and a register's 32-bit lane `l` is sub-block `l`: the
//! lanes of [`scalar::k_lane_sums`] come straight out of the products. AVX2 sums two
//! registers' byte products in 16 bits and scales them with one `madd` (Q4_K: all eight, one
//! `madd`); with AVX-512 VNNI, Q4_K's and Q5_K's byte products are summed per sub-block by
//! `vpdpbusd` and multiplied by their scales once a super-block, and Q6_K's scaled by
//! `vpdpwssd`. Each row's eight float lanes then take the block's step of
//! [`scalar::k_lane_step`] (the same multiplies, conversions and adds on the same operands),
//! and are summed once, at the end of the row: no horizontal sum per super-block.

use std::arch::x86_64::*;

use super::{f16_at, lanes as lanes_ps, load16, load32, load32_i8, prefetch_ahead, tile_hsum8};
use crate::formats::KFormat;
use crate::kernels::scalar;
use crate::kernels::{each_row, Out};
use crate::q8::BlockQ8K;

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
        // Unreachable (tiles have 1..=8 rows): the scalar kernel on the file's order.
        let mut rows = vec![0u8; w.len()];
        crate::packed_k::unpack_rows(format(F), w, &mut rows);
        let mut x = x.to_vec();
        x.iter_mut().for_each(crate::packed_k::deinterleave_q8k);
        each_row(&rows, row_bytes, out, |w, o| {
            scalar::k_tile(format(F), w, &x, o)
        })
    };
    if vnni {
        // SAFETY: the caller has VNNI (above).
        unsafe { by_tile!(n, rows_vnni::<F>(w, row_bytes, x, out), fallback(out)) }
    } else {
        by_tile!(n, rows::<F>(w, row_bytes, x, out), fallback(out))
    }
}

/// Bytes per super-block of format `f` (as [`KFormat::block_bytes`], known at compile time).
const fn block_bytes(f: u8) -> usize {
    match f {
        Q4_K => 144,
        Q5_K => 176,
        _ => 210,
    }
}

const fn format(f: u8) -> KFormat {
    match f {
        Q4_K => KFormat::Q4_K,
        Q5_K => KFormat::Q5_K,
        _ => KFormat::Q6_K,
    }
}

/// A decoded packed super-block ([`crate::packed_k`]).
struct Decoded {
    d: f32,
    dmin: f32,
    /// Register `r`'s unsigned values (Q6_K's carry +32), in the packed order.
    q: [__m256i; 8],
    /// i16 lane `g`: run `g`'s scale (Q4_K/Q5_K: its sub-block's), for every register.
    run_scales: __m256i,
    /// i32 lane `l`: sub-block `l`'s scale (Q4_K/Q5_K), for sums already per sub-block.
    block_scales: __m256i,
    /// i16 weight of each run of 16 activations' sum: Q4_K/Q5_K the minimum of its 32
    /// (`summ`), Q6_K its scale (for the +32 correction).
    run_weights: __m256i,
}

/// The low nibbles of `bits` and the high ones, as bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn split_nibbles(bits: __m256i) -> (__m256i, __m256i) {
    let low4 = _mm256_set1_epi8(0x0f);
    (
        _mm256_and_si256(bits, low4),
        _mm256_and_si256(_mm256_srli_epi16::<4>(bits), low4),
    )
}

/// Moves bit `from` of every byte of `v` (its other bits clear) to bit `to`, `from, to < 8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn move_bits(v: __m256i, from: i32, to: i32) -> __m256i {
    // Within each byte: the set bits stay below bit 8 either way.
    match to - from {
        0 => v,
        d if d > 0 => _mm256_sll_epi16(v, _mm_cvtsi32_si128(d)),
        d => _mm256_srl_epi16(v, _mm_cvtsi32_si128(-d)),
    }
}

/// A packed super-block ([`crate::packed_k`]) decoded.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn decode<const F: u8>(b: &[u8]) -> Decoded {
    let zero = _mm256_setzero_si256();
    let (nibbles, _) = crate::packed_k::offsets(format(F));
    let mut q = [zero; 8];
    for s in 0..4 {
        (q[2 * s], q[2 * s + 1]) = split_nibbles(load32(&b[nibbles + 32 * s..]));
    }
    if F == Q6_K {
        for h in 0..2 {
            let top = load32(&b[128 + 32 * h..]);
            for k in 0..4 {
                let bits = _mm256_and_si256(top, _mm256_set1_epi8(3 << (2 * k)));
                q[4 * h + k] = _mm256_or_si256(q[4 * h + k], move_bits(bits, 2 * k as i32, 4));
            }
        }
        // The sixteen i8 scales as i16: each run's scale and weight.
        let sc = _mm256_cvtepi8_epi16(load16(&b[192..208]));
        return Decoded {
            d: f16_at(b, 208),
            dmin: 0.0,
            q,
            run_scales: sc,
            block_scales: zero,
            run_weights: sc,
        };
    }
    if F == Q5_K {
        let fifth = load32(&b[16..48]);
        for (r, q) in q.iter_mut().enumerate() {
            let bit = _mm256_and_si256(fifth, _mm256_set1_epi8((1u8 << r) as i8));
            *q = _mm256_or_si256(*q, move_bits(bit, r as i32, 4));
        }
    }
    let (scales, mins) = scalar::k_scales_mins(&b[4..16]);
    let scales = _mm_cvtsi64_si128(scales as i64);
    let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64));
    Decoded {
        d: f16_at(b, 0),
        dmin: f16_at(b, 2),
        q,
        // Runs 2l and 2l + 1 are sub-block l.
        run_scales: _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(scales, scales)),
        block_scales: _mm256_cvtepu8_epi32(scales),
        // Each minimum weighs two runs of 16.
        run_weights: _mm256_set_m128i(
            _mm_unpackhi_epi16(mins, mins),
            _mm_unpacklo_epi16(mins, mins),
        ),
    }
}

/// A file-order super-block's unsigned values (Q6_K's carry +32) in element order: register
/// `j` holds elements `32j..32j + 32` (what [`crate::packed_k`] rearranges).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gguf_values<const F: u8>(b: &[u8]) -> [__m256i; 8] {
    let zero = _mm256_setzero_si256();
    let mut q = [zero; 8];
    if F == Q6_K {
        let (low4, three) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
        for h in 0..2 {
            let (ql0, ql1) = (load32(&b[64 * h..]), load32(&b[64 * h + 32..]));
            let qh = load32(&b[128 + 32 * h..]);
            // Top two bits of run r are bits 2r..2r + 2 of qh, moved to bits 4..6.
            let top = |r: i32| {
                let bits = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * r));
                _mm256_slli_epi16(_mm256_and_si256(bits, three), 4)
            };
            let hi0 = _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4);
            let hi1 = _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4);
            q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, low4), top(0));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), top(1));
            q[4 * h + 2] = _mm256_or_si256(hi0, top(2));
            q[4 * h + 3] = _mm256_or_si256(hi1, top(3));
        }
        return q;
    }
    let qs = if F == Q5_K { &b[48..176] } else { &b[16..144] };
    let qh = if F == Q5_K { load32(&b[16..48]) } else { zero };
    let one = _mm256_set1_epi8(1);
    for c in 0..4 {
        let (mut lo, mut hi) = split_nibbles(load32(&qs[32 * c..]));
        if F == Q5_K {
            // Fifth bits: bit 2c of qh[l] for the low half, bit 2c + 1 for the high half.
            let shifted = _mm256_srlv_epi32(qh, _mm256_set1_epi32(2 * c as i32));
            let b_lo = _mm256_and_si256(shifted, one);
            let b_hi = _mm256_and_si256(_mm256_srli_epi16(shifted, 1), one);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(b_lo, 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(b_hi, 4));
        }
        q[2 * c] = lo;
        q[2 * c + 1] = hi;
    }
    q
}

/// Packs one file-order super-block `src` into `dst` (see [`crate::packed_k`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_block<const F: u8>(src: &[u8], dst: &mut [u8]) {
    // Element order as 16-bit pairs [run g][pair p] (16 x 8); register r is column r.
    let mut by_element = [0u16; 128];
    for (j, v) in gguf_values::<F>(src).into_iter().enumerate() {
        // SAFETY: 16 u16 (32 bytes) at 16j.
        unsafe { _mm256_storeu_si256(by_element.as_mut_ptr().add(16 * j) as *mut __m256i, v) };
    }
    let mut by_register = [0u16; 128];
    for r in 0..8 {
        for g in 0..16 {
            by_register[16 * r + g] = by_element[8 * g + r];
        }
    }
    // SAFETY: 16 u16 (32 bytes) at 16r.
    let reg = |r: usize| unsafe {
        _mm256_loadu_si256(by_register.as_ptr().add(16 * r) as *const __m256i)
    };
    dst.copy_from_slice(src);
    let store = |dst: &mut [u8], v: __m256i| {
        assert!(dst.len() >= 32);
        // SAFETY: 32 writable bytes (checked).
        unsafe { _mm256_storeu_si256(dst.as_mut_ptr() as *mut __m256i, v) }
    };
    let (nibbles, high) = crate::packed_k::offsets(format(F));
    let low4 = _mm256_set1_epi8(0x0f);
    for s in 0..4 {
        let (a, b) = (
            _mm256_and_si256(reg(2 * s), low4),
            _mm256_and_si256(reg(2 * s + 1), low4),
        );
        store(
            &mut dst[nibbles + 32 * s..],
            _mm256_or_si256(a, _mm256_slli_epi16::<4>(b)),
        );
    }
    match (F, high) {
        (Q5_K, Some(at)) => {
            let mut fifth = _mm256_setzero_si256();
            for r in 0..8 {
                let bit = _mm256_and_si256(reg(r), _mm256_set1_epi8(0x10));
                fifth = _mm256_or_si256(fifth, move_bits(bit, 4, r as i32));
            }
            store(&mut dst[at..], fifth);
        }
        (Q6_K, Some(at)) => {
            for h in 0..2 {
                let mut top = _mm256_setzero_si256();
                for k in 0..4 {
                    let bits = _mm256_and_si256(reg(4 * h + k), _mm256_set1_epi8(0x30));
                    top = _mm256_or_si256(top, move_bits(bits, 4, 2 * k as i32));
                }
                store(&mut dst[at + 32 * h..], top);
            }
        }
        _ => {}
    }
}

/// Defines the tile kernel `$name` (format `F`, `T` rows, packed rows) on the target features
/// `$features`: a row's sums over two registers added by `$pair_step(acc, k, j, y_j, y_j+1)`,
/// chains of them added by `$combine`, and made whole by `$finish(acc, k)` after the last. One text for both instruction sets, so
/// they cannot drift apart.
macro_rules! k_tile_kernel {
    ($name:ident, $features:literal, $pair_step:ident, $combine:ident, $finish:ident) => {
        #[target_feature(enable = $features)]
        fn $name<const F: u8, const T: usize>(
            w_rows: &[u8],
            row_bytes: usize,
            x: &[BlockQ8K],
            mut out: Out,
        ) {
            let bb = block_bytes(F); // a constant: no division below
            let nb = x.len() / T;
            let zero = _mm256_setzero_si256();
            let y = |xb: &BlockQ8K, j: usize| load32_i8(&xb.qs[32 * j..]);
            for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
                let mut acc = [_mm256_setzero_ps(); T]; // row t's eight lanes
                for (b, block) in w_row.chunks_exact(bb).enumerate() {
                    prefetch_ahead(block.as_ptr(), bb);
                    let k = decode::<F>(block);
                    let mut s = [zero; T];
                    if T == 1 {
                        // Four chains of two registers: one chain of eight waits on its latency.
                        let xb = &x[b];
                        let c: [__m256i; 4] = std::array::from_fn(|c| {
                            $pair_step::<F>(zero, &k, 2 * c, y(xb, 2 * c), y(xb, 2 * c + 1))
                        });
                        s[0] = $combine::<F>($combine::<F>(c[0], c[1]), $combine::<F>(c[2], c[3]));
                    } else {
                        // Two registers at a time, each pair against the tile's rows: the row
                        // sums, the pair of weights and the scales stay in registers.
                        for j in (0..8).step_by(2) {
                            for (t, s) in s.iter_mut().enumerate() {
                                let xb = &x[t * nb + b];
                                *s = $pair_step::<F>(*s, &k, j, y(xb, j), y(xb, j + 1));
                            }
                        }
                    }
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let xb = &x[t * nb + b];
                        let sumi = $finish::<F>(s[t], &k);
                        *acc = lane_step::<F>(*acc, &k, xb.d, sumi, run_sums(&k, xb));
                    }
                }
                if T == 1 {
                    out.put(r, &[scalar::hsum8(&lanes_ps(acc[0]))]);
                    continue;
                }
                // The tile's rows summed side by side (padded to eight with zeros, whose sums
                // are dropped): the additions of each row's own hsum8.
                let acc8: [__m256; 8] =
                    std::array::from_fn(|t| acc.get(t).copied().unwrap_or(_mm256_setzero_ps()));
                out.put(r, &lanes_ps(tile_hsum8(acc8))[..T]);
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

/// [`scalar::k_lane_step`] on the eight lanes at once (the same multiplies, conversions,
/// subtraction and add on the same operands): `xd` the activations' scale, `sumi` and `summ`
/// the exact lane sums (Q6_K's of values plus 32, taken back out here).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn lane_step<const F: u8>(
    acc: __m256,
    k: &Decoded,
    xd: f32,
    sumi: __m256i,
    summ: __m256i,
) -> __m256 {
    let dd = _mm256_set1_ps(k.d * xd);
    if F == Q6_K {
        // q - 32: take 32 * scale * (sum of the run's activations) back out.
        let sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<5>(summ));
        return _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sumi)));
    }
    let md = _mm256_set1_ps(k.dmin * xd);
    let step = _mm256_sub_ps(
        _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sumi)),
        _mm256_mul_ps(md, _mm256_cvtepi32_ps(summ)),
    );
    _mm256_add_ps(acc, step)
}

/// Registers `j` and `j + 1`'s byte products against `y0` and `y1` as 16-bit pair sums,
/// added: under 2^15 for every format (Q6_K's values up to 63: 2 * 2 * 63 * 127 < 2^15).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pair_products(k: &Decoded, j: usize, y0: __m256i, y1: __m256i) -> __m256i {
    _mm256_add_epi16(
        _mm256_maddubs_epi16(k.q[j], y0),
        _mm256_maddubs_epi16(k.q[j + 1], y1),
    )
}

/// `acc` plus registers `j` and `j + 1`'s products, each run's scaled by its scale: AVX2's
/// pair sums, then one `madd` by the runs' scales (the same in every register). Q4_K's pair
/// sums stay in 16 bits over all eight registers (8 * 2 * 15 * 127 < 2^15) and take one
/// `madd` in [`finish`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pair_step<const F: u8>(
    acc: __m256i,
    k: &Decoded,
    j: usize,
    y0: __m256i,
    y1: __m256i,
) -> __m256i {
    let p = pair_products(k, j, y0, y1);
    if F == Q4_K {
        return _mm256_add_epi16(acc, p);
    }
    _mm256_add_epi32(acc, _mm256_madd_epi16(p, k.run_scales))
}

/// Two chains of [`pair_step`] added.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn combine<const F: u8>(a: __m256i, b: __m256i) -> __m256i {
    if F == Q4_K {
        _mm256_add_epi16(a, b)
    } else {
        _mm256_add_epi32(a, b)
    }
}

/// [`pair_step`]'s sums made whole: Q4_K's scaled.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn finish<const F: u8>(acc: __m256i, k: &Decoded) -> __m256i {
    if F == Q4_K {
        _mm256_madd_epi16(acc, k.run_scales)
    } else {
        acc
    }
}

/// [`pair_step`] with VNNI: Q4_K's and Q5_K's byte products summed per sub-block by two
/// `vpdpbusd` (lane `l`: sub-block `l`, unscaled until [`finish_vnni`]), Q6_K's pair sums
/// scaled and added by one `vpdpwssd`. Exact either way (no saturation: far inside i32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn pair_step_vnni<const F: u8>(
    acc: __m256i,
    k: &Decoded,
    j: usize,
    y0: __m256i,
    y1: __m256i,
) -> __m256i {
    if F == Q6_K {
        return _mm256_dpwssd_epi32(acc, pair_products(k, j, y0, y1), k.run_scales);
    }
    _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, k.q[j], y0), k.q[j + 1], y1)
}

/// Two chains of [`pair_step_vnni`] added.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn combine_vnni<const F: u8>(a: __m256i, b: __m256i) -> __m256i {
    _mm256_add_epi32(a, b)
}

/// [`pair_step_vnni`]'s sums made whole: Q4_K's and Q5_K's sub-block sums times their scales,
/// one multiply for the super-block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn finish_vnni<const F: u8>(acc: __m256i, k: &Decoded) -> __m256i {
    if F == Q6_K {
        acc
    } else {
        _mm256_mullo_epi32(acc, k.block_scales)
    }
}

k_tile_kernel!(rows, "avx2,fma,f16c", pair_step, combine, finish);
k_tile_kernel!(
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    pair_step_vnni,
    combine_vnni,
    finish_vnni
);

/// Same bytes as [`crate::packed_k::pack_rows`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn pack_k_rows(f: KFormat, rows: &[u8], out: &mut [u8]) {
    let bb = f.block_bytes();
    let blocks = rows.chunks_exact(bb).zip(out.chunks_exact_mut(bb));
    match f {
        KFormat::Q4_K => blocks.for_each(|(s, d)| pack_block::<Q4_K>(s, d)),
        KFormat::Q5_K => blocks.for_each(|(s, d)| pack_block::<Q5_K>(s, d)),
        KFormat::Q6_K => blocks.for_each(|(s, d)| pack_block::<Q6_K>(s, d)),
    }
}
