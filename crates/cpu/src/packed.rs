//! The 32-element block formats rearranged at load for the AVX2 kernels ([`Layout::Packed`]):
//! the same bytes per row, the same values, in the order the kernels multiply them, so that
//! decoding a group of four blocks takes loads, shifts and masks instead of the transposes and
//! gathers of the GGUF order (about half of what a one-row product cost).
//!
//! A row's whole spans of [`SPAN`] blocks are packed first (see below), then a whole group of
//! [`GROUP`] blocks left after them, and two blocks left after that (a row of 576 elements has
//! 18 blocks: two spans and a pair) are packed as a pair; one or three left stay as they are in
//! the file. A packed span of format `F` is, in order:
//!
//! - the eight blocks' f16 scales `d` (16 bytes), then for Q4_1 and Q5_1 their offsets `m`
//!   (16 bytes);
//! - for Q5_0 and Q5_1, the fifth bits (32 bytes): byte `j`'s bit `q` is the fifth bit of byte
//!   `j` of register `q`;
//! - the values: for the 4- and 5-bit formats 128 bytes of nibbles, bytes `32s..32s + 32`
//!   holding register `s` in their low nibbles and register `s + 4` in their high ones; for Q8_0
//!   the eight registers' 256 bytes.
//!
//! Register `q` (0..8) of a span is what the activations' spans hold
//! ([`crate::layout::span_position`]): its byte `i` is element `4q + i % 4` of block
//! `i / 4`, so register `s` and `s + 4` of a 4-bit format are the low and high nibbles of the
//! eight blocks' `s`-th four bytes, side by side. The sizes match the file's: a span of Q4_0
//! takes 16 + 128 = 8 x 18 bytes, Q4_1 32 + 128 = 8 x 20, Q5_0 16 + 32 + 128 = 8 x 22, Q5_1
//! 32 + 32 + 128 = 8 x 24, Q8_0 16 + 256 = 8 x 34.
//!
//! A packed group of format `F` is, in order:
//!
//! - the four blocks' f16 scales `d` (8 bytes), then for Q4_1 and Q5_1 their offsets `m`
//!   (8 bytes);
//! - for Q5_0 and Q5_1, the fifth bits (16 bytes): byte `j`'s bit `2q + h` is the fifth bit of
//!   lane byte `16h + j` of register `q`;
//! - the values: for the 4- and 5-bit formats 64 bytes of nibbles, bytes `32s..32s + 32`
//!   holding register `2s` in their low nibbles and register `2s + 1` in their high ones; for
//!   Q8_0 the four registers' 128 bytes.
//!
//! Register `q` (0..4) is what [`Q8Layout::Interleaved`] multiplies: its
//! byte `i` is element `16 * (o / 4) + 4q + i % 4` of block `o % 4`, with `o = i / 4` the
//! half-block sum lane of the scalar kernel (`kernels::scalar::q32_tile`). The 4- and 5-bit values are
//! stored unsigned (Q4_0 and Q5_0 without their offsets of 8 and 16), as in the file.
//!
//! The sizes match the file's: a group of Q4_0 takes 8 + 64 = 4 x 18 bytes, Q4_1 16 + 64 =
//! 4 x 20, Q5_0 8 + 16 + 64 = 4 x 22, Q5_1 16 + 16 + 64 = 4 x 24, Q8_0 8 + 128 = 4 x 34.
//!
//! A pair is a group whose blocks 2 and 3 are empty: only bytes `0..8` and `16..24` of each
//! register hold values (lanes 0, 1, 4 and 5), and the pair stores just those, in half the
//! space: its two scales `d` (4 bytes), for Q4_1 and Q5_1 two offsets `m` (4 bytes), for the
//! 5-bit formats 8 bytes of fifth bits (byte `j`'s bit `2q + h`: register `q`'s byte `16h + j`),
//! then 32 bytes of nibbles whose low nibbles are registers 0 and 1 and high nibbles registers
//! 2 and 3 (byte `i` for register `2s + (i % 16) / 8` at byte `16 * (i / 16) + i % 8`), or for
//! Q8_0 register `q`'s 16 bytes at `16q`.

use crate::formats::Q32Format;
#[cfg(doc)]
use crate::layout::{Layout, Q8Layout};
use crate::layout::{GROUP, SPAN};

/// Block `k` (0..4) and element `e` (0..32) of byte `i` (0..32) of register `q` (0..4).
pub const fn element_at(q: usize, i: usize) -> (usize, usize) {
    let o = i / 4;
    (o % 4, 16 * (o / 4) + 4 * q + i % 4)
}

/// Block `o` (0..8) and element `e` (0..32) of byte `i` (0..32) of a span's register `q` (0..8).
pub const fn span_element_at(q: usize, i: usize) -> (usize, usize) {
    (i / 4, 4 * q + i % 4)
}

/// Where a packed span's parts start: `(qh, values)` (`qh` only for the 5-bit formats).
pub const fn span_offsets(f: Q32Format) -> (usize, usize) {
    let scales = if f.has_min() { 32 } else { 16 };
    match f {
        Q32Format::Q5_0 | Q32Format::Q5_1 => (scales, scales + 32),
        _ => (scales, scales),
    }
}

/// Packs one span of eight GGUF blocks (`src`) into `dst` (both `8 * block_bytes`).
pub fn pack_span(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let block = |o: usize| &src[o * bb..(o + 1) * bb];
    for o in 0..SPAN {
        dst[2 * o..2 * o + 2].copy_from_slice(&block(o)[..2]);
        if f.has_min() {
            dst[16 + 2 * o..16 + 2 * o + 2].copy_from_slice(&block(o)[2..4]);
        }
    }
    let (qh, values) = span_offsets(f);
    let value = |q: usize, i: usize| {
        let (o, e) = span_element_at(q, i);
        gguf_value(f, block(o), e)
    };
    if f == Q32Format::Q8_0 {
        for q in 0..SPAN {
            for i in 0..32 {
                dst[values + 32 * q + i] = value(q, i);
            }
        }
        return;
    }
    for s in 0..4 {
        for i in 0..32 {
            dst[values + 32 * s + i] = (value(s, i) & 0xf) | (value(s + 4, i) & 0xf) << 4;
        }
    }
    if qh != values {
        for i in 0..32 {
            dst[qh + i] = (0..SPAN).map(|q| ((value(q, i) >> 4) & 1) << q).sum();
        }
    }
}

/// The inverse of [`pack_span`].
pub fn unpack_span(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let (qh, values) = span_offsets(f);
    dst.fill(0);
    for o in 0..SPAN {
        let block = &mut dst[o * bb..(o + 1) * bb];
        block[..2].copy_from_slice(&src[2 * o..2 * o + 2]);
        if f.has_min() {
            block[2..4].copy_from_slice(&src[16 + 2 * o..16 + 2 * o + 2]);
        }
    }
    for q in 0..SPAN {
        for i in 0..32 {
            let (o, e) = span_element_at(q, i);
            let v = if f == Q32Format::Q8_0 {
                src[values + 32 * q + i]
            } else {
                let byte = src[values + 32 * (q % 4) + i];
                let nibble = if q < 4 { byte & 0xf } else { byte >> 4 };
                let fifth = if qh != values {
                    (src[qh + i] >> q) & 1
                } else {
                    0
                };
                nibble | fifth << 4
            };
            put_value(f, &mut dst[o * bb..(o + 1) * bb], e, v);
        }
    }
}

/// Where a packed group's parts start: `(qh, values)` (`qh` only for the 5-bit formats).
pub const fn offsets(f: Q32Format) -> (usize, usize) {
    let scales = if f.has_min() { 16 } else { 8 };
    match f {
        Q32Format::Q5_0 | Q32Format::Q5_1 => (scales, scales + 16),
        _ => (scales, scales),
    }
}

/// The unsigned value (nibble and fifth bit; Q8_0's byte) of element `e` of a GGUF block.
fn gguf_value(f: Q32Format, b: &[u8], e: usize) -> u8 {
    let nibble = |qs: usize| {
        let byte = b[qs + e % 16];
        if e < 16 {
            byte & 0xf
        } else {
            byte >> 4
        }
    };
    let fifth = |qh: usize| {
        let bits = u32::from_le_bytes([b[qh], b[qh + 1], b[qh + 2], b[qh + 3]]);
        (((bits >> e) & 1) as u8) << 4
    };
    match f {
        Q32Format::Q4_0 => nibble(2),
        Q32Format::Q4_1 => nibble(4),
        Q32Format::Q5_0 => nibble(6) | fifth(2),
        Q32Format::Q5_1 => nibble(8) | fifth(4),
        Q32Format::Q8_0 => b[2 + e],
    }
}

/// Packs one group of four GGUF blocks (`src`) into `dst` (both `4 * block_bytes`).
pub fn pack_group(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let block = |k: usize| &src[k * bb..(k + 1) * bb];
    for k in 0..GROUP {
        dst[2 * k..2 * k + 2].copy_from_slice(&block(k)[..2]);
        if f.has_min() {
            dst[8 + 2 * k..8 + 2 * k + 2].copy_from_slice(&block(k)[2..4]);
        }
    }
    let (qh, values) = offsets(f);
    let value = |q: usize, i: usize| {
        let (k, e) = element_at(q, i);
        gguf_value(f, block(k), e)
    };
    if f == Q32Format::Q8_0 {
        for q in 0..GROUP {
            for i in 0..32 {
                dst[values + 32 * q + i] = value(q, i);
            }
        }
        return;
    }
    for s in 0..2 {
        for i in 0..32 {
            let (low, high) = (value(2 * s, i), value(2 * s + 1, i));
            dst[values + 32 * s + i] = (low & 0xf) | (high & 0xf) << 4;
        }
    }
    if qh != values {
        dst[qh..qh + 16].fill(0);
        for q in 0..GROUP {
            for i in 0..32 {
                let fifth = (value(q, i) >> 4) & 1;
                dst[qh + i % 16] |= fifth << (2 * q + i / 16);
            }
        }
    }
}

/// The inverse of [`pack_group`].
pub fn unpack_group(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let (qh, values) = offsets(f);
    dst.fill(0);
    for k in 0..GROUP {
        let block = &mut dst[k * bb..(k + 1) * bb];
        block[..2].copy_from_slice(&src[2 * k..2 * k + 2]);
        if f.has_min() {
            block[2..4].copy_from_slice(&src[8 + 2 * k..8 + 2 * k + 2]);
        }
    }
    for q in 0..GROUP {
        for i in 0..32 {
            let (k, e) = element_at(q, i);
            let v = if f == Q32Format::Q8_0 {
                src[values + 32 * q + i]
            } else {
                let byte = src[values + 32 * (q / 2) + i];
                let nibble = if q % 2 == 0 { byte & 0xf } else { byte >> 4 };
                let fifth = if qh != values {
                    (src[qh + i % 16] >> (2 * q + i / 16)) & 1
                } else {
                    0
                };
                nibble | fifth << 4
            };
            put_value(f, &mut dst[k * bb..(k + 1) * bb], e, v);
        }
    }
}

/// Where a packed pair's parts start: `(qh, values)`.
pub const fn pair_offsets(f: Q32Format) -> (usize, usize) {
    let scales = if f.has_min() { 8 } else { 4 };
    match f {
        Q32Format::Q5_0 | Q32Format::Q5_1 => (scales, scales + 8),
        _ => (scales, scales),
    }
}

/// Register byte `(q, b)` (`b` in `0..8` or `16..24`) that byte `i` of a pair's 32 bytes of
/// nibbles holds in its low nibble (its high nibble: register `q + 2`).
const fn pair_nibble_at(i: usize) -> (usize, usize) {
    ((i % 16) / 8, 16 * (i / 16) + i % 8)
}

/// Register byte `(q, b)` of byte `i` of a Q8_0 pair's 64 values.
const fn pair_q8_at(i: usize) -> (usize, usize) {
    let j = i % 16;
    (i / 16, if j < 8 { j } else { 8 + j })
}

/// Packs the last two GGUF blocks of a row (`src`) into `dst` (both `2 * block_bytes`).
pub fn pack_pair(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let block = |k: usize| &src[k * bb..(k + 1) * bb];
    for k in 0..2 {
        dst[2 * k..2 * k + 2].copy_from_slice(&block(k)[..2]);
        if f.has_min() {
            dst[4 + 2 * k..4 + 2 * k + 2].copy_from_slice(&block(k)[2..4]);
        }
    }
    let (qh, values) = pair_offsets(f);
    let value = |q: usize, b: usize| {
        let (k, e) = element_at(q, b);
        gguf_value(f, block(k), e)
    };
    if f == Q32Format::Q8_0 {
        for i in 0..64 {
            let (q, b) = pair_q8_at(i);
            dst[values + i] = value(q, b);
        }
        return;
    }
    for i in 0..32 {
        let (q, b) = pair_nibble_at(i);
        dst[values + i] = (value(q, b) & 0xf) | (value(q + 2, b) & 0xf) << 4;
    }
    if qh != values {
        dst[qh..qh + 8].fill(0);
        for q in 0..GROUP {
            for b in (0..8).chain(16..24) {
                let fifth = (value(q, b) >> 4) & 1;
                dst[qh + b % 16] |= fifth << (2 * q + b / 16);
            }
        }
    }
}

/// The inverse of [`pack_pair`].
pub fn unpack_pair(f: Q32Format, src: &[u8], dst: &mut [u8]) {
    let bb = f.block_bytes();
    let (qh, values) = pair_offsets(f);
    dst.fill(0);
    for k in 0..2 {
        let block = &mut dst[k * bb..(k + 1) * bb];
        block[..2].copy_from_slice(&src[2 * k..2 * k + 2]);
        if f.has_min() {
            block[2..4].copy_from_slice(&src[4 + 2 * k..4 + 2 * k + 2]);
        }
    }
    let mut put = |q: usize, b: usize, v: u8| {
        let (k, e) = element_at(q, b);
        put_value(f, &mut dst[k * bb..(k + 1) * bb], e, v);
    };
    if f == Q32Format::Q8_0 {
        for i in 0..64 {
            let (q, b) = pair_q8_at(i);
            put(q, b, src[values + i]);
        }
        return;
    }
    for i in 0..32 {
        let (q, b) = pair_nibble_at(i);
        let byte = src[values + i];
        for (q, nibble) in [(q, byte & 0xf), (q + 2, byte >> 4)] {
            let fifth = if qh != values {
                (src[qh + b % 16] >> (2 * q + b / 16)) & 1
            } else {
                0
            };
            put(q, b, nibble | fifth << 4);
        }
    }
}

/// Writes the unsigned value `v` (as [`gguf_value`] reads it) of element `e` into a GGUF block
/// whose value bits are still zero.
fn put_value(f: Q32Format, b: &mut [u8], e: usize, v: u8) {
    let (qs, qh) = match f {
        Q32Format::Q4_0 => (2, None),
        Q32Format::Q4_1 => (4, None),
        Q32Format::Q5_0 => (6, Some(2)),
        Q32Format::Q5_1 => (8, Some(4)),
        Q32Format::Q8_0 => {
            b[2 + e] = v;
            return;
        }
    };
    b[qs + e % 16] |= if e < 16 { v & 0xf } else { (v & 0xf) << 4 };
    if let Some(at) = qh {
        b[at + e / 8] |= ((v >> 4) & 1) << (e % 8);
    }
}

/// Rows of `row_bytes` packed: each row's whole spans through [`pack_span`], a whole group
/// after them through [`pack_group`], its last blocks as [`tail`] packs them.
pub fn pack_rows(f: Q32Format, rows: &[u8], row_bytes: usize, packed: &mut [u8]) {
    each_unit(
        f,
        rows,
        row_bytes,
        packed,
        [pack_span, pack_group, pack_pair],
    );
}

/// The inverse of [`pack_rows`].
pub fn unpack_rows(f: Q32Format, packed: &[u8], row_bytes: usize, rows: &mut [u8]) {
    each_unit(
        f,
        packed,
        row_bytes,
        rows,
        [unpack_span, unpack_group, unpack_pair],
    );
}

/// A row's bytes in its whole spans, then in a whole group after them (0 or a group's).
pub fn spans_and_group(f: Q32Format, row_bytes: usize) -> (usize, usize) {
    let (sb, gb) = (SPAN * f.block_bytes(), GROUP * f.block_bytes());
    let spans = row_bytes / sb * sb;
    (spans, (row_bytes - spans) / gb * gb)
}

/// Packs or unpacks one span, group or pair.
type Repack = fn(Q32Format, &[u8], &mut [u8]);

/// `[span, group, pair]` over each row's whole spans, a whole group after them and two blocks
/// left after that; other blocks copied.
fn each_unit(
    f: Q32Format,
    src: &[u8],
    row_bytes: usize,
    dst: &mut [u8],
    [span, group, pair]: [Repack; 3],
) {
    let (spans, group_bytes) = spans_and_group(f, row_bytes);
    let sb = SPAN * f.block_bytes();
    for (s, d) in src
        .chunks_exact(row_bytes)
        .zip(dst.chunks_exact_mut(row_bytes))
    {
        for (ss, ds) in s[..spans]
            .chunks_exact(sb)
            .zip(d[..spans].chunks_exact_mut(sb))
        {
            span(f, ss, ds);
        }
        let whole = spans + group_bytes;
        if group_bytes > 0 {
            group(f, &s[spans..whole], &mut d[spans..whole]);
        }
        tail(f, &s[whole..], &mut d[whole..], pair);
    }
}

/// A row's blocks after its whole groups: a pair through `pair`, else copied.
pub fn tail(f: Q32Format, src: &[u8], dst: &mut [u8], pair: fn(Q32Format, &[u8], &mut [u8])) {
    if src.len() == 2 * f.block_bytes() {
        pair(f, src, dst);
    } else {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_of_a_span_register_is_one_element() {
        let mut seen = [[false; 32]; SPAN];
        for q in 0..SPAN {
            for i in 0..32 {
                let (o, e) = span_element_at(q, i);
                assert!(!seen[o][e], "block {o} element {e} twice");
                seen[o][e] = true;
                // The same byte as the activations' spans.
                assert_eq!(crate::layout::span_position(o, e), 32 * q + i);
            }
        }
    }

    #[test]
    fn every_byte_of_a_register_is_one_element() {
        let mut seen = [[false; 32]; GROUP];
        for q in 0..GROUP {
            for i in 0..32 {
                let (k, e) = element_at(q, i);
                assert!(!seen[k][e], "block {k} element {e} twice");
                seen[k][e] = true;
                // The same byte as the activations' interleaved layout.
                assert_eq!(
                    crate::layout::interleaved_position(k, e),
                    32 * q + i,
                    "register {q} byte {i}"
                );
            }
        }
    }

    const FORMATS: [Q32Format; 5] = Q32Format::ALL;

    /// Every byte value, in no particular order.
    fn bytes(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| (i * 7919 % 251) as u8 ^ (i / 3) as u8)
            .collect()
    }

    #[test]
    fn packing_keeps_every_byte_and_unpacks_back() {
        for f in FORMATS {
            for blocks in [1, 2, 4, 6, 7, 8, 9, 12, 13, 14, 15, 18, 28] {
                let row_bytes = blocks * f.block_bytes();
                let rows = bytes(3 * row_bytes);
                let mut packed = vec![0u8; rows.len()];
                pack_rows(f, &rows, row_bytes, &mut packed);
                if blocks >= 2 {
                    assert_ne!(packed, rows, "{f:?}: a group or pair is rearranged");
                }
                let mut back = vec![0u8; rows.len()];
                unpack_rows(f, &packed, row_bytes, &mut back);
                assert_eq!(back, rows, "{f:?}, {blocks} blocks a row");
            }
        }
    }
}
