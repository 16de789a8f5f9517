//! A tile's activations arranged for the x86 kernels of several rows: each group's rows side by
//! side (the tile's rows at fixed offsets from one place), a span's groups two rows to a
//! register pair.

use std::mem::take;

use super::Q8Rows;
use crate::layout::TILE;
use crate::layout::{Q8Layout, GROUP};

/// Where row `t`'s 32-byte register `c` (0..[`GROUP`]) of a span's group sits among the
/// `tile * GROUP` of that group arranged by tile ([`Q8Rows::arrange_tile_values`]): rows
/// in pairs, register by register (row `2p`'s `c`, then row `2p + 1`'s), so that one 64-byte
/// load holds the same register of two rows (the AVX-512 kernels multiply two rows at once);
/// an odd tile's last row after the pairs, in order.
pub const fn tile_chunk(tile: usize, t: usize, c: usize) -> usize {
    if t < tile / 2 * 2 {
        t / 2 * 2 * GROUP + 2 * c + t % 2
    } else {
        t * GROUP + c
    }
}

impl Q8Rows {
    /// Copies `s` (rows of `row_blocks` blocks) into `tile_s`, tile by tile of [`TILE`] rows,
    /// and in a tile group by group with the tile's rows side by side: two rows' offsets'
    /// scales of a group are then eight consecutive f32, one 256-bit multiply by the weights'
    /// offsets.
    pub fn arrange_tile_scales(&mut self, row_blocks: usize) {
        let rows = self.d.len() / row_blocks.max(1);
        let groups = row_blocks / GROUP;
        let mut tile_s = take(&mut self.tile_s);
        tile_s.clear();
        for t0 in (0..rows).step_by(TILE) {
            let tile = TILE.min(rows - t0);
            for g in 0..groups {
                for t in t0..t0 + tile {
                    let at = t * row_blocks + g * GROUP;
                    tile_s.extend_from_slice(&self.s[at..at + GROUP]);
                }
            }
        }
        self.tile_s = tile_s;
    }

    /// Copies `qs`, `d8` and `ysum` ([`Q8Layout::Interleaved`] rows of `row_blocks` blocks)
    /// into `tile_qs`, `tile_d8` and `tile_ysum`, arranged as [`Q8Rows::arrange_tile_scales`]
    /// arranges the scales: a kernel then reaches each row of a tile's group at a fixed offset
    /// from one place, where the rows' own places cost it an address per row and group; and
    /// on whole cache lines, so that no 32-byte load of them splits a line. A span's groups
    /// hold their rows in pairs ([`tile_chunk`]).
    pub fn arrange_tile_values(&mut self, row_blocks: usize) {
        debug_assert_eq!(self.layout, Q8Layout::Interleaved);
        let rows = self.qs.len() / row_blocks.max(1);
        let groups = row_blocks / GROUP;
        let (mut qs, mut d8) = (take(&mut self.tile_qs), take(&mut self.tile_d8));
        let mut ysum = take(&mut self.tile_ysum);
        // (Every element is written below.)
        qs.resize(self.qs.len());
        d8.resize(self.d8.len());
        ysum.resize(self.ysum.len());
        let (qs_to, d8_to, ysum_to) = (qs.as_mut_slice(), d8.as_mut_slice(), ysum.as_mut_slice());
        let mut next = 0; // the next group row in arranged order
        for t0 in (0..rows).step_by(TILE) {
            let tile = TILE.min(rows - t0);
            for g in 0..groups {
                if self.paired_tail && tile > 1 && g + 1 == groups {
                    let (qs, d8, ysum) = (&mut *qs_to, &mut *d8_to, &mut *ysum_to);
                    self.arrange_paired_tail(row_blocks, t0..t0 + tile, next, qs, d8, ysum);
                    next += tile;
                    continue;
                }
                // A span's groups in pairs of rows (`tile_chunk`), the groups after them in order.
                let in_pairs = g < 2 * self.spans;
                let base = next * GROUP;
                for (i, t) in (t0..t0 + tile).enumerate() {
                    let at = t * row_blocks + g * GROUP;
                    for c in 0..GROUP {
                        let to = match in_pairs {
                            true => base + tile_chunk(tile, i, c),
                            false => base + i * GROUP + c,
                        };
                        qs_to[to] = self.qs[at + c];
                    }
                    d8_to[next + i] = self.d8[t * groups + g];
                    ysum_to[next + i] = self.ysum[t * groups + g];
                }
                next += tile;
            }
        }
        (self.tile_qs, self.tile_d8, self.tile_ysum) = (qs, d8, ysum);
    }
}
