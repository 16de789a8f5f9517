//! The instruction sets the kernels are written for: which this machine runs, which is
//! fastest, and (for tests) which this target has and the CPU lacks.

use super::Kernels;

/// Environment variable that forces the portable kernels (`RUNAHEAD_CPU_KERNELS=scalar`).
pub const KERNELS_ENV: &str = "RUNAHEAD_CPU_KERNELS";

/// Whether this crate is built with WebAssembly relaxed SIMD. scripts/wasm.sh enables it for
/// this crate alone, so a dependent crate's own `cfg!` does not see it: it asks here.
pub const RELAXED_SIMD: bool = cfg!(all(target_arch = "wasm32", target_feature = "relaxed-simd"));

/// An instruction set the kernels are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, every target.
    Scalar,
    /// x86-64 AVX2 with FMA and F16C (runtime-detected).
    Avx2,
    /// x86-64 AVX-512 VNNI (with F and VL), besides AVX2: the `Avx2` kernels with the byte
    /// products of the 32-element formats summed by 256-bit `vpdpbusd` (one instruction where
    /// AVX2 takes two, the same exact sums).
    Avx512,
    /// wasm32 SIMD, where the build enables `simd128` (WebAssembly cannot detect it at run
    /// time: a module that uses it does not load where it is missing).
    Simd128,
    /// aarch64 NEON (part of every aarch64 CPU).
    Neon,
}

impl Isa {
    /// Every set the kernels are written for (the tests try each this machine has).
    pub const ALL: [Isa; 5] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Simd128, Isa::Neon];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512vnni",
            // The build decides (WebAssembly has no runtime detection): the package loads the
            // relaxed SIMD build where the browser validates it.
            Isa::Simd128 if RELAXED_SIMD => "simd128+relaxed",
            Isa::Simd128 => "simd128",
            Isa::Neon => "neon",
        }
    }

    /// Whether the set's kernels are compiled for this target (x86-64's on x86-64, NEON on
    /// aarch64, SIMD128 on wasm32, the scalar ones everywhere): such a set that
    /// [`Isa::is_available`] denies is one this CPU (or this wasm build) lacks.
    pub fn is_of_this_target(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 | Isa::Avx512 => cfg!(target_arch = "x86_64"),
            Isa::Simd128 => cfg!(target_arch = "wasm32"),
            Isa::Neon => cfg!(target_arch = "aarch64"),
        }
    }

    /// The kernels of each set in `sets` this machine runs, for a test named `test`; each set
    /// of this target it cannot run is said on the test's output (`skipped: <test>: this CPU
    /// lacks <set>`), so that a passing test never hides that it checked fewer sets than it
    /// names.
    pub fn kernels_for_test(test: &str, sets: &[Isa]) -> Vec<Kernels> {
        let mut kernels = Vec::new();
        for &isa in sets {
            match Kernels::new(isa) {
                Some(k) => kernels.push(k),
                None if isa == Isa::Simd128 && isa.is_of_this_target() => {
                    println!("skipped: {test}: this build lacks {}", isa.name())
                }
                None if isa.is_of_this_target() => {
                    println!("skipped: {test}: this CPU lacks {}", isa.name())
                }
                None => {}
            }
        }
        kernels
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
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
            Isa::Simd128 => cfg!(all(target_arch = "wasm32", target_feature = "simd128")),
            Isa::Neon => cfg!(target_arch = "aarch64"),
        }
    }

    /// The fastest available set, unless [`KERNELS_ENV`] says `scalar`.
    pub fn best() -> Isa {
        if std::env::var(KERNELS_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("scalar")) {
            return Isa::Scalar;
        }
        [Isa::Avx512, Isa::Avx2, Isa::Simd128, Isa::Neon]
            .into_iter()
            .find(|isa| isa.is_available())
            .unwrap_or(Isa::Scalar)
    }
}
