use std::ops::Deref;

use crate::reader::{Gguf, TensorInfo};
use crate::{blocks, GgufError, Result};

/// The bytes of a whole GGUF file: memory-mapped natively, owned in the browser.
pub enum Storage {
    Bytes(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mmap(memmap2::Mmap),
}

impl Deref for Storage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Storage::Bytes(b) => b,
            #[cfg(not(target_arch = "wasm32"))]
            Storage::Mmap(m) => m,
        }
    }
}

/// A parsed GGUF file together with its bytes.
pub struct GgufFile {
    pub header: Gguf,
    storage: Storage,
}

impl GgufFile {
    /// Parses a file held in memory (the browser path).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::from_storage(Storage::Bytes(bytes))
    }

    /// Memory-maps and parses a file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let io = |e: std::io::Error| GgufError::Io(format!("cannot read {}: {e}", path.display()));
        let file = std::fs::File::open(path).map_err(io)?;
        if file.metadata().map_err(io)?.is_dir() {
            return Err(GgufError::Io(format!("{} is a directory", path.display())));
        }
        // SAFETY: the map is read-only; a model file modified while mapped is outside what the
        // runtime promises to handle (as for every mmap-based loader).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Self::from_storage(Storage::Mmap(map))
    }

    pub fn from_storage(storage: Storage) -> Result<Self> {
        let header = Gguf::parse(&storage)?;
        Ok(GgufFile { header, storage })
    }

    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo> {
        self.header
            .tensor(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_owned()))
    }

    /// The raw (still quantized) bytes of a tensor. Bounds were checked at parse time.
    pub fn tensor_bytes(&self, info: &TensorInfo) -> &[u8] {
        let start = (self.header.data_offset + info.offset) as usize;
        &self.storage[start..start + info.size as usize]
    }

    /// A tensor decoded to f32, in GGML order (`shape[0]` contiguous).
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.tensor_info(name)?;
        let mut out = vec![0f32; info.n_elements() as usize];
        blocks::dequantize(info.ty, self.tensor_bytes(info), &mut out)?;
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.storage.len()
    }

    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }
}
