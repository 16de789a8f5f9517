//! K-quant super-blocks (256 elements), packed at load ([`crate::packed_k`]), against 8-bit
//! activation blocks of 256 in the same order. A super-block is decoded once into eight
//! registers of 32 small unsigned values, each holding two values of every run of 16, so one
//! register of scales serves all eight: AVX2 sums two registers' byte products in 16 bits and
//! scales them with one `madd`; with AVX-512 VNNI, Q4_K's and Q5_K's byte products are summed
//! per sub-block by `vpdpbusd` and multiplied by their scales once a super-block, and Q6_K's
//! scaled by `vpdpwssd`. A row's integer sums stay in lanes until the tile's rows are summed
//! side by side ([`tile_sum8`]: exact, so any order), and the float step of
//! [`scalar::k_step`] runs on the tile's rows at once, lane `t` row `t`: the same multiplies,
//! conversions and adds on the same operands, so the same bits, without a horizontal sum and
//! scalar float steps per row and super-block. One row takes eight super-blocks side by side
//! instead (lane `i`: block `b + i`) and adds their steps to its sum one after another.

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

/// 16 bytes from `b[..16]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load16(b: &[u8]) -> __m128i {
    assert!(b.len() >= 16);
    // SAFETY: 16 readable bytes (checked); unaligned load.
    unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) }
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
    let (scales, mins) = scales_mins(&b[4..16]);
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
pub(super) fn gguf_values<const F: u8>(b: &[u8]) -> [__m256i; 8] {
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
pub(super) fn pack_block<const F: u8>(src: &[u8], dst: &mut [u8]) {
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

/// Lane `t`: the sum of `v[t]`'s eight i32 lanes (exact: integers, so in any order). By
/// unpacks and adds: `vphaddd` takes two cycles a register on Zen 4, where an unpack and an
/// add take about one between them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_sum8(v: [__m256i; 8]) -> __m256i {
    // Per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3].
    let pairs = |a: __m256i, b: __m256i| {
        _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b))
    };
    // Per 128-bit lane: [a, b, c, d]'s sums over that lane's half of each.
    let quads = |ab: __m256i, cd: __m256i| {
        _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd))
    };
    let low = quads(pairs(v[0], v[1]), pairs(v[2], v[3])); // rows 0..4, by half
    let high = quads(pairs(v[4], v[5]), pairs(v[6], v[7])); // rows 4..8, by half
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(low, high),
        _mm256_permute2x128_si256::<0x31>(low, high),
    )
}

/// Defines the tile kernel `$name` (format `F`, `T` rows, packed rows) on the target features
/// `$features`: a row's sums over two registers added by `$pair_step(acc, k, j, y_j, y_j+1)`,
/// and made whole by `$finish(acc, k)` after the last. One text for both instruction sets, so
/// they cannot drift apart.
macro_rules! k_tile_kernel {
    ($name:ident, $features:literal, $pair_step:ident, $finish:ident) => {
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
            // A super-block's integer sums (lanes) against activation block `xb`, in four
            // chains: one chain of eight accumulating `vpdpbusd` waits on its latency.
            let sums = |k: &Decoded, xb: &BlockQ8K| {
                let s: [__m256i; 4] = std::array::from_fn(|c| {
                    $pair_step::<F>(zero, k, 2 * c, y(xb, 2 * c), y(xb, 2 * c + 1))
                });
                let s =
                    _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
                $finish::<F>(s, k)
            };
            // The activation blocks' scales, eight to a register, made once for every weight
            // row: one row's per chunk of eight blocks (lane i: block 8c + i), a tile's per
            // block (lane t: row t). (Eight scalars stored and read back as one register would
            // wait on the stores at every use.)
            let chunks = if T == 1 { nb.div_ceil(8) } else { nb };
            let (mut on_stack, mut on_heap) = ([_mm256_setzero_ps(); 64], Vec::new());
            let xds: &mut [__m256] = if chunks <= on_stack.len() {
                &mut on_stack[..chunks]
            } else {
                on_heap.resize(chunks, _mm256_setzero_ps());
                &mut on_heap
            };
            for (j, v) in xds.iter_mut().enumerate() {
                let lanes: [f32; 8] = std::array::from_fn(|l| match T {
                    1 => x.get(8 * j + l).map_or(0.0, |b| b.d),
                    _ if l < T => x[l * nb + j].d,
                    _ => 0.0,
                });
                *v = load8(&lanes);
            }
            let xds: &[__m256] = xds;
            let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            for (r, w_row) in w_rows.chunks_exact(row_bytes).enumerate() {
                if T == 1 {
                    // One row: eight super-blocks side by side (lane i: block b + i), their
                    // float steps at once, then added to the row's sum one after the other, in
                    // the scalar order.
                    let mut acc = 0f32;
                    for (c, chunk) in w_row.chunks(8 * bb).enumerate() {
                        let (mut s, mut runs) = ([zero; 8], [zero; 8]);
                        let mut heads = zero; // lane i: block i's f16 scales
                        for (i, block) in chunk.chunks_exact(bb).enumerate() {
                            let (k, xb) = (decode::<F>(block), &x[8 * c + i]);
                            s[i] = sums(&k, xb);
                            runs[i] = run_sums(&k, xb);
                            let lane = _mm256_cmpeq_epi32(_mm256_set1_epi32(i as i32), iota);
                            let head = _mm256_set1_epi32(block_head::<F>(block));
                            heads = _mm256_blendv_epi8(heads, head, lane);
                        }
                        let (d, dmin) = scales8(heads);
                        let steps = k_steps::<F>(d, dmin, xds[c], tile_sum8(s), tile_sum8(runs));
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
                    // Two registers at a time, each pair against the tile's rows: the row sums,
                    // the pair of weights and the scales stay in registers (AVX2 has sixteen).
                    for j in (0..8).step_by(2) {
                        for (t, s) in s.iter_mut().enumerate().take(T) {
                            let xb = &x[t * nb + b];
                            *s = $pair_step::<F>(*s, &k, j, y(xb, j), y(xb, j + 1));
                        }
                    }
                    for t in 0..T {
                        runs[t] = run_sums(&k, &x[t * nb + b]);
                        s[t] = $finish::<F>(s[t], &k);
                    }
                    let steps = k_steps::<F>(
                        _mm256_set1_ps(k.d),
                        _mm256_set1_ps(k.dmin),
                        xds[b],
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

/// The f16 scales of a packed block as one 32-bit word: `d` in the low half, Q4_K's and
/// Q5_K's `dmin` in the high one.
#[inline]
fn block_head<const F: u8>(b: &[u8]) -> i32 {
    let at = if F == Q6_K { 208 } else { 0 };
    let high = if F == Q6_K { [0, 0] } else { [b[2], b[3]] };
    i32::from_le_bytes([b[at], b[at + 1], high[0], high[1]])
}

/// Eight blocks' `d` and `dmin` from their [`block_head`]s (lane `i`: block `i`), converted
/// as [`f16_at`] converts one.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales8(heads: __m256i) -> (__m256, __m256) {
    let low = _mm256_and_si256(heads, _mm256_set1_epi32(0xffff));
    let high = _mm256_srli_epi32::<16>(heads);
    // Per 128-bit lane: four d, then four dmin; then d 0..8 in the low lane, dmin in the high.
    let halves = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(low, high));
    (
        _mm256_cvtph_ps(_mm256_castsi256_si128(halves)),
        _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(halves)),
    )
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
/// pair sums, then one `madd` by the runs' scales (the same in every register).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pair_step<const F: u8>(
    acc: __m256i,
    k: &Decoded,
    j: usize,
    y0: __m256i,
    y1: __m256i,
) -> __m256i {
    _mm256_add_epi32(
        acc,
        _mm256_madd_epi16(pair_products(k, j, y0, y1), k.run_scales),
    )
}

/// [`pair_step`]'s sums are whole.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn finish<const F: u8>(acc: __m256i, _k: &Decoded) -> __m256i {
    acc
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

k_tile_kernel!(rows, "avx2,fma,f16c", pair_step, finish);
k_tile_kernel!(
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    pair_step_vnni,
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
