use runahead_gguf::GgufFile;

use crate::arch::weights::{decode_f32, ModelWeights};
use crate::{ModelConfig, ModelError, Plan, Result, Step};

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

/// All weights of a model, decoded to f32.
pub type CpuWeights = ModelWeights<Matrix>;

/// Checks the header against the plan and what the f32 copies will take, then decodes every
/// weight.
pub fn load(file: &GgufFile) -> Result<CpuWeights> {
    let plan = Plan::from_header(&file.header)?;
    plan.require("the f32 reference", Step::ALL)?;
    ModelConfig::check_vocabulary(&file.header, plan.config.clone())?;
    // Every tensor's presence, shape and type before the first is decoded, and what the f32
    // copies will take (usize is 32 bits on wasm32).
    plan.check_header(&file.header)?;
    f32_bytes(&plan)?;
    ModelWeights::load(file, plan, |file, name, rows, cols| {
        let data = decode_f32(file, name, &[cols as u64, rows as u64])?;
        Ok(Matrix { rows, cols, data })
    })
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
