//! Tensor bytes by name, from wherever a loader holds them: a whole file ([`GgufFile`]), or, for
//! a loader that receives a file as a stream, the few tensors it keeps whole while the rest
//! passes through.

use crate::reader::Gguf;
use crate::tensor_info::TensorInfo;
use crate::{blocks, GgufError, GgufFile, Result};

pub trait TensorData {
    /// The file's header (its tensor table).
    fn header(&self) -> &Gguf;

    /// The raw (still quantized) bytes of a tensor of this file; empty when they are not held.
    fn bytes_of(&self, info: &TensorInfo) -> &[u8];

    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.header()
            .tensor(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_owned()))
    }

    /// A tensor decoded to f32, in GGML order (`shape[0]` contiguous).
    fn decoded(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        decode(info, self.bytes_of(info))
    }
}

impl TensorData for GgufFile {
    fn header(&self) -> &Gguf {
        &self.header
    }

    fn bytes_of(&self, info: &TensorInfo) -> &[u8] {
        self.tensor_bytes(info)
    }
}

/// `bytes` (tensor `info`'s) decoded to f32.
pub(crate) fn decode(info: &TensorInfo, bytes: &[u8]) -> Result<Vec<f32>> {
    // A tensor lies in the file, but on wasm32 (32-bit usize) its decoded f32s may not fit.
    let n = usize::try_from(info.n_elements())
        .ok()
        .filter(|n| n.checked_mul(4).is_some())
        .ok_or_else(|| GgufError::BadShape {
            name: info.name.clone(),
            shape: info.shape.clone(),
            ty: info.ty,
            reason: "too many elements to decode on this platform".into(),
        })?;
    let mut out = vec![0f32; n];
    blocks::dequantize(info.ty, bytes, &mut out)?;
    Ok(out)
}
