//! The 32-element block formats rearranged at load for the AVX-512 VNNI kernels
//! ([`Layout::Lanes16`]): sixteen weight rows side by side, one to each 32-bit lane of a
//! 512-bit register, so that one `vpdpbusd` multiplies four elements of sixteen rows by the same
//! four activations (broadcast), and a block's eight such products leave each row's exact block
//! sum in its own lane. Every float step (a block's scales, the sums' multiply and add) then
//! serves sixteen rows at once, where the row-by-row layout ([`Layout::Packed`]) pays it for each
//! row and ends each row with a horizontal sum.
//!
//! A matrix in this layout has a multiple of [`LANES`] rows. Each run of sixteen rows (a
//! *group*) keeps its bytes where the file keeps them (`16 * row_bytes` bytes), block after
//! block: block `b` of the group's rows at `16 * b * block_bytes`, in order:
//!
//! - the sixteen rows' f16 scales `d` (32 bytes: row `o` at `2o`), then for Q4_1 and Q5_1 their
//!   offsets `m` (32 bytes);
//! - for Q5_0 and Q5_1, the fifth bits (64 bytes): bit `q` of byte `4o + j` is the fifth bit of
//!   element `4q + j` of row `o`;
//! - the values, in 64-byte registers whose lane `o` (bytes `4o..4o + 4`) belongs to row `o`:
//!   for the 4- and 5-bit formats four registers, register `i`'s lane `o` the file's bytes
//!   `4i..4i + 4` of row `o`'s nibbles (elements `4i..4i + 4` in the low nibbles, `16 + 4i..` in
//!   the high ones); for Q8_0 eight registers, register `q`'s lane `o` elements `4q..4q + 4`
//!   of row `o`, each plus 128 (stored unsigned, as `vpdpbusd` multiplies them).
//!
//! The sizes match the file's: sixteen blocks of Q4_0 take 32 + 256 = 16 x 18 bytes, Q4_1
//! 64 + 256 = 16 x 20, Q5_0 32 + 64 + 256 = 16 x 22, Q5_1 64 + 64 + 256 = 16 x 24, Q8_0
//! 32 + 512 = 16 x 34.
//!
//! [`Layout::Lanes16`]: crate::layout::Layout::Lanes16
//! [`Layout::Packed`]: crate::layout::Layout::Packed

use crate::formats::Q32Format;

/// Weight rows side by side in a packed group (one to each lane of a 512-bit register).
pub const LANES: usize = 16;

/// Where a packed block's parts start: `(m, qh, values)` (`m` only for formats with an offset,
/// `qh` only for the 5-bit formats).
pub const fn offsets(f: Q32Format) -> (usize, usize, usize) {
    let m = 2 * LANES;
    let qh = if f.has_min() { m + 2 * LANES } else { m };
    let values = match f {
        Q32Format::Q5_0 | Q32Format::Q5_1 => qh + 4 * LANES,
        _ => qh,
    };
    (m, qh, values)
}

/// The file's field offsets in a block: `(m, qh, qs)`.
const fn file_offsets(f: Q32Format) -> (usize, usize, usize) {
    match f {
        Q32Format::Q4_0 => (0, 0, 2),
        Q32Format::Q4_1 => (2, 0, 4),
        Q32Format::Q5_0 => (0, 2, 6),
        Q32Format::Q5_1 => (2, 4, 8),
        Q32Format::Q8_0 => (0, 0, 2),
    }
}

/// Whether `bytes` (rows of `row_bytes`) can take the layout: whole groups of whole blocks.
pub fn fits(f: Q32Format, bytes: usize, row_bytes: usize) -> bool {
    row_bytes > 0
        && row_bytes.is_multiple_of(f.block_bytes())
        && bytes.is_multiple_of(LANES * row_bytes)
}

/// Packs `rows` (whole groups of rows of `row_bytes`, the file's order) into `packed`.
pub fn pack_rows(f: Q32Format, rows: &[u8], row_bytes: usize, packed: &mut [u8]) {
    each_block(f, rows.len(), row_bytes, |file_at, packed_at, o| {
        each_byte_place(f, o, |fa, pa, flip| {
            packed[packed_at + pa] = rows[file_at + fa] ^ flip;
        });
        if let Some((fqh, pqh)) = fifth_bits_at(f) {
            let qh = &rows[file_at + fqh..file_at + fqh + 4];
            let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
            for j in 0..4 {
                packed[packed_at + pqh + 4 * o + j] =
                    (0..8).fold(0u8, |b, q| b | ((((qh >> (4 * q + j)) & 1) as u8) << q));
            }
        }
    });
}

/// The inverse of [`pack_rows`].
pub fn unpack_rows(f: Q32Format, packed: &[u8], row_bytes: usize, rows: &mut [u8]) {
    each_block(f, packed.len(), row_bytes, |file_at, packed_at, o| {
        each_byte_place(f, o, |fa, pa, flip| {
            rows[file_at + fa] = packed[packed_at + pa] ^ flip;
        });
        if let Some((fqh, pqh)) = fifth_bits_at(f) {
            let mut qh = 0u32;
            for j in 0..4 {
                let byte = packed[packed_at + pqh + 4 * o + j];
                for q in 0..8 {
                    qh |= (((byte >> q) & 1) as u32) << (4 * q + j);
                }
            }
            rows[file_at + fqh..file_at + fqh + 4].copy_from_slice(&qh.to_le_bytes());
        }
    });
}

/// Calls `visit(file offset, packed offset of the group's block, row in the group)` for every
/// block of `len` bytes of rows of `row_bytes`.
fn each_block(
    f: Q32Format,
    len: usize,
    row_bytes: usize,
    mut visit: impl FnMut(usize, usize, usize),
) {
    let bb = f.block_bytes();
    debug_assert!(fits(f, len, row_bytes));
    let blocks = row_bytes / bb;
    for group in 0..len / (LANES * row_bytes) {
        let base = group * LANES * row_bytes;
        for b in 0..blocks {
            for o in 0..LANES {
                visit(base + o * row_bytes + b * bb, base + b * LANES * bb, o);
            }
        }
    }
}

/// Calls `visit(file offset, packed offset, xor)` for every byte of row `o`'s block that moves
/// as a byte (all but the fifth bits): the scale, the offset, the values (Q8_0's flipped to
/// unsigned).
fn each_byte_place(f: Q32Format, o: usize, mut visit: impl FnMut(usize, usize, u8)) {
    let (pm, _, pv) = offsets(f);
    let (fm, _, fqs) = file_offsets(f);
    visit(0, 2 * o, 0);
    visit(1, 2 * o + 1, 0);
    if f.has_min() {
        visit(fm, pm + 2 * o, 0);
        visit(fm + 1, pm + 2 * o + 1, 0);
    }
    let (words, flip) = match f {
        Q32Format::Q8_0 => (8, 0x80),
        _ => (4, 0),
    };
    for i in 0..words {
        for k in 0..4 {
            visit(fqs + 4 * i + k, pv + 64 * i + 4 * o + k, flip);
        }
    }
}

/// `(file offset, packed offset)` of the fifth bits, for the 5-bit formats.
fn fifth_bits_at(f: Q32Format) -> Option<(usize, usize)> {
    matches!(f, Q32Format::Q5_0 | Q32Format::Q5_1).then(|| (file_offsets(f).1, offsets(f).1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [Q32Format; 5] = Q32Format::ALL;

    #[test]
    fn packing_moves_every_byte_and_unpacking_restores_them() {
        for f in FORMATS {
            let row_bytes = 3 * f.block_bytes();
            let rows: Vec<u8> = (0..2 * LANES * row_bytes)
                .map(|i| (i * 7 + i / 13) as u8)
                .collect();
            let mut packed = vec![0u8; rows.len()];
            pack_rows(f, &rows, row_bytes, &mut packed);
            assert_ne!(packed, rows, "{f:?}");
            let mut back = vec![0u8; rows.len()];
            unpack_rows(f, &packed, row_bytes, &mut back);
            assert_eq!(back, rows, "{f:?}");
        }
    }

    #[test]
    fn the_places_fill_a_block_exactly_once() {
        for f in FORMATS {
            let mut hits = vec![0; LANES * f.block_bytes()];
            for o in 0..LANES {
                each_byte_place(f, o, |_, pa, _| hits[pa] += 1);
                if let Some((_, pqh)) = fifth_bits_at(f) {
                    (0..4).for_each(|j| hits[pqh + 4 * o + j] += 1);
                }
            }
            assert!(hits.iter().all(|&h| h == 1), "{f:?}: {hits:?}");
        }
    }
}
