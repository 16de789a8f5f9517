//! A group of four 4- or 5-bit blocks decoded with byte permutes (AVX-512 VBMI), straight into
//! the activations' [`Q8Layout::Interleaved`] order: the group's bytes (at most 96) in two
//! 64-byte registers, one permute per 64-byte half that puts each packed byte where one of its
//! two elements goes (a masked shift then picks the high nibbles), and one for the four scales
//! and offsets. AVX2 needs a load, a shift and an insert per block and four scalar loads for
//! the scales; at one activation row, decoding is most of a group's work.
//!
//! [`Q8Layout::Interleaved`]: crate::activations::Q8Layout::Interleaved

use std::arch::x86_64::*;

use crate::activations::interleaved_position;
use crate::kernels::q32_ids::{block_bytes, Q4_0, Q5_0, Q5_1, Q8_0};
use crate::kernels::scalar::GROUP;

/// A decoded group: its 128 weights in the interleaved order, as two 64-byte halves (bytes as
/// [`crate::kernels::scalar::decode_q32`] gives them), and the blocks' `d` and `m` as f32 (`m`
/// meaningless for formats without an offset).
pub(super) struct Group {
    pub halves: [__m512i; 2],
    pub dw: __m128,
    pub mw: __m128,
}

/// Where a block's packed nibbles start.
const fn nibbles_at(f: u8) -> usize {
    match f {
        Q4_0 => 2,
        Q5_0 => 6,
        Q5_1 => 8,
        _ => 4,
    }
}

/// Where a 5-bit block's fifth bits (a little-endian u32, bit j for element j) start.
const fn fifth_bits_at(f: u8) -> usize {
    if f == Q5_0 {
        2
    } else {
        4
    }
}

/// What a permute table gives for each byte of the interleaved order.
#[derive(Clone, Copy)]
enum Table {
    /// The group byte packing the element's nibble.
    Nibble,
    /// The group byte holding the element's fifth bit.
    FifthByte,
    /// That bit, as a one-bit mask of its byte.
    FifthBit,
    /// The element's byte among a group's four blocks of 32 in element order (Q8_0).
    Element,
}

/// The table `t` of format `f` for 64-byte half `half` of the interleaved group.
const fn table(f: u8, t: Table, half: usize) -> [u8; 64] {
    let bb = block_bytes(f);
    let mut ix = [0u8; 64];
    let mut k = 0;
    while k < GROUP {
        let mut e = 0;
        while e < 32 {
            let p = interleaved_position(k, e);
            if p / 64 == half {
                ix[p % 64] = match t {
                    Table::Nibble => k * bb + nibbles_at(f) + e % 16,
                    Table::FifthByte => k * bb + fifth_bits_at(f) + e / 8,
                    Table::FifthBit => 1 << (e % 8),
                    Table::Element => 32 * k + e,
                } as u8;
            }
            e += 1;
        }
        k += 1;
    }
    ix
}

/// Byte indexes of the four blocks' f16 `d` (bytes 0..8 of the result) and `m` (8..16).
const fn scale_index(f: u8) -> [u8; 64] {
    let mut ix = [0u8; 64];
    let mut i = 0;
    while i < 16 {
        ix[i] = ((i % 8) / 2 * block_bytes(f) + (i / 8) * 2 + i % 2) as u8;
        i += 1;
    }
    ix
}

/// The tables of format `F`, computed at compile time.
struct Tables<const F: u8>;

impl<const F: u8> Tables<F> {
    const NIBBLE: [[u8; 64]; 2] = [table(F, Table::Nibble, 0), table(F, Table::Nibble, 1)];
    const FIFTH_BYTE: [[u8; 64]; 2] =
        [table(F, Table::FifthByte, 0), table(F, Table::FifthByte, 1)];
    const FIFTH_BIT: [[u8; 64]; 2] = [table(F, Table::FifthBit, 0), table(F, Table::FifthBit, 1)];
    const ELEMENT: [[u8; 64]; 2] = [table(F, Table::Element, 0), table(F, Table::Element, 1)];
    const SCALES: [u8; 64] = scale_index(F);
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn load_table(ix: &[u8; 64]) -> __m512i {
    // SAFETY: 64 readable bytes; unaligned load.
    unsafe { _mm512_loadu_si512(ix.as_ptr() as *const __m512i) }
}

/// The first 128 bytes of `bytes` (zeros past its end) as two registers.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
fn load128(bytes: &[u8]) -> (__m512i, __m512i) {
    let mask = |n: usize| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let n = bytes.len();
    let p = bytes.as_ptr() as *const i8;
    // SAFETY: a masked load reads only the bytes its mask selects (the others are neither read
    // nor faulting), and the masks select bytes inside `bytes`.
    unsafe {
        if n >= 128 {
            // Plain loads where the bytes are there (masked ones cost more).
            let p = p as *const __m512i;
            return (_mm512_loadu_si512(p), _mm512_loadu_si512(p.add(1)));
        }
        let lo = if n >= 64 {
            _mm512_loadu_si512(p as *const __m512i)
        } else {
            _mm512_maskz_loadu_epi8(mask(n), p)
        };
        (
            lo,
            _mm512_maskz_loadu_epi8(mask(n.saturating_sub(64)), p.wrapping_add(64)),
        )
    }
}

/// Decodes the group at the front of `rest` (a row from the group on: the bytes after the
/// group are read, not used). A row's last group may have fewer than [`GROUP`] blocks: the
/// missing ones read as zero bytes, whose scale is 0, as the scalar kernel's empty blocks. Not
/// for Q8_0 (136 bytes a group: see [`interleave_q8_0`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_group<const F: u8>(rest: &[u8]) -> Group {
    debug_assert!(F != Q8_0);
    let (lo, hi) = load128(rest);
    let pick = |ix: &[u8; 64]| _mm512_permutex2var_epi8(lo, load_table(ix), hi);
    let half = |h: usize| {
        let spread = pick(&Tables::<F>::NIBBLE[h]);
        // Bytes 16..32 and 48..64 (words 8..16, 24..32) take their byte's high nibble.
        let shifted = _mm512_mask_srli_epi16::<4>(spread, 0xff00_ff00, spread);
        let q = _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
        let fifth = || {
            let bytes = pick(&Tables::<F>::FIFTH_BYTE[h]);
            _mm512_test_epi8_mask(bytes, load_table(&Tables::<F>::FIFTH_BIT[h]))
        };
        let sixteen = _mm512_set1_epi8(16);
        match F {
            Q4_0 => _mm512_sub_epi8(q, _mm512_set1_epi8(8)),
            // (q | fifth << 4) - 16: q - 16 where the fifth bit is clear.
            Q5_0 => _mm512_mask_sub_epi8(q, !fifth(), q, sixteen),
            Q5_1 => _mm512_mask_add_epi8(q, fifth(), q, sixteen),
            _ => q,
        }
    };
    let heads = pick(&Tables::<F>::SCALES);
    let dm = _mm256_cvtph_ps(_mm512_castsi512_si128(heads));
    Group {
        halves: [half(0), half(1)],
        dw: _mm256_castps256_ps128(dm),
        mw: _mm256_extractf128_ps::<1>(dm),
    }
}

/// A Q8_0 group's four blocks of values (A and B in `ab`, C and D in `cd`, element order) in
/// the interleaved order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
pub(super) fn interleave_q8_0(ab: __m512i, cd: __m512i) -> [__m512i; 2] {
    let element = &Tables::<Q8_0>::ELEMENT;
    [
        _mm512_permutex2var_epi8(ab, load_table(&element[0]), cd),
        _mm512_permutex2var_epi8(ab, load_table(&element[1]), cd),
    ]
}

/// [`decode_group`] for Q8_0: a 32-byte load per block (its values are bytes as they are), the
/// scales by one permute of the group's first 128 bytes (every block's `d` lies there).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_q8_0_group(rest: &[u8]) -> Group {
    let bb = block_bytes(Q8_0);
    let blocks = rest.len().min(GROUP * bb) / bb;
    let values = |k: usize| match rest.get(k * bb + 2..(k + 1) * bb) {
        // SAFETY: 32 readable bytes; unaligned load.
        Some(v) if k < blocks => unsafe { _mm256_loadu_si256(v.as_ptr() as *const __m256i) },
        _ => _mm256_setzero_si256(), // a missing block of a row's last group
    };
    let ab = _mm512_inserti64x4(_mm512_castsi256_si512(values(0)), values(1), 1);
    let cd = _mm512_inserti64x4(_mm512_castsi256_si512(values(2)), values(3), 1);
    let (lo, hi) = load128(rest);
    let heads = _mm512_permutex2var_epi8(lo, load_table(&Tables::<Q8_0>::SCALES), hi);
    Group {
        halves: interleave_q8_0(ab, cd),
        dw: _mm_cvtph_ps(_mm512_castsi512_si128(heads)),
        mw: _mm_setzero_ps(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::Q32Format;
    use crate::kernels::q32_ids::{format, Q4_1};
    use crate::kernels::scalar::decode_q32;

    fn bytes(halves: [__m512i; 2]) -> [i8; 128] {
        // SAFETY: both are 128 bytes of plain data.
        unsafe { std::mem::transmute(halves) }
    }

    fn check<const F: u8>() {
        let f: Q32Format = format(F);
        let bb = block_bytes(F);
        let mut seed = 7u32 + F as u32;
        let mut group = vec![0u8; GROUP * bb];
        for blocks in 1..=GROUP {
            for _ in 0..20 {
                for b in group.iter_mut() {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    *b = (seed >> 24) as u8;
                }
                // Finite scales: a random f16 may be NaN, which compares unequal to itself.
                for k in 0..GROUP {
                    group[k * bb + 1] &= 0x3b;
                    group[k * bb + 3] &= 0x3b;
                }
                let part = &group[..blocks * bb];
                // SAFETY: the test runs only where the features are present.
                let got = unsafe { decode_group::<F>(part) };
                if blocks == GROUP {
                    // A row's bytes after the group (read by plain loads) change nothing.
                    let mut row = group.clone();
                    row.extend((0..64).map(|i| (i * 37 + 11) as u8));
                    // SAFETY: as above.
                    let again = unsafe { decode_group::<F>(&row) };
                    assert_eq!(bytes(again.halves), bytes(got.halves), "{f:?}");
                }
                let (mut d, mut m) = ([0f32; 4], [0f32; 4]);
                // SAFETY: four f32 each.
                unsafe {
                    _mm_storeu_ps(d.as_mut_ptr(), got.dw);
                    _mm_storeu_ps(m.as_mut_ptr(), got.mw);
                }
                let values = bytes(got.halves);
                for k in 0..GROUP {
                    if k < blocks {
                        let (dk, mk, qk) = decode_q32(f, &part[k * bb..(k + 1) * bb]);
                        for (e, &v) in qk.iter().enumerate() {
                            let p = interleaved_position(k, e);
                            assert_eq!(values[p], v, "{f:?} block {k} element {e}");
                        }
                        assert_eq!(d[k], dk, "{f:?} d of block {k}");
                        if f.has_min() {
                            assert_eq!(m[k], mk, "{f:?} m of block {k}");
                        }
                    } else {
                        assert_eq!(d[k], 0.0, "{f:?} missing block {k}");
                    }
                }
            }
        }
    }

    #[test]
    fn decodes_as_the_scalar_kernel_in_the_interleaved_order() {
        if !crate::kernels::Isa::Avx512.is_available() {
            return;
        }
        check::<Q4_0>();
        check::<Q4_1>();
        check::<Q5_0>();
        check::<Q5_1>();
        let blocks: [i8; 128] = std::array::from_fn(|i| (i as i8).wrapping_mul(37));
        // SAFETY: as above; 64 readable bytes each.
        let got = unsafe {
            let p = blocks.as_ptr() as *const __m512i;
            bytes(interleave_q8_0(
                _mm512_loadu_si512(p),
                _mm512_loadu_si512(p.add(1)),
            ))
        };
        for k in 0..GROUP {
            for e in 0..32 {
                assert_eq!(got[interleaved_position(k, e)], blocks[32 * k + e]);
            }
        }
    }
}
