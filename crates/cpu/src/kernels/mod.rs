//! Weight-row x activation-tile kernels, one module per instruction set. [`scalar`] defines
//! what each computes (reduction orders included); a SIMD module must return the same bits,
//! which the kernel tests check on every format.
//!
//! To add an instruction set: a module beside `x86` with the row functions, an [`Isa`]
//! variant (and its place in [`Isa::ALL`]), its detection in [`Isa::is_available`], and its
//! arm in the dispatch below.

/// Calls `$kernel::<consts.., T>(args)` for a tile of `$n` rows (1..=8); any other count (never
/// passed) falls back to `$fallback`. Defined before the SIMD modules, which see it by scope.
#[allow(unused_macros)] // a target without SIMD kernels has no caller
macro_rules! by_tile {
    ($n:expr, $kernel:ident::<$($c:ident),*>($($arg:expr),*), $fallback:expr) => {
        match $n {
            1 => $kernel::<$($c,)* 1>($($arg),*),
            2 => $kernel::<$($c,)* 2>($($arg),*),
            3 => $kernel::<$($c,)* 3>($($arg),*),
            4 => $kernel::<$($c,)* 4>($($arg),*),
            5 => $kernel::<$($c,)* 5>($($arg),*),
            6 => $kernel::<$($c,)* 6>($($arg),*),
            7 => $kernel::<$($c,)* 7>($($arg),*),
            8 => $kernel::<$($c,)* 8>($($arg),*),
            _ => $fallback,
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86::quantize::quantize_q8 as avx2_quantize_q8;
mod isa;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
mod q32_ids;
pub mod scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
mod softmax;
#[cfg(test)]
mod tests;
mod widened;
pub use widened::PAIRS_A_PASS;

use crate::formats::{FloatFormat, KFormat, Q32Format, WeightFormat};
use crate::layout::{Layout, Q8Layout, TILE};
use crate::packed;
use crate::packed_k;
use crate::q8::{BlockQ8K, Q8Slice};

pub use isa::{Isa, KERNELS_ENV, RELAXED_SIMD};

/// The kernels of an instruction set this machine has: the only way to reach SIMD code, so
/// holding a `Kernels` proves the features were detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernels {
    isa: Isa,
}

impl Kernels {
    /// The kernels of `isa`, or `None` when this machine lacks it.
    pub fn new(isa: Isa) -> Option<Kernels> {
        isa.is_available().then_some(Kernels { isa })
    }

    pub fn best() -> Kernels {
        Kernels { isa: Isa::best() }
    }

    pub fn scalar() -> Kernels {
        Kernels { isa: Isa::Scalar }
    }

    pub fn isa(self) -> Isa {
        self.isa
    }

    /// The layout [`Kernels::q32_rows`] takes its activations in.
    pub fn q8_layout(self) -> Q8Layout {
        match self.isa {
            Isa::Avx2 | Isa::Avx512 => Q8Layout::Interleaved,
            _ => Q8Layout::Blocks,
        }
    }

    /// Whether [`Kernels::q32_rows`] wants a block's activation scales arranged by tile
    /// ([`crate::q8::Q8Rows::arrange_tile_scales`]) when it has several rows.
    pub fn scales_by_tile(self) -> bool {
        matches!(self.isa, Isa::Avx2 | Isa::Avx512)
    }

    /// Whether [`Kernels::q32_rows`] wants a tile's activation values arranged by tile too
    /// ([`crate::q8::Q8Rows::arrange_tile_values`]) when it has several rows.
    pub fn values_by_tile(self) -> bool {
        matches!(self.isa, Isa::Avx2 | Isa::Avx512)
    }

    /// Whether [`Kernels::q32_rows`] wants a tile's activations arranged block by block
    /// ([`crate::q8::Q8Rows::arrange_lanes`]) when it has several rows: the AVX-512
    /// kernels of [`Layout::Lanes16`].
    pub fn lanes_by_tile(self) -> bool {
        self.isa == Isa::Avx512
    }

    /// Rearranges a row's activation blocks (whole groups, the first `spans` pairs of them
    /// spans) from [`Q8Layout::Blocks`] to [`Kernels::q8_layout`].
    pub fn arrange_q8(self, blocks: &mut [[i8; 32]], spans: usize) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::interleave_blocks(blocks, spans) },
            _ => {
                let _ = (blocks, spans); // in element order already
            }
        }
    }

    /// For every weight row `r` of `w_rows` (whole rows of `row_bytes` bytes) and each of
    /// the `tile` (1..=[`TILE`]) activation rows `x[t]`: `row_r · x[t]` into `out` (see [`Out`]).
    /// Float weights against f32 activations (`x`: `[tile, cols]`).
    pub fn float_rows(self, f: FloatFormat, w_rows: &[u8], row_bytes: usize, x: &[f32], out: Out) {
        debug_assert!((1..=TILE).contains(&out.tile()));
        debug_assert_eq!(x.len(), out.tile() * (row_bytes / f.element_bytes()));
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::float_rows(f, w_rows, row_bytes, x, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::float_rows(f, w_rows, row_bytes, x, out),
            #[cfg(target_arch = "aarch64")]
            // SAFETY: every aarch64 CPU has NEON.
            Isa::Neon => unsafe { neon::float_rows(f, w_rows, row_bytes, x, out) },
            _ => each_row(w_rows, row_bytes, out, |w, o| {
                scalar::float_tile(f, w, x, o)
            }),
        }
    }

    /// Whether the kernels multiply the matrices of `format` in [`Layout::Packed`] (the x86
    /// kernels' 32-element blocks and K-quants: see [`crate::packed`] and
    /// [`crate::packed_k`]).
    pub fn packs(self, format: WeightFormat) -> bool {
        matches!(self.isa, Isa::Avx2 | Isa::Avx512)
            && matches!(format, WeightFormat::Q32(_) | WeightFormat::K(_))
    }

    /// Whether [`Kernels::k_rows`] takes its activation blocks' values in the packed
    /// registers' order ([`crate::packed_k::interleave_q8k`]).
    pub fn interleaves_q8k(self) -> bool {
        matches!(self.isa, Isa::Avx2 | Isa::Avx512)
    }

    /// The layout the kernels multiply a matrix of `format` with `rows` rows in:
    /// [`Layout::Lanes16`] for the 32-element formats on AVX-512 VNNI when the rows come in
    /// whole groups of sixteen, [`Layout::Packed`] where [`Kernels::packs`] the format
    /// otherwise, the file's order elsewhere.
    pub fn layout_for(self, format: WeightFormat, rows: usize) -> Layout {
        let lanes = crate::packed_lanes::LANES;
        match format {
            WeightFormat::Q32(_) if self.isa == Isa::Avx512 && rows.is_multiple_of(lanes) => {
                Layout::Lanes16
            }
            _ if self.packs(format) => Layout::Packed,
            _ => Layout::Gguf,
        }
    }

    /// [`Kernels::pack_into`] for `layout`: [`Layout::Lanes16`] takes whole groups of sixteen
    /// rows of a 32-element format (false, writing nothing, otherwise).
    pub fn pack_as(
        self,
        layout: Layout,
        format: WeightFormat,
        bytes: &[u8],
        row_bytes: usize,
        out: &mut [u8],
    ) -> bool {
        match (layout, format) {
            (Layout::Packed, _) => self.pack_into(format, bytes, row_bytes, out),
            (Layout::Lanes16, WeightFormat::Q32(f))
                if crate::packed_lanes::fits(f, bytes.len(), row_bytes)
                    && out.len() == bytes.len() =>
            {
                crate::packed_lanes::pack_rows(f, bytes, row_bytes, out);
                true
            }
            _ => false,
        }
    }

    /// `bytes` (rows of `row_bytes`) in [`Layout::Packed`] where [`Kernels::packs`] the format.
    pub fn pack(self, format: WeightFormat, bytes: &[u8], row_bytes: usize) -> Option<Vec<u8>> {
        let mut packed = vec![0u8; bytes.len()];
        self.pack_into(format, bytes, row_bytes, &mut packed)
            .then_some(packed)
    }

    /// [`Kernels::pack`] into `out` (as long as `bytes`); false, writing nothing, where the
    /// kernels do not pack the format or `bytes` are not whole rows.
    pub fn pack_into(
        self,
        format: WeightFormat,
        bytes: &[u8],
        row_bytes: usize,
        out: &mut [u8],
    ) -> bool {
        if !self.packs(format)
            || row_bytes == 0
            || !bytes.len().is_multiple_of(row_bytes)
            || !row_bytes.is_multiple_of(format.block_bytes())
            || out.len() != bytes.len()
        {
            return false;
        }
        match (format, self.isa) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (WeightFormat::Q32(f), Isa::Avx2 | Isa::Avx512) => unsafe {
                x86::pack_rows(f, bytes, row_bytes, out)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (WeightFormat::K(f), Isa::Avx2 | Isa::Avx512) => unsafe {
                x86::pack_k_rows(f, bytes, out)
            },
            (WeightFormat::Q32(f), _) => packed::pack_rows(f, bytes, row_bytes, out),
            (WeightFormat::K(f), _) => packed_k::pack_rows(f, bytes, out),
            (WeightFormat::Float(_), _) => return false,
        }
        true
    }

    /// As [`Kernels::float_rows`] for 32-element blocks against activation blocks
    /// (`x`: `[tile, q8_blocks_per_row]`, padded), the rows in `layout`.
    pub fn q32_rows(
        self,
        f: Q32Format,
        layout: Layout,
        w_rows: &[u8],
        row_bytes: usize,
        x: Q8Slice,
        out: Out,
    ) {
        debug_assert!((1..=TILE).contains(&out.tile()));
        debug_assert_eq!(
            x.len(),
            out.tile() * crate::q8::q8_blocks_per_row(row_bytes / f.block_bytes() * 32)
        );
        if layout == Layout::Lanes16 {
            #[cfg(target_arch = "x86_64")]
            if self.isa == Isa::Avx512 {
                if out.tile() > 1 && !x.lanes_by_tile() {
                    let arranged = x.arranged(out.tile());
                    return self.q32_rows(f, layout, w_rows, row_bytes, arranged.as_slice(), out);
                }
                // SAFETY: an Avx512 `Kernels` exists only where AVX-512 F and VNNI were
                // detected; rows in this layout are whole groups (`packed_lanes::fits`), and a
                // tile of several rows is arranged block by block (above).
                return unsafe { x86::q32_lanes::q32_rows(f, w_rows, row_bytes, x, out) };
            }
            // Other kernels (never met by the engine, which packs this layout only for these):
            // the file's order first.
            let mut rows = vec![0u8; w_rows.len()];
            crate::packed_lanes::unpack_rows(f, w_rows, row_bytes, &mut rows);
            return self.q32_rows(f, Layout::Gguf, &rows, row_bytes, x, out);
        }
        if layout == Layout::Packed && !self.packs(WeightFormat::Q32(f)) {
            // Kernels that take the file's order (never met by the engine, which packs only
            // for the kernels that multiply packed rows): unpack the rows first.
            let mut rows = vec![0u8; w_rows.len()];
            packed::unpack_rows(f, w_rows, row_bytes, &mut rows);
            return self.q32_rows(f, Layout::Gguf, &rows, row_bytes, x, out);
        }
        if self.values_by_tile() && out.tile() > 1 && !x.values_by_tile() {
            let arranged = x.arranged(out.tile());
            return self.q32_rows(f, layout, w_rows, row_bytes, arranged.as_slice(), out);
        }
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::q32_rows(f, layout, w_rows, row_bytes, x, out, false) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above (an Avx512 `Kernels` also has AVX2).
            Isa::Avx512 => unsafe { x86::q32_rows(f, layout, w_rows, row_bytes, x, out, true) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::q32_rows(f, w_rows, row_bytes, x, out),
            #[cfg(target_arch = "aarch64")]
            // SAFETY: every aarch64 CPU has NEON.
            Isa::Neon => unsafe { neon::q32_rows(f, w_rows, row_bytes, x, out) },
            _ => each_row(w_rows, row_bytes, out, |w, o| scalar::q32_tile(f, w, x, o)),
        }
    }

    /// As [`Kernels::float_rows`] for K-quant super-blocks against activation blocks of 256
    /// (`x`: `[tile, blocks]`, their values interleaved where [`Kernels::interleaves_q8k`]),
    /// the rows in `layout`.
    pub fn k_rows(
        self,
        f: KFormat,
        layout: Layout,
        w_rows: &[u8],
        row_bytes: usize,
        x: &[BlockQ8K],
        out: Out,
    ) {
        debug_assert!((1..=TILE).contains(&out.tile()));
        debug_assert_eq!(x.len(), out.tile() * (row_bytes / f.block_bytes()));
        let format = WeightFormat::K(f);
        if layout != Layout::Packed && self.packs(format) {
            // Kernels that multiply packed rows, given the file's order (never by the engine,
            // which packs at load): pack the rows first.
            let mut rows = vec![0u8; w_rows.len()];
            if self.pack_into(format, w_rows, row_bytes, &mut rows) {
                return self.k_rows(f, Layout::Packed, &rows, row_bytes, x, out);
            }
        }
        if layout == Layout::Packed && !self.packs(format) {
            // Kernels that take the file's order: unpack the rows first.
            let mut rows = vec![0u8; w_rows.len()];
            packed_k::unpack_rows(f, w_rows, &mut rows);
            return self.k_rows(f, Layout::Gguf, &rows, row_bytes, x, out);
        }
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above; the rows are packed (above).
            Isa::Avx2 => unsafe { x86::k_rows(f, w_rows, row_bytes, x, out, false) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above (an Avx512 `Kernels` also has AVX2).
            Isa::Avx512 => unsafe { x86::k_rows(f, w_rows, row_bytes, x, out, true) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::k_rows(f, w_rows, row_bytes, x, out),
            #[cfg(target_arch = "aarch64")]
            // SAFETY: every aarch64 CPU has NEON.
            Isa::Neon => unsafe { neon::k_rows(f, w_rows, row_bytes, x, out) },
            _ => each_row(w_rows, row_bytes, out, |w, o| scalar::k_tile(f, w, x, o)),
        }
    }
}

/// Rows of a matrix of `E`: row `slot` is `data[slot * stride + offset..][..len]` (one head of
/// one cache entry).
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a, E> {
    pub data: &'a [E],
    pub stride: usize,
    pub offset: usize,
    pub len: usize,
}

/// A layer's KV cache, as stored.
pub type F16Rows<'a> = Rows<'a, half::f16>;
/// One KV head's rows widened to f32 ([`Kernels::widen`]).
pub type F32Rows<'a> = Rows<'a, f32>;

impl<'a, E> Rows<'a, E> {
    pub fn row(&self, slot: usize) -> &'a [E] {
        &self.data[slot * self.stride + self.offset..][..self.len]
    }

    /// Rows of `len` elements one after another (`data`: `[rows, len]`).
    pub fn dense(data: &'a [E], len: usize) -> Self {
        Rows {
            data,
            stride: len,
            offset: 0,
            len,
        }
    }

    /// The rows from `first` on: row `s` of the result is row `first + s`.
    pub fn from_slot(&self, first: usize) -> Self {
        Rows {
            data: &self.data[first * self.stride..],
            ..*self
        }
    }
}

/// An element of attention's rows: f16 as the cache stores it, or f32 once widened (exactly).
pub trait Widen: Copy {
    fn widen(self) -> f32;
}

impl Widen for half::f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl Widen for f32 {
    fn widen(self) -> f32 {
        self
    }
}

impl Kernels {
    /// Attention scores of one head: `out[j] = dot(q, k.row(slots[j])) * scale`, each dot in
    /// the eight-lane order of the float products.
    pub fn scores(self, q: &[f32], k: F16Rows, slots: &[usize], scale: f32, out: &mut Vec<f32>) {
        debug_assert_eq!(q.len(), k.len);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::scores(q, k, slots, scale, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::scores(q, k, slots, scale, out),
            #[cfg(target_arch = "aarch64")]
            // SAFETY: every aarch64 CPU has NEON.
            Isa::Neon => unsafe { neon::scores(q, k, slots, scale, out) },
            _ => scalar::scores(q, k, slots, scale, out),
        }
    }

    /// `x[i] = exp(x[i] - max)` with `f32::exp`'s bits (on x86 eight at a time, glibc's `expf`
    /// replicated: see `x86::exp`).
    pub fn exp_minus(self, x: &mut [f32], max: f32) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::exp_minus(x, max) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 => unsafe { x86::exp_minus_avx512(x, max) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::exp_minus(x, max),
            _ => {
                for v in x.iter_mut() {
                    *v = (*v - max).exp();
                }
            }
        }
    }

    /// `g[i] = silu(g[i]) * u[i]` with [`crate::ops::silu`]'s bits (`g`, `u`: one row each).
    pub fn silu_mul(self, g: &mut [f32], u: &[f32]) {
        debug_assert_eq!(g.len(), u.len());
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::silu_mul(g, u) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 => unsafe { x86::silu_mul_avx512(g, u) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::silu_mul(g, u),
            _ => {
                for (g, &u) in g.iter_mut().zip(u) {
                    *g = crate::ops::silu(*g) * u;
                }
            }
        }
    }

    /// Attention output of one head: `out[e] += p[j] * v.row(slots[j])[e]`, slot after slot
    /// (a product rounded, then added).
    pub fn weighted_sum(self, v: F16Rows, slots: &[usize], p: &[f32], out: &mut [f32]) {
        debug_assert_eq!(out.len(), v.len);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::weighted_sum(v, slots, p, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::weighted_sum(v, slots, p, out),
            #[cfg(target_arch = "aarch64")]
            // SAFETY: every aarch64 CPU has NEON.
            Isa::Neon => unsafe { neon::weighted_sum(v, slots, p, out) },
            _ => scalar::weighted_sum(v, slots, p, out),
        }
    }
}

/// Where a kernel writes: weight row `r` times tile row `t` goes to `rows[t][r]`, each tile
/// row's outputs for the weight rows at hand, in the `[n, rows]` order the caller keeps (so
/// nothing is transposed after).
pub struct Out<'a, 'b> {
    rows: &'a mut [&'b mut [f32]], // [tile][weight rows]
}

impl<'a, 'b> Out<'a, 'b> {
    /// Outputs for a tile of `rows.len()` (1..=[`TILE`]) activation rows.
    pub fn new(rows: &'a mut [&'b mut [f32]]) -> Self {
        debug_assert!((1..=TILE).contains(&rows.len()));
        Out { rows }
    }

    /// Activation rows in the tile.
    pub fn tile(&self) -> usize {
        self.rows.len()
    }

    /// Tile row `t`'s outputs, one per weight row.
    #[inline]
    pub fn row(&mut self, t: usize) -> &mut [f32] {
        self.rows[t]
    }

    /// Weight row `r`'s products with the tile's rows (`values[t]` for tile row `t`).
    #[inline]
    pub fn put(&mut self, r: usize, values: &[f32]) {
        debug_assert_eq!(values.len(), self.rows.len());
        for (row, &v) in self.rows.iter_mut().zip(values) {
            row[r] = v;
        }
    }
}

/// Calls `kernel(weight row, its outputs)` for every row.
pub(crate) fn each_row(
    w_rows: &[u8],
    row_bytes: usize,
    mut out: Out,
    mut kernel: impl FnMut(&[u8], &mut [f32]),
) {
    let tile = out.tile();
    for (r, w) in w_rows.chunks_exact(row_bytes).enumerate() {
        let mut values = [0f32; TILE];
        kernel(w, &mut values[..tile]);
        out.put(r, &values[..tile]);
    }
}
