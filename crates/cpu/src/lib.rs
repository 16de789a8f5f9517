//! The CPU engine users run: weights stay in their GGUF block formats (memory is the file, the
//! KV cache and small buffers) and are decoded inside batch-invariant matrix products, with
//! SIMD kernels where the machine has them and threads splitting output rows.
//!
//! `runahead_model::CpuModel`, the f32 reference, is the oracle its tests compare against.
//! Where the two differ: the products quantize their input to 8 bits per block of 32 (256 for
//! K-quant weights) as llama.cpp does, so integer products are exact and every instruction set
//! gives the same bits; the KV cache is stored in f16 (the reference rounds to f16 too).

pub mod activations;
pub mod aligned;
mod attention;
mod engine;
mod error;
pub mod formats;
pub mod kernels;
mod kv_cache;
pub mod layout;
pub mod matmul;
mod ops;
pub mod packed;
pub mod packed_k;
pub mod packed_lanes;
pub mod pool;
pub mod q8;
mod weights;

pub use engine::{default_threads, CpuEngine, CpuOptions};
pub use error::CpuError;
pub use kernels::{Isa, Kernels};
