//! Weight-row x activation-tile kernels, one module per instruction set. [`scalar`] defines
//! what each computes (reduction orders included); a SIMD module must return the same bits,
//! which the kernel tests check on every format.
//!
//! To add an instruction set (aarch64 NEON, wasm32 simd128): a module beside `avx2` with the
//! three `*_tile` functions, an [`Isa`] variant, its detection in [`Isa::is_available`], and
//! its arm in the dispatch below.

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod scalar;

use crate::activations::{BlockQ8, BlockQ8K};
use crate::formats::{FloatFormat, KFormat, Q32Format};

/// Activation rows a kernel multiplies by one decoded weight row at once (each weight block is
/// decoded once per tile). More rows are computed tile after tile with the same result.
pub const TILE: usize = 8;

/// Environment variable that forces the portable kernels (`RUNAHEAD_CPU_KERNELS=scalar`).
pub const KERNELS_ENV: &str = "RUNAHEAD_CPU_KERNELS";

/// An instruction set the kernels are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, every target.
    Scalar,
    /// x86-64 AVX2 with FMA and F16C (runtime-detected).
    Avx2,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
        }
    }

    /// Whether this machine can run the set.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 => false,
        }
    }

    /// The fastest available set, unless [`KERNELS_ENV`] says `scalar`.
    pub fn best() -> Isa {
        if std::env::var(KERNELS_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("scalar")) {
            return Isa::Scalar;
        }
        [Isa::Avx2]
            .into_iter()
            .find(|isa| isa.is_available())
            .unwrap_or(Isa::Scalar)
    }
}

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

    /// `out[t] = w_row · x[t]` for a float weight row and `out.len()` (1..=[`TILE`]) rows of
    /// f32 activations (`x`: `[out.len(), cols]`).
    pub fn float_tile(self, f: FloatFormat, w_row: &[u8], x: &[f32], out: &mut [f32]) {
        debug_assert!((1..=TILE).contains(&out.len()));
        debug_assert_eq!(x.len(), out.len() * (w_row.len() / f.element_bytes()));
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
            Isa::Avx2 => unsafe { avx2::float_tile(f, w_row, x, out) },
            _ => scalar::float_tile(f, w_row, x, out),
        }
    }

    /// `out[t] = w_row · x[t]` for a row of 32-element blocks and `out.len()` rows of
    /// activation blocks (`x`: `[out.len(), blocks]`).
    pub fn q32_tile(self, f: Q32Format, w_row: &[u8], x: &[BlockQ8], out: &mut [f32]) {
        debug_assert!((1..=TILE).contains(&out.len()));
        debug_assert_eq!(x.len(), out.len() * (w_row.len() / f.block_bytes()));
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
            Isa::Avx2 => unsafe { avx2::q32_tile(f, w_row, x, out) },
            _ => scalar::q32_tile(f, w_row, x, out),
        }
    }

    /// `out[t] = w_row · x[t]` for a row of K-quant super-blocks and `out.len()` rows of
    /// activation blocks of 256 (`x`: `[out.len(), blocks]`).
    pub fn k_tile(self, f: KFormat, w_row: &[u8], x: &[BlockQ8K], out: &mut [f32]) {
        debug_assert!((1..=TILE).contains(&out.len()));
        debug_assert_eq!(x.len(), out.len() * (w_row.len() / f.block_bytes()));
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a `Kernels` of Avx2 exists only where its features were detected.
            Isa::Avx2 => unsafe { avx2::k_tile(f, w_row, x, out) },
            _ => scalar::k_tile(f, w_row, x, out),
        }
    }
}
