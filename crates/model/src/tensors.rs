//! The tensors a model of a given config reads, each with the shape it must have. Every engine
//! checks the whole list against the file before it allocates anything for the model, so a file
//! whose metadata promises what its tensors do not hold fails before a byte is spent on it.

use runahead_gguf::{Gguf, GgufError, GgufFile};

use crate::{ModelConfig, ModelError, Result, TensorNames};

/// One tensor an engine reads: its GGUF name and GGML shape (`[cols, rows]` for a matrix whose
/// rows are output features, `[len]` for a vector).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<u64>,
}

impl TensorSpec {
    fn matrix(name: String, rows: usize, cols: usize) -> Self {
        TensorSpec {
            name,
            shape: vec![cols as u64, rows as u64],
        }
    }

    fn vector(name: String, len: usize) -> Self {
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

impl ModelConfig {
    /// Every tensor a model with this config reads, in load order, made one at a time (a
    /// file may claim any number of layers: a check stops at the first tensor it lacks).
    /// `separate_output`: the file has its own `output.weight` (otherwise the output
    /// projection is the token embedding).
    pub fn tensors(&self, separate_output: bool) -> impl Iterator<Item = TensorSpec> + '_ {
        let (d, kv, ff, vocab) = (self.n_embd, self.kv_dim(), self.n_ff, self.vocab_size);
        let layers = (0..self.n_layers).flat_map(move |l| {
            let name = move |w: &str| TensorNames::layer(l, w);
            let bias = self.qkv_bias.then(|| {
                [
                    TensorSpec::vector(name("attn_q.bias"), d),
                    TensorSpec::vector(name("attn_k.bias"), kv),
                    TensorSpec::vector(name("attn_v.bias"), kv),
                ]
            });
            [
                TensorSpec::vector(name("attn_norm.weight"), d),
                TensorSpec::matrix(name("attn_q.weight"), d, d),
                TensorSpec::matrix(name("attn_k.weight"), kv, d),
                TensorSpec::matrix(name("attn_v.weight"), kv, d),
            ]
            .into_iter()
            .chain(bias.into_iter().flatten())
            .chain([
                TensorSpec::matrix(name("attn_output.weight"), d, d),
                TensorSpec::vector(name("ffn_norm.weight"), d),
                TensorSpec::matrix(name("ffn_gate.weight"), ff, d),
                TensorSpec::matrix(name("ffn_up.weight"), ff, d),
                TensorSpec::matrix(name("ffn_down.weight"), d, ff),
            ])
        });
        std::iter::once(TensorSpec::matrix(TensorNames::TOKEN_EMBD.into(), vocab, d))
            .chain(layers)
            .chain(std::iter::once(TensorSpec::vector(
                TensorNames::OUTPUT_NORM.into(),
                d,
            )))
            .chain(
                separate_output.then(|| TensorSpec::matrix(TensorNames::OUTPUT.into(), vocab, d)),
            )
    }
}

/// Checks that `file` holds every tensor `config` reads, with its shape and a type the engines
/// decode, before anything is allocated for them. The tensor table itself was checked when the
/// file was parsed (every tensor lies inside the file), so the sizes added here are real.
pub fn check_tensors(file: &GgufFile, config: &ModelConfig) -> Result<TensorTotals> {
    check_header_tensors(&file.header, config)
}

/// [`check_tensors`] from the file's header alone (its tensor table, as
/// [`Gguf::parse_prefix`] reads it before the tensor data, every tensor checked against the
/// file's size).
pub fn check_header_tensors(header: &Gguf, config: &ModelConfig) -> Result<TensorTotals> {
    let separate_output = header.tensor(TensorNames::OUTPUT).is_some();
    let mut totals = TensorTotals {
        file_bytes: 0,
        vector_elements: 0,
    };
    for spec in config.tensors(separate_output) {
        let info = header
            .tensor(&spec.name)
            .ok_or_else(|| GgufError::MissingTensor(spec.name.clone()))?;
        if info.shape != spec.shape {
            return Err(ModelError::TensorShape {
                name: spec.name,
                expected: spec.shape,
                found: info.shape.clone(),
            });
        }
        if !info.ty.is_supported() {
            return Err(ModelError::UnsupportedTensorType {
                name: spec.name,
                ty: info.ty,
            });
        }
        totals.file_bytes = totals.file_bytes.saturating_add(info.size);
        if spec.shape.len() == 1 {
            totals.vector_elements = totals.vector_elements.saturating_add(spec.shape[0]);
        }
    }
    Ok(totals)
}
