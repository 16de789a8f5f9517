//! One entry of a GGUF file's tensor table: what the reader parses and the limits count.

use crate::GgmlType;

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGML order: `shape[0]` is the innermost (contiguous) dimension. A weight matrix of a
    /// linear layer from `in` to `out` features has shape `[in, out]`.
    pub shape: Vec<u64>,
    pub ty: GgmlType,
    /// Offset of the first byte relative to the start of the data section.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements. Parsing checked that it fits in u64; for a `TensorInfo` built by
    /// hand, an overflowing product saturates instead of wrapping or panicking.
    pub fn n_elements(&self) -> u64 {
        checked_product(&self.shape).unwrap_or(u64::MAX)
    }

    /// Number of rows (product of all but the first dimension), saturating like
    /// [`TensorInfo::n_elements`].
    pub fn n_rows(&self) -> u64 {
        checked_product(self.shape.get(1..).unwrap_or(&[])).unwrap_or(u64::MAX)
    }
}

pub(crate) fn checked_product(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}
