//! A tail of two blocks after a row's spans ([`Q8Rows::paired_tail`]), arranged by tile two
//! rows to a register: its group would hold two blocks and two of padding, whose byte products
//! the x86 tile kernel paid for each row; two rows' blocks fill the registers instead.

use std::ops::Range;

use super::{interleaved_position, Q8Rows, GROUP};

impl Q8Rows {
    /// The last group of a tile's rows `tile` ([`Q8Rows::paired_tail`]) into the arranged
    /// group rows from `next`: rows `2p` and `2p + 1` of the tile at row `2p`'s place, in
    /// [`paired_tail_position`]'s layout (an odd last row beside zeros), with their scales
    /// `[d0, d1, 0, 0]` and their half-block sums (lane `(k, h)`: `2h + k`) side by side;
    /// row `2p + 1`'s place is zeros.
    pub(super) fn arrange_paired_tail(
        &self,
        row_blocks: usize,
        tile: Range<usize>,
        next: usize,
        qs: &mut [[i8; 32]],
        d8: &mut [[f32; 8]],
        ysum: &mut [[i32; 8]],
    ) {
        let groups = row_blocks / GROUP;
        let g = groups - 1;
        for (i, t) in tile.clone().enumerate() {
            let at = (next + i) * GROUP;
            qs[at..at + GROUP].fill([0; 32]);
            (d8[next + i], ysum[next + i]) = ([0.0; 8], [0; 8]);
            let (place, side) = (next + i / 2 * 2, i % 2);
            let group = &self.qs[t * row_blocks + g * GROUP..][..GROUP];
            let (from, to) = (group.as_flattened(), &mut qs[place * GROUP..][..GROUP]);
            let to = to.as_flattened_mut();
            for k in 0..2 {
                for e in 0..32 {
                    to[paired_tail_position(side, k, e)] = from[interleaved_position(k, e)];
                }
                d8[place][4 * side + k] = self.d8[t * groups + g][k];
                for h in 0..2 {
                    ysum[place][4 * side + 2 * h + k] = self.ysum[t * groups + g][4 * h + k];
                }
            }
        }
    }
}

/// The byte of a tile's paired tail ([`Q8Rows::paired_tail`]: two rows' last two blocks, 128
/// bytes) that holds element `e` (0..32) of block `k` (0..2) of the pair's row `side` (0..2):
/// lane `4 * side + 2 * h + k` (`h`: the element's half) of register `(e % 16) / 4` (its quad
/// in the half), so that four byte products leave the two rows' half-block sums in the lanes,
/// and an add of lanes `2h + k` over `h` each block's whole sum.
pub const fn paired_tail_position(side: usize, k: usize, e: usize) -> usize {
    let lane = 4 * side + 2 * (e / 16) + k;
    32 * ((e % 16) / 4) + 4 * lane + e % 4
}
