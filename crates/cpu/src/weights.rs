//! The model's tensors as the engine uses them: matrices stay in the file's bytes (described
//! here, borrowed at each product) or, for kernels that multiply a rearranged order, in a copy
//! of the same size ([`crate::packed`]); norms and biases are decoded to f32 (a few KiB).

use runahead_gguf::{GgufFile, TensorInfo};
use runahead_model::weights::{checked_shape, ModelWeights};
use runahead_model::{ModelError, Plan, Result, Step};

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

/// The model's weights as the engine holds them.
pub type Weights = ModelWeights<MatrixRef>;

/// The steps of a [`Plan`] this engine executes: all of them.
pub const STEPS: &[Step] = Step::ALL;

/// Checks the header against the plan, then describes every matrix over the file's bytes and
/// decodes the norms and biases.
pub fn load(file: &GgufFile) -> Result<Weights> {
    let plan = Plan::from_header(&file.header)?;
    plan.require("the CPU engine", STEPS)?;
    plan.check_header(&file.header)?;
    ModelWeights::load(file, plan, matrix)
}

/// Rearranges every matrix the kernels multiply in another order than the file's (see
/// [`crate::packed`]); the token embedding's rows are still read from the file.
pub fn pack(weights: &mut Weights, file: &GgufFile, kernels: Kernels) {
    for layer in &mut weights.layers {
        for m in layer.matrices_mut() {
            m.pack(file, kernels);
        }
    }
    match &mut weights.output {
        Some(output) => output.pack(file, kernels),
        None => weights.token_embd.pack(file, kernels),
    }
}

fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<MatrixRef> {
    let info = checked_shape(file, name, &[cols as u64, rows as u64])?;
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
