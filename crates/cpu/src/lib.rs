//! The CPU engine users run: weights stay in their GGUF block formats (memory is the file, the
//! KV cache and small buffers) and are decoded inside batch-invariant matrix products, with
//! SIMD kernels where the machine has them and threads splitting output rows.
//!
//! `runahead_model::CpuModel`, the f32 reference, is the oracle its tests compare against.

pub mod activations;
mod error;
pub mod formats;
pub mod kernels;
pub mod matmul;
pub mod pool;

pub use error::CpuError;
pub use kernels::{Isa, Kernels};
