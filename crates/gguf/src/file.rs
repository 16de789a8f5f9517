use std::ops::Deref;

use crate::reader::Gguf;
use crate::tensor_info::TensorInfo;
use crate::{GgufError, Result};

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

    /// A file whose header was parsed from its first bytes (`Gguf::parse_prefix`) before the
    /// rest arrived: `bytes` are the whole file. Checks again that every tensor lies inside
    /// them (the prefix's parse may not have known the file's size), without parsing again.
    pub fn from_parsed(header: Gguf, bytes: Vec<u8>) -> Result<Self> {
        let data_len = (bytes.len() as u64).saturating_sub(header.data_offset);
        crate::reader::check_bounds(&header.tensors, data_len)?;
        Ok(GgufFile {
            header,
            storage: Storage::Bytes(bytes),
        })
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

    /// The raw (still quantized) bytes of a tensor. Parsing checked that every tensor's bytes
    /// lie in the file; a tensor of zero bytes may still "start" past its end (the data
    /// section begins at an aligned offset), and reads as empty, as does a `TensorInfo` that
    /// is not from this file.
    pub fn tensor_bytes(&self, info: &TensorInfo) -> &[u8] {
        let range = (|| {
            let start = usize::try_from(self.header.data_offset.checked_add(info.offset)?).ok()?;
            let end = start.checked_add(usize::try_from(info.size).ok()?)?;
            self.storage.get(start..end)
        })();
        range.unwrap_or(&[])
    }

    /// Lets the pages of `bytes` (a part of this file's bytes, such as a tensor's) leave this
    /// process's resident memory where the file is memory-mapped (reading them again reads them
    /// back from the file): for a reader that keeps its own copy. Nothing where the bytes are
    /// held in memory, or for bytes from elsewhere.
    pub fn release_pages(&self, bytes: &[u8]) {
        #[cfg(not(unix))]
        let _ = bytes;
        #[cfg(unix)]
        if let Storage::Mmap(map) = &self.storage {
            let offset = (bytes.as_ptr() as usize).wrapping_sub(map.as_ptr() as usize);
            if bytes.is_empty() || offset > map.len() || bytes.len() > map.len() - offset {
                return;
            }
            // SAFETY: the map is read-only and shared with the file, so dropping its pages loses
            // nothing (a later read faults them back in from the file); the range is inside the
            // map (checked). A failure only leaves the pages resident.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, bytes.len())
            };
        }
    }

    /// A tensor decoded to f32, in GGML order (`shape[0]` contiguous).
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.tensor_info(name)?;
        crate::tensor_data::decode(info, self.tensor_bytes(info))
    }

    pub fn len(&self) -> usize {
        self.storage.len()
    }

    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }
}
