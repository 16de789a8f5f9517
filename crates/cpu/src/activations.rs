//! Activation rows quantized to 8 bits, as llama.cpp does inside its quantized products: one
//! f32 scale per block of 32 (for the 32-element weight formats) or of 256 (for the K-quants).
//! Integer weight x activation products are then exact, so every kernel (scalar or SIMD) of a
//! format computes the same integers and, by a fixed float order, the same f32 result.
//!
//! Quantization is one portable function (compiled once more with AVX2 enabled for blocks of
//! 256, which the compiler vectorizes without changing a result); blocks of 32, which every
//! 8-row forward makes 800,000 of, have an AVX2 version by hand with the same operations
//! (`kernels::avx2::quantize`), checked against it bit for bit.

use crate::aligned::Aligned;
use crate::kernels::scalar::SPAN;
use crate::kernels::{Kernels, TILE};
use crate::packed::Layout;

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
    /// Whether [`Q8Rows::push_block`] keeps `sums` outside the relaxed SIMD build (see
    /// [`Q8Rows::quantize_for_lanes`]).
    keep_sums: bool,
    pub layout: Q8Layout,
    /// `s` again, arranged for kernels that add several rows' offsets at once (see
    /// [`Q8Rows::arrange_tile_scales`]); empty unless asked for.
    pub tile_s: Vec<f32>, // [tiles][groups][rows of the tile][Q8_GROUP]
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
    pub tile_qs: Aligned<[i8; 32]>, // [tiles][groups][rows of the tile][Q8_GROUP]
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

/// Where the values of a group of [`Q8_GROUP`] blocks sit in its 128 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Q8Layout {
    /// Block after block, each in element order.
    #[default]
    Blocks,
    /// For the x86 kernels: a row's whole spans of eight blocks ([`Q8Rows::spans`]) hold in
    /// their eight 32-byte registers, at lane `o`, one quad each of block `o` (register `q`:
    /// elements `4q..4q + 4`, see [`span_position`]), so the byte products of the eight
    /// registers (AVX2's `maddubs` and `madd`, or VNNI's `vpdpbusd`) leave the scalar kernel's
    /// whole-block sums in its lanes with no horizontal fold. The groups of four after them
    /// hold the 16 elements of each of eight half-block sums in the same four-byte lane of the
    /// group's four registers (lane `l` of the group's two 64-byte halves at `l` and `l + 8`,
    /// see [`interleaved_position`]), which the kernels add to whole blocks. The permutation is
    /// paid once per input row, and the weights' decoding (shared by a tile) permutes them the
    /// same way.
    Interleaved,
}

/// The byte of a group's 128 that holds element `e` (0..32) of its block `k` (0..4) in
/// [`Q8Layout::Interleaved`]: the element's half-block sum `o = 4 * (e / 16) + k` (the
/// scalar kernel's lane), its quad `q = (e % 16) / 4` of that half, at lane `o + 8 * (q % 2)`
/// of 64-byte half `q / 2`.
pub const fn interleaved_position(k: usize, e: usize) -> usize {
    let o = 4 * (e / 16) + k;
    let q = (e % 16) / 4;
    64 * (q / 2) + 4 * (o + 8 * (q % 2)) + e % 4
}

/// The byte of a span's 256 that holds element `e` (0..32) of its block `o` (0..8) in
/// [`Q8Layout::Interleaved`]: lane `o` of register `e / 4`.
pub const fn span_position(o: usize, e: usize) -> usize {
    32 * (e / 4) + 4 * o + e % 4
}

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
    pub tile_s: &'a [f32], // [groups][rows][Q8_GROUP]
    /// See [`Q8Rows::d8`] and [`Q8Rows::ysum`] (empty unless interleaved).
    pub d8: &'a [[f32; 8]], // [groups]
    pub ysum: &'a [[i32; 8]], // [groups]
    /// A tile's part of [`Q8Rows::tile_qs`], [`Q8Rows::tile_d8`] and [`Q8Rows::tile_ysum`]
    /// (empty when not arranged).
    pub tile_qs: &'a [[i8; 32]], // [groups][rows][Q8_GROUP]
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
        let groups = range.start / Q8_GROUP..range.end / Q8_GROUP;
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
            Q8Layout::Interleaved => {
                32 * (b - b % Q8_GROUP) + interleaved_position(b % Q8_GROUP, 4 * q)
            }
        }
    }

    /// The sum of the values of block `b` of the row whose first block is `first`.
    #[inline(always)]
    pub fn block_sum(&self, first: usize, b: usize) -> i32 {
        match self.layout {
            Q8Layout::Interleaved if b < SPAN * self.spans => {
                self.ysum[(first + b - b % SPAN) / Q8_GROUP][b % SPAN]
            }
            Q8Layout::Interleaved => {
                let lanes = &self.ysum[(first + b) / Q8_GROUP];
                lanes[b % Q8_GROUP] + lanes[b % Q8_GROUP + Q8_GROUP]
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
                let first = b - b % Q8_GROUP;
                let group = self.qs[first..first + Q8_GROUP].as_flattened();
                std::array::from_fn(|e| group[interleaved_position(b % Q8_GROUP, e)])
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

/// The input of a matrix product: `n` rows of `cols` f32 activations, with the quantized
/// forms the weight formats in use need, made once per input.
pub struct Activations<'a> {
    pub rows: &'a [f32], // [n, cols]
    pub n: usize,
    pub cols: usize,
    q8: Q8Rows,         // [n, q8_blocks_per_row(cols)] blocks, empty until needed
    q8k: Vec<BlockQ8K>, // [n, cols / 256], empty until needed
}

/// The quantized forms' arrays, handed from one product's input to the next so that their
/// allocations are made once (see [`Activations::reusing`]).
#[derive(Default)]
pub struct QuantizedBuffers {
    q8: Q8Rows,
    q8k: Vec<BlockQ8K>,
}

impl<'a> Activations<'a> {
    pub fn new(rows: &'a [f32], cols: usize) -> Self {
        Self::reusing(rows, cols, QuantizedBuffers::default())
    }

    /// [`Activations::new`] over the arrays of an earlier input (emptied first).
    pub fn reusing(rows: &'a [f32], cols: usize, buffers: QuantizedBuffers) -> Self {
        debug_assert!(cols > 0 && rows.len().is_multiple_of(cols));
        let QuantizedBuffers { mut q8, mut q8k } = buffers;
        q8.clear();
        q8k.clear();
        Activations {
            rows,
            n: rows.len() / cols.max(1),
            cols,
            q8,
            q8k,
        }
    }

    /// The quantized forms' arrays, for the next input.
    pub fn into_buffers(self) -> QuantizedBuffers {
        QuantizedBuffers {
            q8: self.q8,
            q8k: self.q8k,
        }
    }

    /// The rows in blocks of 32, [`q8_blocks_per_row`] per row (quantized on first use), with
    /// a tile's values arranged for the layouts of the weights they will multiply: by tile
    /// for [`Layout::Packed`], block by block for [`Layout::Lanes16`] (each where `kernels`
    /// want it).
    pub fn q8(&mut self, kernels: Kernels, weights: impl Iterator<Item = Layout>) -> Q8Slice<'_> {
        if self.q8.qs.is_empty() {
            // Which kernels will take the tile: sixteen weight rows side by side, or one.
            let (mut lanes, mut row_by_row) = (false, false);
            for layout in weights {
                lanes |= layout == Layout::Lanes16;
                row_by_row |= layout != Layout::Lanes16;
            }
            let row_blocks = q8_blocks_per_row(self.cols);
            if lanes && !row_by_row && kernels.lanes_by_tile() {
                self.q8.quantize_for_lanes(kernels, self.rows, self.cols);
                return self.q8.as_slice();
            }
            for row in self.rows.chunks_exact(self.cols) {
                quantize_q8_for(kernels, row, &mut self.q8);
            }
            let several = self.n > 1;
            if several && row_by_row && kernels.scales_by_tile() {
                self.q8.arrange_tile_scales(row_blocks);
            }
            if several && row_by_row && kernels.values_by_tile() {
                self.q8.arrange_tile_values(row_blocks);
            }
            if several && lanes && kernels.lanes_by_tile() {
                self.q8.arrange_lanes(row_blocks);
            }
        }
        self.q8.as_slice()
    }

    /// The blocks of 32 made so far (empty before [`Activations::q8`]).
    pub fn q8_ready(&self) -> Q8Slice<'_> {
        self.q8.as_slice()
    }

    /// The blocks of 256 made so far (empty before [`Activations::q8k`]).
    pub fn q8k_ready(&self) -> &[BlockQ8K] {
        &self.q8k
    }

    /// The rows in blocks of 256 (quantized on first use).
    pub fn q8k(&mut self, kernels: Kernels) -> &[BlockQ8K] {
        if self.q8k.is_empty() {
            self.q8k.reserve(self.rows.len() / 256);
            quantize_q8k_for(kernels, self.rows, &mut self.q8k);
            if kernels.interleaves_q8k() {
                self.q8k
                    .iter_mut()
                    .for_each(crate::packed_k::interleave_q8k);
            }
        }
        &self.q8k
    }
}

mod by_tile;
mod lanes;
mod paired_tail;
mod quantize;
#[cfg(test)]
mod tests;

pub use by_tile::tile_chunk;
pub use paired_tail::paired_tail_position;
#[cfg(target_arch = "x86_64")]
pub(crate) use quantize::push_quantized;
pub(crate) use quantize::quantize_q8_blocks_for;
pub use quantize::{
    q8_blocks_per_row, quantize_q8, quantize_q8_for, quantize_q8k, quantize_q8k_for, Q8_GROUP,
};
