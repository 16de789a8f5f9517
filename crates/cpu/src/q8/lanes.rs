//! A tile's activations arranged for the kernels of sixteen weight rows side by side
//! ([`Layout::Lanes16`]): block by block, the tile's rows side by side, each block's values
//! in element order. The kernel then reaches every row's quads, scale and sum of a block at
//! fixed offsets from one place, where each row's own place cost it an address register per
//! row (eight rows and their scales spilled the x86 registers).

use std::mem::take;

use super::{Q8Rows, Q8Slice};
#[cfg(doc)]
use crate::layout::Layout;
use crate::layout::{Q8Layout, TILE};

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
        // (Every element is written below.)
        qs.resize(self.qs.len());
        d.resize(self.qs.len(), 0.0);
        sum.resize(self.qs.len(), 0);
        let all = self.as_slice();
        let (qs_to, flat) = (qs.as_mut_slice(), all.qs.as_flattened());
        let mut next = 0;
        for t0 in (0..rows).step_by(TILE) {
            let tile = TILE.min(rows - t0);
            for b in 0..row_blocks {
                // Where the block's quads sit in a row (the same in every row).
                let quads: [usize; 8] = std::array::from_fn(|q| all.quad_at(b, q));
                for t in t0..t0 + tile {
                    let first = t * row_blocks;
                    let block = &mut qs_to[next];
                    if all.layout == Q8Layout::Blocks {
                        *block = all.qs[first + b];
                    } else {
                        let row = &flat[32 * first..32 * (first + row_blocks)];
                        for (q, &at) in quads.iter().enumerate() {
                            block[4 * q..4 * q + 4].copy_from_slice(&row[at..at + 4]);
                        }
                    }
                    d[next] = all.d[first + b];
                    sum[next] = match all.sums.get(first + b) {
                        Some(&kept) => kept,
                        None => block.iter().map(|&v| v as i32).sum(),
                    };
                    next += 1;
                }
            }
        }
        (self.lanes_qs, self.lanes_d, self.lanes_sum) = (qs, d, sum);
    }
}

impl Q8Slice<'_> {
    /// Whether the tile is arranged block by block ([`Q8Rows::arrange_lanes`]).
    pub fn lanes_by_tile(&self) -> bool {
        self.lanes_qs.len() == self.qs.len() && !self.qs.is_empty()
    }
}
