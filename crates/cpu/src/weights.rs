//! The model's tensors as the engine uses them: matrices stay in the file's bytes (described
//! here, borrowed at each product) or, for kernels that multiply a rearranged order, in a copy
//! of the same size ([`crate::packed`]); norms and biases are decoded to f32 (a few KiB).

use runahead_gguf::{GgufFile, TensorInfo};
use runahead_model::{ModelError, Plan, Result, RopeFactors, Step, Tensor, TensorNames};

use crate::formats::WeightFormat;
use crate::kernels::Kernels;
use crate::layout::Layout;
use crate::matmul::Matrix;

/// Bytes packed between releases of the file's pages.
const PACK_BYTES: usize = 1 << 20;

/// A weight matrix checked at load: `rows` output features of `cols` inputs in `format`.
pub struct MatrixRef {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    info: TensorInfo,
    /// The file's bytes in the order the kernels take ([`Kernels::layout_for`]), where that is
    /// not the file's.
    packed: Option<(Vec<u8>, Layout)>,
}

impl MatrixRef {
    /// Rearranges the matrix for `kernels` when they multiply another order than the file's,
    /// a few rows at a time, letting the file's pages go as it goes (they are read again only
    /// if something else reads them): the process never holds much more than one copy.
    fn pack(&mut self, file: &GgufFile, kernels: Kernels) {
        let bytes = file.tensor_bytes(&self.info);
        let row_bytes = bytes.len() / self.rows;
        let layout = kernels.layout_for(self.format, self.rows);
        if layout == Layout::Gguf || row_bytes == 0 {
            return;
        }
        // Whole groups of sixteen rows a chunk (what `Layout::Lanes16` packs together).
        let lanes = crate::packed_lanes::LANES;
        let chunk = row_bytes * (PACK_BYTES / row_bytes).max(1).next_multiple_of(lanes);
        let mut packed = vec![0u8; bytes.len()];
        for (rows, out) in bytes.chunks(chunk).zip(packed.chunks_mut(chunk)) {
            if !kernels.pack_as(layout, self.format, rows, row_bytes, out) {
                return;
            }
            file.release_pages(rows);
        }
        self.packed = Some((packed, layout));
    }

    /// The matrix over the file's bytes (or their packed copy).
    pub fn view<'a>(&'a self, file: &'a GgufFile) -> Matrix<'a> {
        let matrix = Matrix {
            format: self.format,
            rows: self.rows,
            cols: self.cols,
            bytes: file.tensor_bytes(&self.info),
            layout: Layout::Gguf,
        };
        match &self.packed {
            Some((bytes, layout)) => matrix.rearranged(bytes, *layout),
            None => matrix,
        }
    }

    pub fn info(&self) -> &TensorInfo {
        &self.info
    }
}

pub struct QkvBias {
    pub q: Vec<f32>, // [q_dim]
    pub k: Vec<f32>, // [kv_dim]
    pub v: Vec<f32>, // [kv_dim]
}

/// Q, K and V projections: separate, or one matrix whose rows are Q's, K's, then V's.
// One per layer, held for the model's life: the unused bytes of a fused layer's value are
// nothing next to its matrix, and a box would add a pointer chase to every product.
#[allow(clippy::large_enum_variant)]
pub enum Qkv {
    Separate {
        q: MatrixRef,
        k: MatrixRef,
        v: MatrixRef,
    },
    Fused(MatrixRef),
}

/// Gate and up projections: separate, or one matrix of twice the rows, gate first.
pub enum GateUp {
    Separate { gate: MatrixRef, up: MatrixRef },
    Fused(MatrixRef),
}

pub struct LayerWeights {
    pub attn_norm: Vec<f32>, // [n_embd]
    pub qkv: Qkv,
    pub qkv_bias: Option<QkvBias>,
    /// `attn_q_norm`, `attn_k_norm` (`[head_dim]` each), with [`Plan::qk_norm`].
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    pub wo: MatrixRef, // [n_embd, q_dim]
    /// `post_attention_norm`, `post_ffw_norm` (`[n_embd]` each), with [`Plan::post_norms`].
    pub post_norms: Option<(Vec<f32>, Vec<f32>)>,
    pub ffn_norm: Vec<f32>, // [n_embd]
    pub gate_up: GateUp,
    pub w_down: MatrixRef, // [n_embd, n_ff]
}

/// The steps of a [`Plan`] this engine executes: all of them.
pub const STEPS: &[Step] = Step::ALL;

pub struct Weights {
    pub plan: Plan,
    pub token_embd: MatrixRef, // [vocab, n_embd]
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>, // [n_embd]
    /// `[vocab, n_embd]`; `None` when tied to `token_embd`.
    pub output: Option<MatrixRef>,
    /// RoPE frequency factors (`[rope_dim / 2]`): `rope_freqs`, or LongRoPE's (long, short).
    pub rope_factors: Option<(Vec<f32>, Option<Vec<f32>>)>,
}

impl Weights {
    pub fn load(file: &GgufFile) -> Result<Self> {
        let plan = Plan::from_header(&file.header)?;
        plan.require("the CPU engine", STEPS)?;
        plan.check_header(&file.header)?;
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
        Ok(Weights {
            token_embd: matrix(file, TensorNames::TOKEN_EMBD, vocab, d)?,
            output_norm: vector(file, TensorNames::OUTPUT_NORM, d)?,
            output,
            layers,
            rope_factors,
            plan,
        })
    }

    /// Rearranges every matrix the kernels multiply in another order than the file's (see
    /// [`crate::packed`]); the token embedding's rows are still read from the file.
    pub fn pack(&mut self, file: &GgufFile, kernels: Kernels) {
        for l in &mut self.layers {
            let matrices: Vec<&mut MatrixRef> = match (&mut l.qkv, &mut l.gate_up) {
                (Qkv::Separate { q, k, v }, GateUp::Separate { gate, up }) => {
                    vec![q, k, v, gate, up]
                }
                (Qkv::Separate { q, k, v }, GateUp::Fused(gu)) => vec![q, k, v, gu],
                (Qkv::Fused(qkv), GateUp::Separate { gate, up }) => vec![qkv, gate, up],
                (Qkv::Fused(qkv), GateUp::Fused(gu)) => vec![qkv, gu],
            };
            for m in matrices {
                m.pack(file, kernels);
            }
            l.wo.pack(file, kernels);
            l.w_down.pack(file, kernels);
        }
        match &mut self.output {
            Some(output) => output.pack(file, kernels),
            None => self.token_embd.pack(file, kernels),
        }
    }

    /// The output projection (the token embedding when tied).
    pub fn output(&self) -> &MatrixRef {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}

/// The tensor's info after checking its GGML shape (`[cols, rows]`, or `[len]`).
fn checked<'f>(file: &'f GgufFile, name: &str, shape: &[u64]) -> Result<&'f TensorInfo> {
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

fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let info = checked(file, name, &[len as u64])?;
    if !info.ty.is_supported() {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_owned(),
            ty: info.ty,
        });
    }
    Ok(file.tensor_f32(name)?)
}

fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<MatrixRef> {
    let info = checked(file, name, &[cols as u64, rows as u64])?;
    let format = WeightFormat::of(info.ty).ok_or_else(|| ModelError::UnsupportedTensorType {
        name: name.to_owned(),
        ty: info.ty,
    })?;
    // Checks the byte size against the shape, so products can index rows freely.
    Matrix::new(name, format, rows, cols, file.tensor_bytes(info))?;
    Ok(MatrixRef {
        format,
        rows,
        cols,
        info: info.clone(),
        packed: None,
    })
}
