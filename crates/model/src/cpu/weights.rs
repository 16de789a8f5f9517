use runahead_gguf::GgufFile;

use crate::{ModelConfig, ModelError, Plan, Result, RopeFactors, Step, Tensor, TensorNames};

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
    pub q: Vec<f32>, // [q_dim]
    pub k: Vec<f32>, // [kv_dim]
    pub v: Vec<f32>, // [kv_dim]
}

/// Q, K and V projections: separate, or one matrix whose rows are Q's, K's, then V's.
pub enum Qkv {
    Separate { q: Matrix, k: Matrix, v: Matrix },
    Fused(Matrix),
}

/// Gate and up projections: separate, or one matrix of twice the rows, gate first.
pub enum GateUp {
    Separate { gate: Matrix, up: Matrix },
    Fused(Matrix),
}

pub struct LayerWeights {
    pub attn_norm: Vec<f32>, // [n_embd]
    pub qkv: Qkv,
    pub qkv_bias: Option<QkvBias>,
    /// `[head_dim]` each, with [`crate::Plan::qk_norm`].
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    pub wo: Matrix, // [n_embd, q_dim]
    /// `post_attention_norm`, `post_ffw_norm` (`[n_embd]` each), with
    /// [`crate::Plan::post_norms`].
    pub post_norms: Option<(Vec<f32>, Vec<f32>)>,
    pub ffn_norm: Vec<f32>, // [n_embd]
    pub gate_up: GateUp,
    pub w_down: Matrix, // [n_embd, n_ff]
}

/// All weights of a model, decoded to f32.
pub struct CpuWeights {
    pub plan: Plan,
    pub token_embd: Matrix, // [vocab, n_embd]
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>, // [n_embd]
    /// `[vocab, n_embd]`; `None` when tied to `token_embd`.
    pub output: Option<Matrix>,
    /// RoPE frequency factors (`[rope_dim / 2]`): `rope_freqs`, or LongRoPE's (long, short).
    pub rope_factors: Option<(Vec<f32>, Option<Vec<f32>>)>,
}

impl CpuWeights {
    pub fn load(file: &GgufFile) -> Result<Self> {
        let plan = Plan::from_header(&file.header)?;
        plan.require("the f32 reference", Step::ALL)?;
        ModelConfig::check_vocabulary(&file.header, plan.config.clone())?;
        // Every tensor's presence, shape and type before the first is decoded, and what the
        // f32 copies will take (usize is 32 bits on wasm32).
        plan.check_header(&file.header)?;
        f32_bytes(&plan)?;
        let c = &plan.config;
        let (d, q, kv, ff, vocab, hd) = (
            c.n_embd,
            c.q_dim(),
            c.kv_dim(),
            c.n_ff,
            c.vocab_size,
            c.head_dim,
        );
        let layers = (0..c.n_layers)
            .map(|i| {
                let name = |t: Tensor| t.at(i);
                let pair = |a: Tensor, b: Tensor, len: usize| -> Result<_> {
                    Ok((vector(file, &name(a), len)?, vector(file, &name(b), len)?))
                };
                Ok(LayerWeights {
                    attn_norm: vector(file, &name(Tensor::AttnNorm), d)?,
                    qkv: if plan.fused_qkv {
                        Qkv::Fused(matrix(file, &name(Tensor::AttnQkv), q + 2 * kv, d)?)
                    } else {
                        Qkv::Separate {
                            q: matrix(file, &name(Tensor::AttnQ), q, d)?,
                            k: matrix(file, &name(Tensor::AttnK), kv, d)?,
                            v: matrix(file, &name(Tensor::AttnV), kv, d)?,
                        }
                    },
                    qkv_bias: if c.qkv_bias {
                        Some(QkvBias {
                            q: vector(file, &name(Tensor::AttnQBias), q)?,
                            k: vector(file, &name(Tensor::AttnKBias), kv)?,
                            v: vector(file, &name(Tensor::AttnVBias), kv)?,
                        })
                    } else {
                        None
                    },
                    qk_norm: match plan.qk_norm {
                        true => Some(pair(Tensor::AttnQNorm, Tensor::AttnKNorm, hd)?),
                        false => None,
                    },
                    wo: matrix(file, &name(Tensor::AttnOutput), d, q)?,
                    post_norms: match plan.post_norms {
                        true => Some(pair(Tensor::PostAttnNorm, Tensor::PostFfnNorm, d)?),
                        false => None,
                    },
                    ffn_norm: vector(file, &name(Tensor::FfnNorm), d)?,
                    gate_up: if plan.fused_gate_up {
                        GateUp::Fused(matrix(file, &name(Tensor::FfnUp), 2 * ff, d)?)
                    } else {
                        GateUp::Separate {
                            gate: matrix(file, &name(Tensor::FfnGate), ff, d)?,
                            up: matrix(file, &name(Tensor::FfnUp), ff, d)?,
                        }
                    },
                    w_down: matrix(file, &name(Tensor::FfnDown), d, ff)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = match plan.separate_output {
            true => Some(matrix(file, TensorNames::OUTPUT, vocab, d)?),
            false => None,
        };
        let pairs = c.rope_dim / 2;
        let rope_factors = match plan.rope_factors {
            RopeFactors::None => None,
            RopeFactors::Freqs => Some((vector(file, &Tensor::RopeFreqs.name(None), pairs)?, None)),
            RopeFactors::LongShort { .. } => Some((
                vector(file, &Tensor::RopeFactorsLong.name(None), pairs)?,
                Some(vector(file, &Tensor::RopeFactorsShort.name(None), pairs)?),
            )),
        };
        Ok(CpuWeights {
            token_embd: matrix(file, TensorNames::TOKEN_EMBD, vocab, d)?,
            output_norm: vector(file, TensorNames::OUTPUT_NORM, d)?,
            output,
            layers,
            rope_factors,
            plan,
        })
    }
}

/// Bytes of the f32 copies of every weight, refused when this platform cannot address them.
fn f32_bytes(plan: &Plan) -> Result<usize> {
    let elements = plan.tensors().try_fold(0u64, |acc, t| {
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
