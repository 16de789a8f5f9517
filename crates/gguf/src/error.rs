use crate::GgmlType;

/// Everything that can be wrong with a GGUF file or a request against it.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GgufError {
    #[error("not a GGUF file (magic bytes {0:02x?}, expected \"GGUF\")")]
    BadMagic([u8; 4]),
    #[error("unsupported GGUF version {0} (supported: 2, 3)")]
    UnsupportedVersion(u32),
    #[error("GGUF file is truncated: needed {needed} bytes for {what} at offset {offset}, file has {len}")]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        len: u64,
    },
    #[error("invalid UTF-8 in {what} at offset {offset}")]
    InvalidUtf8 { what: String, offset: u64 },
    #[error("metadata key '{key}' nests arrays more than {limit} deep")]
    ArraysTooDeep { key: String, limit: u32 },
    /// Parsing would take more memory than the budget (see `Gguf::parse_with_budget`).
    #[error(
        "the GGUF header needs {needed} bytes of memory by {what}, more than the limit of {limit}"
    )]
    HeaderTooLarge {
        what: String,
        needed: u64,
        limit: u64,
    },
    #[error("unknown metadata value type {ty} for key '{key}'")]
    UnknownValueType { key: String, ty: u32 },
    #[error("tensor '{name}' has unknown GGML type id {id}")]
    UnknownTensorType { name: String, id: u32 },
    #[error("tensor '{name}' has {n_dims} dimensions (at most 4 are allowed)")]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor '{name}': shape {shape:?} is invalid for {ty} ({reason})")]
    BadShape {
        name: String,
        shape: Vec<u64>,
        ty: GgmlType,
        reason: String,
    },
    #[error("tensor '{name}' (bytes {start}..{end}) lies outside the file's data section of {data_len} bytes")]
    TensorOutOfBounds {
        name: String,
        start: u64,
        end: u64,
        data_len: u64,
    },
    #[error("tensor '{name}' offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor '{0}' appears twice in the tensor table")]
    DuplicateTensor(String),
    #[error("invalid general.alignment {0} (must be a power of two)")]
    BadAlignment(u64),
    #[error("metadata key '{0}' appears twice")]
    DuplicateKey(String),
    #[error("metadata key '{key}' is missing")]
    MissingKey { key: String },
    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongValueType {
        key: String,
        expected: String,
        found: String,
    },
    #[error("tensor '{0}' not found")]
    MissingTensor(String),
    #[error("tensor type {0} is not supported for dequantization")]
    UnsupportedType(GgmlType),
    #[error("{0}")]
    Io(String),
}

impl GgufError {
    /// For [`GgufError::Truncated`]: how many bytes from the file's start the part that was cut
    /// off needs at least (a header read from a prefix of the file: read at least this many).
    pub fn bytes_needed(&self) -> Option<u64> {
        match self {
            GgufError::Truncated { offset, needed, .. } => Some(offset.saturating_add(*needed)),
            _ => None,
        }
    }
}
