//! Activation rows quantized to 8 bits, as llama.cpp does inside its quantized products: one
//! f32 scale per block of 32 (for the 32-element weight formats) or of 256 (for the K-quants).
//! Integer weight x activation products are then exact, so every kernel (scalar or SIMD) of a
//! format computes the same integers and, by a fixed float order, the same f32 result.
//!
//! This module holds the quantized forms, their arrangements for the kernels and the portable
//! quantization; `activations.rs` quantizes a product's input with the kernels in use
//! (blocks of 256 compiled once more with AVX2 enabled, which the compiler vectorizes without
//! changing a result; blocks of 32, which every 8-row forward makes 800,000 of, by an AVX2
//! version by hand with the same operations, checked against the portable one bit for bit).

use crate::aligned::Aligned;
use crate::layout::{interleaved_position, span_position, Q8Layout, GROUP, SPAN, TILE};

/// Rows of activations in blocks of 32: `x[32b + i] ≈ d[b] * qs[b][i]` (in
/// [`Q8Layout::Blocks`]). Scales are kept apart from the values so a kernel loads four
/// consecutive blocks' scales at once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Q8Rows {
    pub qs: Vec<[i8; 32]>, // [blocks][32]
    pub d: Vec<f32>,       // [blocks]
    /// `d * sum(qs)`: what a weight block's offset `m` multiplies.
    pub s: Vec<f32>, // [blocks]
    /// In the relaxed SIMD build, and for an input only the sixteen-rows kernels take (empty
    /// elsewhere): `sum(qs)`, what those kernels take a weight block's stored offset (Q4_0's 8,
    /// Q5_0's 16, Q8_0's 128) times out of the unsigned products.
    pub sums: Vec<i32>, // [blocks]
    /// Whether [`Q8Rows::push_block`] keeps `sums` outside the relaxed SIMD build (the input
    /// of the sixteen-rows kernels alone keeps them, see `activations.rs`).
    pub(crate) keep_sums: bool,
    pub layout: Q8Layout,
    /// `s` again, arranged for kernels that add several rows' offsets at once (see
    /// [`Q8Rows::arrange_tile_scales`]); empty unless asked for.
    pub tile_s: Vec<f32>, // [tiles][groups][rows of the tile][GROUP]
    /// In [`Q8Layout::Interleaved`]: the whole spans of eight blocks at the start of each row
    /// (its real blocks over eight), and the blocks a row takes, padding included.
    pub spans: usize,
    pub row_blocks: usize,
    /// In [`Q8Layout::Interleaved`]: whether a row's real blocks after its spans are two (one
    /// group, half of it padding), which [`Q8Rows::arrange_tile_values`] then lays out two
    /// rows to a register ([`paired_tail_position`]).
    pub paired_tail: bool,
    /// In [`Q8Layout::Interleaved`], per group: for the two groups of a span, its eight blocks'
    /// scales (`[d0, .., d7]`), one per whole-block sum lane; for a group after the spans, its
    /// four blocks' scales twice, one per half-block sum lane (`[d0, d1, d2, d3, d0, d1, d2,
    /// d3]`); so an AVX2 kernel scales eight sums with one multiply. Empty in
    /// [`Q8Layout::Blocks`].
    pub d8: Vec<[f32; 8]>, // [groups]
    /// In [`Q8Layout::Interleaved`], per group: the sum of the values of each lane of `d8`'s
    /// (a span's block `l`; a later group's half-block `l`: block `l % 4`, half `l / 4`), which
    /// a format whose weights are stored with an offset (Q4_0: `q - 8`, Q5_0: `q - 16`)
    /// subtracts `offset` times from the unsigned products; empty in [`Q8Layout::Blocks`].
    pub ysum: Vec<[i32; 8]>, // [groups]
    /// `qs`, `d8` and `ysum` again, arranged like `tile_s` and on whole cache lines (see
    /// [`Q8Rows::arrange_tile_values`]); empty unless asked for.
    pub tile_qs: Aligned<[i8; 32]>, // [tiles][groups][rows of the tile][GROUP]
    pub tile_d8: Aligned<[f32; 8]>, // [tiles][groups][rows of the tile]
    pub tile_ysum: Aligned<[i32; 8]>, // [tiles][groups][rows of the tile]
    /// The values (element order), scales and sums again, block by block with a tile's rows
    /// side by side (see [`Q8Rows::arrange_lanes`]); empty unless asked for.
    pub lanes_qs: Aligned<[i8; 32]>, // [tiles][blocks][rows of the tile]
    pub lanes_d: Vec<f32>,          // [tiles][blocks][rows of the tile]
    pub lanes_sum: Vec<i32>,        // [tiles][blocks][rows of the tile]
}

/// Whether blocks keep [`Q8Rows::sums`]: in the relaxed SIMD build, whose kernels alone read
/// them (natively a push per block of every product's input for nothing).
const KEEPS_SUMS: bool = cfg!(all(target_arch = "wasm32", target_feature = "relaxed-simd"));

impl Q8Rows {
    /// Empties every array, keeping its allocation for the next input.
    pub fn clear(&mut self) {
        self.qs.clear();
        self.d.clear();
        self.s.clear();
        self.sums.clear();
        self.keep_sums = false;
        self.layout = Q8Layout::default();
        (self.spans, self.row_blocks, self.paired_tail) = (0, 0, false);
        self.tile_s.clear();
        self.d8.clear();
        self.ysum.clear();
        self.tile_qs.resize(0);
        self.tile_d8.resize(0);
        self.tile_ysum.resize(0);
        self.lanes_qs.resize(0);
        self.lanes_d.clear();
        self.lanes_sum.clear();
    }

    /// Appends a block of values `qs` with scale `d` (`sum`: the values' sum).
    #[inline(always)]
    pub(crate) fn push_block(&mut self, qs: [i8; 32], d: f32, sum: i32) {
        self.qs.push(qs);
        self.d.push(d);
        self.s.push(d * sum as f32);
        if KEEPS_SUMS || self.keep_sums {
            self.sums.push(sum);
        }
    }

    /// Pads the row of `cols` values just quantized with empty blocks to a whole number of
    /// groups.
    pub(crate) fn pad_row(&mut self, cols: usize) {
        for _ in cols / 32..q8_blocks_per_row(cols) {
            self.push_block([0; 32], 0.0, 0);
        }
    }

    pub fn as_slice(&self) -> Q8Slice<'_> {
        Q8Slice {
            qs: &self.qs,
            d: &self.d,
            s: &self.s,
            sums: &self.sums,
            layout: self.layout,
            spans: self.spans,
            row_blocks: self.row_blocks,
            paired_tail: self.paired_tail,
            tile_s: &self.tile_s,
            d8: &self.d8,
            ysum: &self.ysum,
            tile_qs: self.tile_qs.as_slice(),
            tile_d8: self.tile_d8.as_slice(),
            tile_ysum: self.tile_ysum.as_slice(),
            lanes_qs: self.lanes_qs.as_slice(),
            lanes_d: &self.lanes_d,
            lanes_sum: &self.lanes_sum,
        }
    }
}

/// A run of blocks of [`Q8Rows`] (a tile's rows, one after another; whole groups when the
/// layout is [`Q8Layout::Interleaved`]).
#[derive(Clone, Copy, Debug)]
pub struct Q8Slice<'a> {
    pub qs: &'a [[i8; 32]],
    pub d: &'a [f32],
    pub s: &'a [f32],
    pub sums: &'a [i32],
    pub layout: Q8Layout,
    /// See [`Q8Rows::spans`], [`Q8Rows::row_blocks`] and [`Q8Rows::paired_tail`].
    pub spans: usize,
    pub row_blocks: usize,
    pub paired_tail: bool,
    /// A tile's part of [`Q8Rows::tile_s`] (empty when not arranged).
    pub tile_s: &'a [f32], // [groups][rows][GROUP]
    /// See [`Q8Rows::d8`] and [`Q8Rows::ysum`] (empty unless interleaved).
    pub d8: &'a [[f32; 8]], // [groups]
    pub ysum: &'a [[i32; 8]], // [groups]
    /// A tile's part of [`Q8Rows::tile_qs`], [`Q8Rows::tile_d8`] and [`Q8Rows::tile_ysum`]
    /// (empty when not arranged).
    pub tile_qs: &'a [[i8; 32]], // [groups][rows][GROUP]
    pub tile_d8: &'a [[f32; 8]], // [groups][rows]
    pub tile_ysum: &'a [[i32; 8]], // [groups][rows]
    /// A tile's part of [`Q8Rows::lanes_qs`], [`Q8Rows::lanes_d`] and [`Q8Rows::lanes_sum`]
    /// (empty when not arranged).
    pub lanes_qs: &'a [[i8; 32]], // [blocks][rows]
    pub lanes_d: &'a [f32],   // [blocks][rows]
    pub lanes_sum: &'a [i32], // [blocks][rows]
}

impl<'a> Q8Slice<'a> {
    pub fn len(&self) -> usize {
        self.qs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.qs.is_empty()
    }

    /// The tile of rows `first..first + count` (`first` a multiple of [`TILE`], `count` at
    /// most [`TILE`]), rows of `row_blocks` blocks.
    pub fn tile(&self, first: usize, count: usize, row_blocks: usize) -> Q8Slice<'a> {
        debug_assert!(first.is_multiple_of(TILE) && count <= TILE);
        let range = first * row_blocks..(first + count) * row_blocks;
        let groups = range.start / GROUP..range.end / GROUP;
        // The tile's part of an optional (possibly empty) array.
        fn part<T>(v: &[T], r: std::ops::Range<usize>) -> &[T] {
            if v.is_empty() {
                v
            } else {
                &v[r]
            }
        }
        Q8Slice {
            qs: &self.qs[range.clone()],
            d: &self.d[range.clone()],
            s: &self.s[range.clone()],
            sums: part(self.sums, range.clone()),
            layout: self.layout,
            spans: self.spans,
            row_blocks: self.row_blocks,
            paired_tail: self.paired_tail,
            tile_s: part(self.tile_s, range.clone()),
            d8: part(self.d8, groups.clone()),
            ysum: part(self.ysum, groups.clone()),
            tile_qs: part(self.tile_qs, range.clone()),
            tile_d8: part(self.tile_d8, groups.clone()),
            tile_ysum: part(self.tile_ysum, groups),
            lanes_qs: part(self.lanes_qs, range.clone()),
            lanes_d: part(self.lanes_d, range.clone()),
            lanes_sum: part(self.lanes_sum, range),
        }
    }

    /// Whether the values are arranged by tile ([`Q8Rows::arrange_tile_values`]).
    pub fn values_by_tile(&self) -> bool {
        self.tile_qs.len() == self.qs.len()
    }

    /// This tile of `rows` rows with its values and scales arranged by tile, for a kernel
    /// that wants them and was handed a tile without (never by the engine, which arranges
    /// every block of activations it multiplies for such a kernel).
    pub fn arranged(&self, rows: usize) -> Q8Rows {
        let row_blocks = self.len() / rows.max(1);
        let mut q = Q8Rows {
            qs: self.qs.to_vec(),
            d: self.d.to_vec(),
            s: self.s.to_vec(),
            sums: self.sums.to_vec(),
            layout: self.layout,
            spans: self.spans,
            row_blocks: self.row_blocks,
            paired_tail: self.paired_tail,
            d8: self.d8.to_vec(),
            ysum: self.ysum.to_vec(),
            ..Q8Rows::default()
        };
        q.arrange_tile_scales(row_blocks);
        q.arrange_tile_values(row_blocks);
        q.arrange_lanes(row_blocks);
        q
    }

    /// Where elements `4q..4q + 4` of block `b` of a row sit, in bytes from the row's first
    /// block (four consecutive elements stay together in every layout).
    #[inline(always)]
    pub fn quad_at(&self, b: usize, q: usize) -> usize {
        match self.layout {
            Q8Layout::Blocks => 32 * b + 4 * q,
            Q8Layout::Interleaved if b < SPAN * self.spans => {
                32 * (b - b % SPAN) + span_position(b % SPAN, 4 * q)
            }
            Q8Layout::Interleaved => 32 * (b - b % GROUP) + interleaved_position(b % GROUP, 4 * q),
        }
    }

    /// The sum of the values of block `b` of the row whose first block is `first`.
    #[inline(always)]
    pub fn block_sum(&self, first: usize, b: usize) -> i32 {
        match self.layout {
            Q8Layout::Interleaved if b < SPAN * self.spans => {
                self.ysum[(first + b - b % SPAN) / GROUP][b % SPAN]
            }
            Q8Layout::Interleaved => {
                let lanes = &self.ysum[(first + b) / GROUP];
                lanes[b % GROUP] + lanes[b % GROUP + GROUP]
            }
            Q8Layout::Blocks => self.qs[first + b].iter().map(|&v| v as i32).sum(),
        }
    }

    /// The values of block `b` in element order, whatever the layout.
    pub fn block_values(&self, b: usize) -> [i8; 32] {
        match self.layout {
            Q8Layout::Blocks => self.qs[b],
            Q8Layout::Interleaved if b % self.row_blocks.max(1) < SPAN * self.spans => {
                let o = b % self.row_blocks % SPAN; // the block's lane in its span
                let span = self.qs[b - o..b - o + SPAN].as_flattened();
                std::array::from_fn(|e| span[span_position(o, e)])
            }
            Q8Layout::Interleaved => {
                let first = b - b % GROUP;
                let group = self.qs[first..first + GROUP].as_flattened();
                std::array::from_fn(|e| group[interleaved_position(b % GROUP, e)])
            }
        }
    }
}

/// 256 activations: `x[i] ≈ d * qs[i]`, with the sum of each run of 16.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16], // [16]: sum of qs[16 * g..16 * g + 16]
}

mod by_tile;
mod lanes;
mod paired_tail;
mod quantize;

pub use by_tile::tile_chunk;
pub use paired_tail::paired_tail_position;
#[cfg(target_arch = "x86_64")]
pub(crate) use quantize::push_quantized;
#[cfg(test)]
pub(crate) use quantize::quantize_value;
pub(crate) use quantize::{group_sums, quantize_q8_portable, quantize_q8k_portable};
pub use quantize::{q8_blocks_per_row, quantize_q8, quantize_q8k};
