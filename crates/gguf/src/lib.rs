//! GGUF files: header, metadata, tensor table, and the GGML block formats with their CPU
//! dequantization.
//!
//! Parsing never trusts a count or an offset from the file: every length is checked against
//! the bytes that remain before anything is allocated, so a truncated or hostile file yields a
//! [`GgufError`], never a panic or a huge allocation. Beyond that, metadata arrays nest at most
//! [`MAX_ARRAY_DEPTH`] deep and the parsed header may take at most a budget of memory
//! ([`DEFAULT_HEADER_BUDGET`], see [`Gguf::parse_with_budget`]), so a small hostile file
//! cannot overflow the stack or make the parser allocate many times its size.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

mod array;
mod blocks;
mod error;
mod file;
mod limits;
mod metadata;
mod reader;
mod tensor_data;
mod tensor_info;
mod types;
mod widen;
mod writer;

pub use array::{Array, Strings};
pub use blocks::{dequantize, dequantize_row};
pub use error::GgufError;
pub use file::{GgufFile, Storage};
pub use limits::{DEFAULT_HEADER_BUDGET, MAX_ARRAY_DEPTH};
pub use metadata::{Metadata, Value, ValueType};
pub use reader::Gguf;
pub use tensor_data::TensorData;
pub use tensor_info::TensorInfo;
pub use types::GgmlType;
pub use widen::{widen_to_q8_0, widens_to_q8_0};
pub use writer::GgufWriter;

pub type Result<T, E = GgufError> = std::result::Result<T, E>;

/// The magic at offset 0 of every GGUF file: "GGUF" in ASCII.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
