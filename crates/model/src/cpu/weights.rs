use runahead_gguf::GgufFile;

use crate::{check_tensors, ModelConfig, ModelError, Result, TensorNames};

/// A weight matrix decoded to f32: `[rows, cols]` row-major, one row per output feature.
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

pub struct QkvBias {
    pub q: Vec<f32>, // [n_embd]
    pub k: Vec<f32>, // [kv_dim]
    pub v: Vec<f32>, // [kv_dim]
}

pub struct LayerWeights {
    pub attn_norm: Vec<f32>, // [n_embd]
    pub wq: Matrix,          // [n_embd, n_embd]
    pub wk: Matrix,          // [kv_dim, n_embd]
    pub wv: Matrix,          // [kv_dim, n_embd]
    pub qkv_bias: Option<QkvBias>,
    pub wo: Matrix,         // [n_embd, n_embd]
    pub ffn_norm: Vec<f32>, // [n_embd]
    pub w_gate: Matrix,     // [n_ff, n_embd]
    pub w_up: Matrix,       // [n_ff, n_embd]
    pub w_down: Matrix,     // [n_embd, n_ff]
}

/// All weights of a model, decoded to f32.
pub struct CpuWeights {
    pub config: ModelConfig,
    pub token_embd: Matrix, // [vocab, n_embd]
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>, // [n_embd]
    /// `[vocab, n_embd]`; `None` when tied to `token_embd`.
    pub output: Option<Matrix>,
}

impl CpuWeights {
    pub fn load(file: &GgufFile) -> Result<Self> {
        let config = ModelConfig::from_file(file)?;
        let c = &config;
        // Every tensor's presence, shape and type before the first is decoded, and what the
        // f32 copies will take (usize is 32 bits on wasm32).
        check_tensors(file, c)?;
        f32_bytes(file, c)?;
        let (d, kv, ff, vocab) = (c.n_embd, c.kv_dim(), c.n_ff, c.vocab_size);
        let layers = (0..c.n_layers)
            .map(|i| {
                let name = |w: &str| TensorNames::layer(i, w);
                Ok(LayerWeights {
                    attn_norm: vector(file, &name("attn_norm.weight"), d)?,
                    wq: matrix(file, &name("attn_q.weight"), d, d)?,
                    wk: matrix(file, &name("attn_k.weight"), kv, d)?,
                    wv: matrix(file, &name("attn_v.weight"), kv, d)?,
                    qkv_bias: if c.qkv_bias {
                        Some(QkvBias {
                            q: vector(file, &name("attn_q.bias"), d)?,
                            k: vector(file, &name("attn_k.bias"), kv)?,
                            v: vector(file, &name("attn_v.bias"), kv)?,
                        })
                    } else {
                        None
                    },
                    wo: matrix(file, &name("attn_output.weight"), d, d)?,
                    ffn_norm: vector(file, &name("ffn_norm.weight"), d)?,
                    w_gate: matrix(file, &name("ffn_gate.weight"), ff, d)?,
                    w_up: matrix(file, &name("ffn_up.weight"), ff, d)?,
                    w_down: matrix(file, &name("ffn_down.weight"), d, ff)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = match file.header.tensor(TensorNames::OUTPUT) {
            Some(_) => Some(matrix(file, TensorNames::OUTPUT, vocab, d)?),
            None => None,
        };
        Ok(CpuWeights {
            token_embd: matrix(file, TensorNames::TOKEN_EMBD, vocab, d)?,
            output_norm: vector(file, TensorNames::OUTPUT_NORM, d)?,
            output,
            layers,
            config,
        })
    }
}

/// Bytes of the f32 copies of every weight, refused when this platform cannot address them.
fn f32_bytes(file: &GgufFile, c: &ModelConfig) -> Result<usize> {
    let separate_output = file.header.tensor(TensorNames::OUTPUT).is_some();
    let elements = c.tensors(separate_output).try_fold(0u64, |acc, t| {
        t.shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .and_then(|n| acc.checked_add(n))
    });
    elements
        .and_then(|n| n.checked_mul(4))
        .filter(|&bytes| bytes <= isize::MAX as u64)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| {
            ModelError::Config(format!(
                "the f32 reference needs {} weights as f32, more than this platform can address",
                elements.map_or("over 2^64".to_string(), |n| n.to_string())
            ))
        })
}

/// Checks a tensor's GGML shape (`[cols, rows]`, or `[len]`) and type, then decodes it.
fn decode(file: &GgufFile, name: &str, shape: &[u64]) -> Result<Vec<f32>> {
    let info = file.tensor_info(name)?;
    if info.shape != shape {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: shape.to_vec(),
            found: info.shape.clone(),
        });
    }
    if !info.ty.is_supported() {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_owned(),
            ty: info.ty,
        });
    }
    Ok(file.tensor_f32(name)?)
}

fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    decode(file, name, &[len as u64])
}

fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
    let data = decode(file, name, &[cols as u64, rows as u64])?;
    Ok(Matrix { rows, cols, data })
}
