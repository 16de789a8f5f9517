//! x86-64 AVX-512 with VNNI (`vpdpbusd`): 32-element block products two blocks per
//! instruction, on activations moved to unsigned bytes (x + 128) with the weights' sums taking
//! the 128 back out, so every format is one exact integer instruction per pair of blocks. The
//! reduction and float steps land on [`super::scalar::q32_tile`]'s lanes and order, so the
//! results are the scalar kernels' bits (tested like every SIMD set). Float rows, K-quants and
//! attention run the AVX2 kernels, which every AVX-512 machine also has.

mod decode;
mod q32;

pub use q32::q32_rows;
