use runahead_gguf::GgmlType;
use runahead_model::ModelError;

/// Errors of the GPU engine.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GpuError {
    #[error(
        "no GPU adapter found{0} (WebGPU unavailable? in a browser, check that WebGPU is enabled)"
    )]
    NoAdapter(String),
    #[error("the GPU adapter refused a device: {0}")]
    RequestDevice(String),
    #[error("the GPU adapter's {limit} is {available}, but this model needs {needed}")]
    LimitTooSmall {
        limit: &'static str,
        needed: u64,
        available: u64,
    },
    #[error("tensor '{name}' has type {ty}, which the GPU engine cannot decode")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error(
        "the model needs {needed} bytes of GPU memory (weights {weights}, KV cache {kv_cache}, \
         activations {activations}), more than the budget of {budget}: use a smaller context"
    )]
    OverMemoryBudget {
        needed: u64,
        budget: u64,
        weights: u64,
        kv_cache: u64,
        activations: u64,
    },
    #[error("the GPU ran out of memory: {0}")]
    OutOfMemory(String),
    #[error("GPU validation error: {0}")]
    Validation(String),
    #[error("reading results back from the GPU failed: {0}")]
    Readback(String),
}

impl From<GpuError> for ModelError {
    fn from(e: GpuError) -> Self {
        ModelError::Backend(Box::new(e))
    }
}
