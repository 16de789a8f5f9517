//! The shapes the kernels, the quantized activations and the packed weights agree on: how many
//! blocks make a group and a span, how many activation rows make a tile, and where each value
//! sits in the weights' and the activations' byte orders. A leaf: it uses no other module of
//! the crate, so the quantized activations, the kernels and the packed layouts can all depend
//! on it without depending on each other.

/// Blocks of 32 per group: activation rows are padded to a whole number of groups (empty
/// blocks, zero values and scales), so SIMD kernels take four blocks at a time without a tail.
pub const GROUP: usize = 4;

/// Blocks per span: the blocks whose whole sums share one register of eight lanes.
pub const SPAN: usize = 2 * GROUP;

/// Activation rows a kernel multiplies by one decoded weight row at once (each weight block is
/// decoded once per tile). More rows are computed tile after tile with the same result.
pub const TILE: usize = 8;

/// The byte order of a weight matrix's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// As in the GGUF file.
    #[default]
    Gguf,
    /// Rearranged for the x86 kernels (see the modules `packed` and `packed_k`).
    Packed,
    /// Sixteen rows side by side for the AVX-512 VNNI kernels of the 32-element formats (see
    /// the module `packed_lanes`).
    Lanes16,
}

/// Where the values of a group of [`GROUP`] blocks of activations sit in its 128 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Q8Layout {
    /// Block after block, each in element order.
    #[default]
    Blocks,
    /// For the x86 kernels: a row's whole spans of eight blocks (`Q8Rows::spans`) hold in
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
