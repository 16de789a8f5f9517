//! The model's tensors as the engine uses them: matrices stay in the file's bytes (described
//! here, borrowed at each product) or, for kernels that multiply a rearranged order, in a copy
//! of the same size ([`crate::packed`]); norms and biases are decoded to f32 (a few KiB).

use runahead_gguf::{GgufFile, TensorInfo};
use runahead_model::{ModelConfig, ModelError, Plan, Result, TensorNames};

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
    pub q: Vec<f32>, // [n_embd]
    pub k: Vec<f32>, // [kv_dim]
    pub v: Vec<f32>, // [kv_dim]
}

pub struct LayerWeights {
    pub attn_norm: Vec<f32>, // [n_embd]
    pub wq: MatrixRef,       // [n_embd, n_embd]
    pub wk: MatrixRef,       // [kv_dim, n_embd]
    pub wv: MatrixRef,       // [kv_dim, n_embd]
    pub qkv_bias: Option<QkvBias>,
    pub wo: MatrixRef,      // [n_embd, n_embd]
    pub ffn_norm: Vec<f32>, // [n_embd]
    pub w_gate: MatrixRef,  // [n_ff, n_embd]
    pub w_up: MatrixRef,    // [n_ff, n_embd]
    pub w_down: MatrixRef,  // [n_embd, n_ff]
}

pub struct Weights {
    pub config: ModelConfig,
    pub token_embd: MatrixRef, // [vocab, n_embd]
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>, // [n_embd]
    /// `[vocab, n_embd]`; `None` when tied to `token_embd`.
    pub output: Option<MatrixRef>,
}

impl Weights {
    pub fn load(file: &GgufFile) -> Result<Self> {
        let plan = Plan::from_header(&file.header)?;
        plan.require("the CPU engine", &[])?;
        plan.check_header(&file.header)?;
        let config = plan.config;
        let vocab = config.vocab_size;
        let c = &config;
        let (d, kv, ff) = (c.n_embd, c.kv_dim(), c.n_ff);
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
        Ok(Weights {
            token_embd: matrix(file, TensorNames::TOKEN_EMBD, vocab, d)?,
            output_norm: vector(file, TensorNames::OUTPUT_NORM, d)?,
            output,
            layers,
            config,
        })
    }

    /// Rearranges every matrix the kernels multiply in another order than the file's (see
    /// [`crate::packed`]); the token embedding's rows are still read from the file.
    pub fn pack(&mut self, file: &GgufFile, kernels: Kernels) {
        for l in &mut self.layers {
            for m in [
                &mut l.wq,
                &mut l.wk,
                &mut l.wv,
                &mut l.wo,
                &mut l.w_gate,
                &mut l.w_up,
                &mut l.w_down,
            ] {
                m.pack(file, kernels);
            }
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
