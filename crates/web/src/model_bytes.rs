//! A model's bytes, written into WebAssembly memory chunk by chunk as they arrive, so a page
//! holds the file once: no list of downloaded chunks, no joined copy in JavaScript, and no second
//! copy when the engine takes it (the engine owns these very bytes).

use wasm_bindgen::prelude::*;

use crate::error::{Code, WebError};

/// `new ModelBytes(size)`, then `write(offset, chunk)` for every chunk (or `push(chunk)` when the
/// size is not known in advance), then `Engine.loadModelBytes(bytes, options)`.
#[wasm_bindgen]
pub struct ModelBytes {
    bytes: Vec<u8>, // [size] the file; bytes not yet written are zero
    written: u64,
}

fn too_large(size: f64) -> WebError {
    WebError::new(
        Code::OutOfMemory,
        format!("a model of {size} bytes does not fit in this page's WebAssembly memory"),
    )
}

#[wasm_bindgen]
impl ModelBytes {
    /// Reserves `size` bytes (the file's size; 0 when unknown, then `push` grows it). Fails with
    /// `out_of_memory` when the page cannot hold them, before any byte is downloaded.
    #[wasm_bindgen(constructor)]
    pub fn new(size: f64) -> Result<ModelBytes, JsValue> {
        if !(size >= 0.0 && size.fract() == 0.0 && size <= usize::MAX as f64) {
            return Err(too_large(size).into());
        }
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(size as usize)
            .map_err(|_| too_large(size))?;
        bytes.resize(size as usize, 0);
        Ok(ModelBytes { bytes, written: 0 })
    }

    /// Copies `chunk` to `offset` (JavaScript passes a view of the downloaded chunk; it is copied
    /// straight into place).
    pub fn write(&mut self, offset: f64, chunk: &[u8]) -> Result<(), JsValue> {
        let start = offset as usize;
        let end = start.checked_add(chunk.len());
        let fits =
            offset >= 0.0 && offset.fract() == 0.0 && end.is_some_and(|e| e <= self.bytes.len());
        if !fits {
            return Err(WebError::new(
                Code::Fetch,
                format!(
                    "a chunk of {} bytes at {offset} does not fit in a model of {} bytes (did the file change while it was read?)",
                    chunk.len(),
                    self.bytes.len()
                ),
            )
            .into());
        }
        self.bytes[start..start + chunk.len()].copy_from_slice(chunk);
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Appends `chunk` (when the size was not known in advance).
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        let need = self.bytes.len() as f64 + chunk.len() as f64;
        self.bytes
            .try_reserve(chunk.len())
            .map_err(|_| too_large(need))?;
        self.bytes.extend_from_slice(chunk);
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    #[wasm_bindgen(getter)]
    pub fn written(&self) -> f64 {
        self.written as f64
    }

    /// The model's size.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.bytes.len() as f64
    }
}

impl ModelBytes {
    /// The bytes, once every one of them was written.
    pub(crate) fn into_bytes(self) -> Result<Vec<u8>, WebError> {
        if self.written != self.bytes.len() as u64 {
            return Err(WebError::new(
                Code::Fetch,
                format!(
                    "only {} of the model's {} bytes were written (the download ended early?)",
                    self.written,
                    self.bytes.len()
                ),
            ));
        }
        Ok(self.bytes)
    }
}
