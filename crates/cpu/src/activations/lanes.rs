//! A tile's activations arranged for the kernels of sixteen weight rows side by side
//! ([`crate::packed_lanes`]): block by block, the tile's rows side by side, each block's values
//! in element order. The kernel then reaches every row's quads, scale and sum of a block at
//! fixed offsets from one place, where each row's own place cost it an address register per
//! row (eight rows and their scales spilled the x86 registers).

use std::mem::take;

use super::{Q8Rows, Q8Slice};
use crate::kernels::TILE;

impl Q8Rows {
    /// Copies the values (in element order), scales and sums of rows of `row_blocks` blocks
    /// into `lanes_qs`, `lanes_d` and `lanes_sum`, tile by tile of [`TILE`] rows, and in a tile
    /// block by block with the tile's rows side by side.
    pub fn arrange_lanes(&mut self, row_blocks: usize) {
        let rows = self.qs.len() / row_blocks.max(1);
        let (mut qs, mut d, mut sum) = (
            take(&mut self.lanes_qs),
            take(&mut self.lanes_d),
            take(&mut self.lanes_sum),
        );
        qs.resize(self.qs.len()); // (every element is written below)
        d.clear();
        sum.clear();
        let all = self.as_slice();
        let to = qs.as_mut_slice();
        let mut next = 0;
        for t0 in (0..rows).step_by(TILE) {
            let tile = TILE.min(rows - t0);
            for b in 0..row_blocks {
                for t in t0..t0 + tile {
                    let first = t * row_blocks;
                    let row = all.qs[first..first + row_blocks].as_flattened();
                    let block = &mut to[next];
                    for q in 0..8 {
                        let at = all.quad_at(b, q);
                        block[4 * q..4 * q + 4].copy_from_slice(&row_i8(row, at));
                    }
                    d.push(all.d[first + b]);
                    sum.push(all.block_sum(first, b));
                    next += 1;
                }
            }
        }
        (self.lanes_qs, self.lanes_d, self.lanes_sum) = (qs, d, sum);
    }
}

fn row_i8(row: &[i8], at: usize) -> [i8; 4] {
    [row[at], row[at + 1], row[at + 2], row[at + 3]]
}

impl Q8Slice<'_> {
    /// Whether the tile is arranged block by block ([`Q8Rows::arrange_lanes`]).
    pub fn lanes_by_tile(&self) -> bool {
        self.lanes_qs.len() == self.qs.len() && !self.qs.is_empty()
    }
}
