//! The K-quant super-blocks rearranged at load for the AVX2 kernels ([`Layout::Packed`]): the
//! same bytes per block, the same values, in the order the kernels multiply them. In the
//! file's order a register of 32 values is one scale's run (or two), so every register needs
//! its own broadcast of its scale; here every register holds two values of each of the 16
//! runs of 16, so one register of scales serves all eight, and with VNNI a register's 32-bit
//! lanes are the 8 sub-blocks of 32: one multiply by the scales per super-block instead of
//! eight.
//!
//! Register `r` (0..8) of a super-block holds at byte `i` (0..32) element
//! [`element_at`]`(r, i) = 16 * (i / 2) + 2r + i % 2`: its 16-bit lane `g` is run `g`, its
//! 32-bit lane `l` sub-block `l`. The activations take the same order
//! ([`interleave_q8k`]). A packed block is, by format:
//!
//! - Q4_K (144 bytes): `d`, `dmin` and the 12 bytes of scales and minimums as in the file
//!   (bytes `0..16`), then 128 bytes of nibbles: bytes `16 + 32s..16 + 32s + 32` hold register
//!   `2s` in their low nibbles and `2s + 1` in their high ones.
//! - Q5_K (176 bytes): bytes `0..16` as in the file; 32 bytes of fifth bits, byte `i`'s bit `r`
//!   that of register `r`'s byte `i`; then the nibbles as Q4_K's, from byte 48.
//! - Q6_K (210 bytes): the nibbles (the low four bits of each value plus 32) as Q4_K's, from
//!   byte 0; 64 bytes of top bits, byte `128 + 32h + i`'s bits `2k..2k + 2` those of register
//!   `4h + k`'s byte `i`; then the 16 scales and `d` as in the file (bytes `192..210`).

use crate::formats::KFormat;
#[cfg(doc)]
use crate::layout::Layout;
use crate::q8::BlockQ8K;

/// The super-block element that byte `i` (0..32) of register `r` (0..8) holds.
pub const fn element_at(r: usize, i: usize) -> usize {
    16 * (i / 2) + 2 * r + i % 2
}

/// Where a packed block's nibbles start, and its fifth (Q5_K) or top two (Q6_K) bits.
pub const fn offsets(f: KFormat) -> (usize, Option<usize>) {
    match f {
        KFormat::Q4_K => (16, None),
        KFormat::Q5_K => (48, Some(16)),
        KFormat::Q6_K => (0, Some(128)),
    }
}

/// The bytes of a block that hold its values (the rest is copied as it is).
const fn value_bytes(f: KFormat) -> std::ops::Range<usize> {
    match f {
        KFormat::Q4_K => 16..144,
        KFormat::Q5_K => 16..176,
        KFormat::Q6_K => 0..192,
    }
}

/// The unsigned value of element `e` of a file-order block: nibble and fifth bit (Q4_K,
/// Q5_K), or six bits (Q6_K: the signed value plus 32).
pub fn gguf_value(f: KFormat, b: &[u8], e: usize) -> u8 {
    match f {
        KFormat::Q4_K | KFormat::Q5_K => {
            // Each 32 bytes of qs hold sub-blocks 2c (low nibbles) and 2c + 1 (high).
            let (c, high, l) = (e / 64, e % 64 >= 32, e % 32);
            let qs = if f == KFormat::Q5_K { 48 } else { 16 };
            let byte = b[qs + 32 * c + l];
            let nibble = if high { byte >> 4 } else { byte & 0xf };
            if f == KFormat::Q5_K {
                nibble | ((b[16 + l] >> (2 * c + high as usize)) & 1) << 4
            } else {
                nibble
            }
        }
        KFormat::Q6_K => {
            // Halves of 128: runs of 32 from ql's low nibbles (0, 1) and high ones (2, 3).
            let (h, run, l) = (e / 128, e % 128 / 32, e % 32);
            let ql = b[64 * h + l + 32 * (run % 2)];
            let low = if run < 2 { ql & 0xf } else { ql >> 4 };
            low | ((b[128 + 32 * h + l] >> (2 * run)) & 3) << 4
        }
    }
}

/// Writes `v` (as [`gguf_value`] reads it) as element `e` of a file-order block whose value
/// bits are still zero.
fn put_gguf_value(f: KFormat, b: &mut [u8], e: usize, v: u8) {
    match f {
        KFormat::Q4_K | KFormat::Q5_K => {
            let (c, high, l) = (e / 64, e % 64 >= 32, e % 32);
            let qs = if f == KFormat::Q5_K { 48 } else { 16 };
            b[qs + 32 * c + l] |= if high { (v & 0xf) << 4 } else { v & 0xf };
            if f == KFormat::Q5_K {
                b[16 + l] |= ((v >> 4) & 1) << (2 * c + high as usize);
            }
        }
        KFormat::Q6_K => {
            let (h, run, l) = (e / 128, e % 128 / 32, e % 32);
            let ql = &mut b[64 * h + l + 32 * (run % 2)];
            *ql |= if run < 2 { v & 0xf } else { (v & 0xf) << 4 };
            b[128 + 32 * h + l] |= ((v >> 4) & 3) << (2 * run);
        }
    }
}

/// Packs one file-order super-block (`src`) into `dst` (both `block_bytes`).
pub fn pack_block(f: KFormat, src: &[u8], dst: &mut [u8]) {
    let values: [u8; 256] = std::array::from_fn(|e| gguf_value(f, src, e));
    dst.copy_from_slice(src);
    dst[value_bytes(f)].fill(0);
    let (nibbles, high) = offsets(f);
    for r in 0..8 {
        for i in 0..32 {
            let v = values[element_at(r, i)];
            dst[nibbles + 32 * (r / 2) + i] |= (v & 0xf) << (4 * (r % 2));
            match (f, high) {
                (KFormat::Q5_K, Some(at)) => dst[at + i] |= ((v >> 4) & 1) << r,
                (KFormat::Q6_K, Some(at)) => {
                    dst[at + 32 * (r / 4) + i] |= ((v >> 4) & 3) << (2 * (r % 4))
                }
                _ => {}
            }
        }
    }
}

/// The value of register `r`'s byte `i` in a packed block.
pub fn packed_value(f: KFormat, b: &[u8], r: usize, i: usize) -> u8 {
    let (nibbles, high) = offsets(f);
    let nibble = (b[nibbles + 32 * (r / 2) + i] >> (4 * (r % 2))) & 0xf;
    match (f, high) {
        (KFormat::Q5_K, Some(at)) => nibble | ((b[at + i] >> r) & 1) << 4,
        (KFormat::Q6_K, Some(at)) => {
            nibble | ((b[at + 32 * (r / 4) + i] >> (2 * (r % 4))) & 3) << 4
        }
        _ => nibble,
    }
}

/// The inverse of [`pack_block`].
pub fn unpack_block(f: KFormat, src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
    dst[value_bytes(f)].fill(0);
    for r in 0..8 {
        for i in 0..32 {
            put_gguf_value(f, dst, element_at(r, i), packed_value(f, src, r, i));
        }
    }
}

/// Every super-block of `rows` packed into `packed` (the same length).
pub fn pack_rows(f: KFormat, rows: &[u8], packed: &mut [u8]) {
    let bb = f.block_bytes();
    for (s, d) in rows.chunks_exact(bb).zip(packed.chunks_exact_mut(bb)) {
        pack_block(f, s, d);
    }
}

/// The inverse of [`pack_rows`].
pub fn unpack_rows(f: KFormat, packed: &[u8], rows: &mut [u8]) {
    let bb = f.block_bytes();
    for (s, d) in packed.chunks_exact(bb).zip(rows.chunks_exact_mut(bb)) {
        unpack_block(f, s, d);
    }
}

/// An activation block's values in the packed registers' order: byte `32r + i` is element
/// [`element_at`]`(r, i)`. Its runs' sums stay as they are (a run's values stay in its run).
pub fn interleave_q8k(b: &mut BlockQ8K) {
    let values = b.qs;
    for r in 0..8 {
        for i in 0..32 {
            b.qs[32 * r + i] = values[element_at(r, i)];
        }
    }
}

/// The inverse of [`interleave_q8k`].
pub fn deinterleave_q8k(b: &mut BlockQ8K) {
    let values = b.qs;
    for r in 0..8 {
        for i in 0..32 {
            b.qs[element_at(r, i)] = values[32 * r + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [KFormat; 3] = [KFormat::Q4_K, KFormat::Q5_K, KFormat::Q6_K];

    /// Every byte value, in no particular order.
    fn bytes(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| (i * 7919 % 251) as u8 ^ (i / 3) as u8)
            .collect()
    }

    #[test]
    fn every_byte_of_a_register_is_one_element_of_its_run_and_sub_block() {
        let mut seen = [false; 256];
        for r in 0..8 {
            for i in 0..32 {
                let e = element_at(r, i);
                assert!(!seen[e], "element {e} twice");
                seen[e] = true;
                assert_eq!(e / 16, i / 2, "16-bit lane {} is run {}", i / 2, e / 16);
                assert_eq!(
                    e / 32,
                    i / 4,
                    "32-bit lane {} is sub-block {}",
                    i / 4,
                    e / 32
                );
            }
        }
    }

    #[test]
    fn packing_keeps_every_value_and_unpacks_back() {
        for f in FORMATS {
            let bb = f.block_bytes();
            let rows = bytes(5 * bb);
            let mut packed = vec![0u8; rows.len()];
            pack_rows(f, &rows, &mut packed);
            assert_ne!(packed, rows, "{f:?}: the values are rearranged");
            for (s, p) in rows.chunks_exact(bb).zip(packed.chunks_exact(bb)) {
                for r in 0..8 {
                    for i in 0..32 {
                        let e = element_at(r, i);
                        assert_eq!(packed_value(f, p, r, i), gguf_value(f, s, e), "{f:?} {e}");
                    }
                }
            }
            let mut back = vec![0u8; rows.len()];
            unpack_rows(f, &packed, &mut back);
            assert_eq!(back, rows, "{f:?}");
        }
    }

    #[test]
    fn interleaved_activations_keep_their_runs() {
        let mut b = BlockQ8K {
            d: 0.5,
            qs: std::array::from_fn(|e| (e as i32 - 128) as i8),
            bsums: [0; 16],
        };
        let before = b;
        interleave_q8k(&mut b);
        for r in 0..8 {
            for i in 0..32 {
                assert_eq!(b.qs[32 * r + i], before.qs[element_at(r, i)]);
            }
        }
        assert_eq!((b.d, b.bsums), (before.d, before.bsums));
        deinterleave_q8k(&mut b);
        assert_eq!(b, before);
    }
}
