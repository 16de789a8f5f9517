//! A model's tensors as its [`Plan`] names them, loaded once for every engine: the layers,
//! which projections are fused, which optional norms and biases exist, come from here; an
//! engine gives only how it holds a matrix (`M`: f32 rows, the file's blocks).

use runahead_gguf::GgufFile;

use crate::{ModelError, Plan, Result, RopeFactors, Tensor, TensorNames};

pub struct QkvBias {
    pub q: Vec<f32>, // [q_dim]
    pub k: Vec<f32>, // [kv_dim]
    pub v: Vec<f32>, // [kv_dim]
}

/// Q, K and V projections: separate, or one matrix whose rows are Q's, K's, then V's.
// One per layer, held for the model's life: the unused bytes of a fused layer's value are
// nothing next to its matrix, and a box would add a pointer chase to every product.
#[allow(clippy::large_enum_variant)]
pub enum Qkv<M> {
    Separate { q: M, k: M, v: M }, // [q_dim, n_embd], [kv_dim, n_embd] twice
    Fused(M),                      // [q_dim + 2 * kv_dim, n_embd]
}

/// Gate and up projections: separate, or one matrix of twice the rows, gate first.
pub enum GateUp<M> {
    Separate { gate: M, up: M }, // [n_ff, n_embd] each
    Fused(M),                    // [2 * n_ff, n_embd]
}

pub struct LayerWeights<M> {
    pub attn_norm: Vec<f32>, // [n_embd]
    pub qkv: Qkv<M>,
    pub qkv_bias: Option<QkvBias>,
    /// `attn_q_norm`, `attn_k_norm` (`[head_dim]` each), with [`Plan::qk_norm`].
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    pub wo: M, // [n_embd, q_dim]
    /// `post_attention_norm`, `post_ffw_norm` (`[n_embd]` each), with [`Plan::post_norms`].
    pub post_norms: Option<(Vec<f32>, Vec<f32>)>,
    pub ffn_norm: Vec<f32>, // [n_embd]
    pub gate_up: GateUp<M>,
    pub w_down: M, // [n_embd, n_ff]
}

impl<M> LayerWeights<M> {
    /// Every matrix of the layer, in the order a forward uses them.
    pub fn matrices_mut(&mut self) -> Vec<&mut M> {
        let mut all = match &mut self.qkv {
            Qkv::Separate { q, k, v } => vec![q, k, v],
            Qkv::Fused(qkv) => vec![qkv],
        };
        all.push(&mut self.wo);
        match &mut self.gate_up {
            GateUp::Separate { gate, up } => all.extend([gate, up]),
            GateUp::Fused(gate_up) => all.push(gate_up),
        }
        all.push(&mut self.w_down);
        all
    }
}

pub struct ModelWeights<M> {
    pub plan: Plan,
    pub token_embd: M, // [vocab, n_embd]
    pub layers: Vec<LayerWeights<M>>,
    pub output_norm: Vec<f32>, // [n_embd]
    /// `[vocab, n_embd]`; `None` when tied to `token_embd`.
    pub output: Option<M>,
    /// RoPE frequency factors (`[rope_dim / 2]`): `rope_freqs`, or LongRoPE's (long, short).
    pub rope_factors: Option<(Vec<f32>, Option<Vec<f32>>)>,
}

impl<M> ModelWeights<M> {
    /// Loads every tensor `plan` reads from `file`: norms, biases and RoPE factors decoded to
    /// f32 (after checking shape and type), each matrix by `matrix(file, name, rows, cols)`,
    /// which checks its own shape and type. The caller checks the header against the plan
    /// first ([`Plan::check_header`]).
    pub fn load(
        file: &GgufFile,
        plan: Plan,
        matrix: impl Fn(&GgufFile, &str, usize, usize) -> Result<M>,
    ) -> Result<Self> {
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
        let factor = |t: Tensor| vector(file, &t.name(None), pairs);
        let rope_factors = match plan.rope_factors {
            RopeFactors::None => None,
            RopeFactors::Freqs => Some((factor(Tensor::RopeFreqs)?, None)),
            RopeFactors::LongShort { .. } => Some((
                factor(Tensor::RopeFactorsLong)?,
                Some(factor(Tensor::RopeFactorsShort)?),
            )),
        };
        Ok(ModelWeights {
            token_embd: matrix(file, TensorNames::TOKEN_EMBD, vocab, d)?,
            output_norm: vector(file, TensorNames::OUTPUT_NORM, d)?,
            output,
            layers,
            rope_factors,
            plan,
        })
    }

    /// The output projection (the token embedding when tied).
    pub fn output(&self) -> &M {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}

/// Checks a tensor's GGML shape (`[cols, rows]` of a matrix, `[len]` of a vector), with the
/// tensor's info.
pub fn checked_shape<'f>(
    file: &'f GgufFile,
    name: &str,
    shape: &[u64],
) -> Result<&'f runahead_gguf::TensorInfo> {
    let info = file.tensor_info(name)?;
    if info.shape != shape {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: shape.to_vec(),
            found: info.shape.clone(),
        });
    }
    Ok(info)
}

/// Checks a tensor's shape and type, then decodes it to f32.
pub fn decode_f32(file: &GgufFile, name: &str, shape: &[u64]) -> Result<Vec<f32>> {
    let info = checked_shape(file, name, shape)?;
    if !info.ty.is_supported() {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_owned(),
            ty: info.ty,
        });
    }
    Ok(file.tensor_f32(name)?)
}

fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    decode_f32(file, name, &[len as u64])
}
