//! The input of a matrix product: rows of f32 activations, with the 8-bit forms of
//! [`crate::q8`] the weight formats in use need, quantized on first use by the kernels in use
//! and arranged the way those kernels and the weights' layouts take them.

#[cfg(target_arch = "x86_64")]
use crate::kernels::Isa;
use crate::kernels::Kernels;
use crate::layout::{Layout, Q8Layout, SPAN};
use crate::packed_k;
use crate::q8::{
    group_sums, q8_blocks_per_row, quantize_q8_portable, quantize_q8k_portable, BlockQ8K, Q8Rows,
    Q8Slice,
};

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
                quantize_for_lanes(kernels, self.rows, self.cols, &mut self.q8);
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
                self.q8k.iter_mut().for_each(packed_k::interleave_q8k);
            }
        }
        &self.q8k
    }
}

/// [`crate::q8::quantize_q8`] compiled for the instruction set of `kernels` (the same values),
/// in the layout its kernels take ([`Kernels::q8_layout`]).
pub fn quantize_q8_for(kernels: Kernels, x: &[f32], out: &mut Q8Rows) {
    quantize_q8_blocks_for(kernels, x, out);
    let row_blocks = q8_blocks_per_row(x.len());
    let first = out.qs.len() - row_blocks;
    out.layout = kernels.q8_layout();
    if out.layout == Q8Layout::Interleaved {
        (out.spans, out.row_blocks) = (x.len() / 32 / SPAN, row_blocks);
        out.paired_tail = x.len() / 32 % SPAN == 2;
        group_sums(
            &out.qs[first..],
            &out.d[first..],
            out.spans,
            &mut out.d8,
            &mut out.ysum,
        );
    }
    kernels.arrange_q8(&mut out.qs[first..], out.spans);
}

/// [`crate::q8::quantize_q8`] compiled for the instruction set of `kernels` (the same values),
/// in [`Q8Layout::Blocks`] whatever the kernels' own layout.
fn quantize_q8_blocks_for(kernels: Kernels, x: &[f32], out: &mut Q8Rows) {
    match kernels.isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
        Isa::Avx2 | Isa::Avx512 => unsafe { crate::kernels::avx2_quantize_q8(x, out) },
        _ => quantize_q8_portable(x, out),
    }
}

/// [`crate::q8::quantize_q8k`] compiled for the instruction set of `kernels` (the same bits).
pub fn quantize_q8k_for(kernels: Kernels, x: &[f32], out: &mut Vec<BlockQ8K>) {
    match kernels.isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
        Isa::Avx2 | Isa::Avx512 => unsafe { quantize_q8k_avx2(x, out) },
        _ => quantize_q8k_portable(x, out),
    }
}

/// [`quantize_q8k_portable`] compiled for AVX2.
///
/// # Safety
///
/// The CPU must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_q8k_avx2(x: &[f32], out: &mut Vec<BlockQ8K>) {
    quantize_q8k_portable(x, out)
}

/// The rows of `x` (`cols` values each) into `q8` for the kernels of sixteen weight rows side
/// by side alone: quantized in element order (the row-by-row kernels' interleaving and group
/// sums are for them only) and arranged block by block, a lone row too (its blocks' sums are
/// then made once, not at every group of weight rows). At eight rows the interleaving, the
/// group sums and the arrangement that would undo the interleaving quad by quad are a third
/// of what the caller's thread runs alone while the others wait.
fn quantize_for_lanes(kernels: Kernels, x: &[f32], cols: usize, q8: &mut Q8Rows) {
    // The quantization's own sums, for the arrangement to copy.
    q8.keep_sums = true;
    for row in x.chunks_exact(cols) {
        quantize_q8_blocks_for(kernels, row, q8);
    }
    q8.layout = Q8Layout::Blocks;
    q8.arrange_lanes(q8_blocks_per_row(cols));
}

#[cfg(test)]
mod tests;
