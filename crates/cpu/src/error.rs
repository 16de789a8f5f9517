use runahead_gguf::GgmlType;
use runahead_model::ModelError;

/// Errors of the CPU engine's own making; everything else is a [`ModelError`].
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error(
        "matrix '{name}': {rows} x {cols} in {ty} needs {expected} bytes, the tensor has {found}"
    )]
    MatrixSize {
        name: String,
        rows: usize,
        cols: usize,
        ty: GgmlType,
        expected: u64,
        found: usize,
    },
    #[error("matrix '{name}': its type {ty} has no matrix kernel")]
    UnsupportedFormat { name: String, ty: GgmlType },
    #[error("the {0} kernels are not available on this machine")]
    KernelsUnavailable(&'static str),
    #[error("invalid option: {0}")]
    Option(String),
}

impl From<CpuError> for ModelError {
    fn from(e: CpuError) -> Self {
        match e {
            CpuError::UnsupportedFormat { name, ty } => {
                ModelError::UnsupportedTensorType { name, ty }
            }
            other => ModelError::Backend(Box::new(other)),
        }
    }
}
