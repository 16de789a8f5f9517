//! The CPU engine users run: weights stay in their GGUF block formats (memory is the file, the
//! KV cache and small buffers) and are decoded inside batch-invariant matrix products, with
//! SIMD kernels where the machine has them and threads splitting output rows.
//!
//! `runahead_model::CpuModel`, the f32 reference, is the oracle its tests compare against.
//! Where the two differ: the products quantize their input to 8 bits per block of 32 (256 for
//! K-quant weights) as llama.cpp does, so integer products are exact and every instruction set
//! gives the same bits; the KV cache is stored in f16 (the reference rounds to f16 too).
//!
//! # Terms used throughout the crate
//!
//! - **block**: the unit of a GGUF quantized format, one scale (and for some formats an offset)
//!   with its values: 32 elements for the **q32** formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//!   [`formats::Q32Format`]), 256 for the **K-quants** (Q4_K, Q5_K, Q6_K, [`formats::KFormat`],
//!   whose blocks are also called super-blocks).
//! - **q8**, **q8k**: activations quantized to 8 bits per block of 32 ([`q8::Q8Rows`]) or 256
//!   ([`q8::BlockQ8K`]), what the q32 and the K-quant weights are multiplied by.
//! - **group**: [`layout::GROUP`] (four) consecutive blocks of 32, the unit the SIMD kernels
//!   take without a tail (activation rows are padded to whole groups). **span**: [`layout::SPAN`]
//!   (eight) blocks, two groups, whose eight whole-block sums fill one 256-bit register.
//!   **pair**: a group of which only two blocks are real (a row's tail of two blocks); in the
//!   AVX-512 kernels also two activation rows side by side in one 512-bit register; in
//!   attention, a (token, query head) pair.
//! - **tile**: up to [`layout::TILE`] (eight) activation rows multiplied by one decoded weight
//!   row at once, so a weight block is decoded once per tile.
//! - **layout** ([`layout::Layout`]): the byte order of a weight matrix. **Gguf**: as in the
//!   file. **packed** ([`packed`], [`packed_k`]): rearranged at load so that the x86 kernels
//!   decode a span or group with loads, shifts and masks; the same bytes, the same values.
//!   **lanes** ([`packed_lanes`], `Lanes16`): sixteen weight rows side by side, one per 32-bit
//!   lane of a 512-bit register, for the AVX-512 VNNI kernels. The activations have layouts of
//!   their own ([`layout::Q8Layout`]): blocks in element order, or **interleaved** so that the
//!   byte products leave whole-block sums in a register's lanes.
//! - **widened**: a KV head's f16 cache rows converted to f32 once, for attention over it
//!   ([`kernels::Kernels::widens_kv`]), rather than read and converted in each pass.
//! - **unit**: a share of a step's work that one thread takes whole (output rows of a product,
//!   the (token, head) pairs of one KV head in attention); **team**: the threads of a forward
//!   ([`pool`]).
//!
//! # Modules from the bottom up
//!
//! [`layout`] (the shapes everything agrees on) and [`formats`]; [`q8`] (quantized activations)
//! and the weight layouts [`packed`], [`packed_k`], [`packed_lanes`]; [`kernels`] (one module per
//! instruction set: `scalar`, `x86` for AVX2 and AVX-512, `neon`, `simd128`); [`activations`]
//! (a product's input, quantized by the kernels in use); [`matmul`], attention and the engine.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

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
pub use kernels::{Isa, Kernels, RELAXED_SIMD};
pub use weights::STEPS;
