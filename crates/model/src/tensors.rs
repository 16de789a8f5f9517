//! The tensors a model of a given config reads, each with the shape it must have. Every engine
//! checks the whole list against the file before it allocates anything for the model, so a file
//! whose metadata promises what its tensors do not hold fails before a byte is spent on it.

use runahead_gguf::{Gguf, GgufFile};

use crate::{ModelConfig, ModelError, Plan, Result};

/// One tensor an engine reads: its GGUF name and GGML shape (`[cols, rows]` for a matrix whose
/// rows are output features, `[len]` for a vector).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<u64>,
}

impl TensorSpec {
    pub(crate) fn matrix(name: String, rows: usize, cols: usize) -> Self {
        TensorSpec {
            name,
            shape: vec![cols as u64, rows as u64],
        }
    }

    pub(crate) fn vector(name: String, len: usize) -> Self {
        TensorSpec {
            name,
            shape: vec![len as u64],
        }
    }
}

/// What [`check_tensors`] found: the tensors' total size in the file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorTotals {
    /// Bytes of every tensor the model reads, as stored in the file.
    pub file_bytes: u64,
    /// Number of elements of the vectors (norms, biases), which engines keep as f32.
    pub vector_elements: u64,
}

/// Checks that `file` holds every tensor `config` reads, with its shape and a type the engines
/// decode, before anything is allocated for them. The tensor table itself was checked when the
/// file was parsed (every tensor lies inside the file), so the sizes added here are real.
pub fn check_tensors(file: &GgufFile, config: &ModelConfig) -> Result<TensorTotals> {
    check_header_tensors(&file.header, config)
}

/// [`check_tensors`] from the file's header alone (its tensor table, as
/// [`Gguf::parse_prefix`] reads it before the tensor data, every tensor checked against the
/// file's size). For an engine that runs llama-style layers only (see
/// [`ModelConfig::from_file`]); every tensor of the file must be one `config`'s model reads.
pub fn check_header_tensors(header: &Gguf, config: &ModelConfig) -> Result<TensorTotals> {
    check_header_tensors_for(header, config, "this engine", &[])
}

/// [`check_header_tensors`] for an engine that executes `steps` of a [`Plan`] beyond the
/// llama-style layer (see [`ModelConfig::for_engine`]).
pub fn check_header_tensors_for(
    header: &Gguf,
    config: &ModelConfig,
    engine: &str,
    steps: &[crate::Step],
) -> Result<TensorTotals> {
    let plan = Plan::from_header(header)?;
    plan.require(engine, steps)?;
    if plan.config != *config {
        return Err(ModelError::Config(
            "the configuration checked is not this file's".into(),
        ));
    }
    plan.check_header(header)
}
