//! A small GGUF writer: builds test files (hand-made models, malformed headers) and the tiny
//! generated models the browser tests load.

use crate::array::Array;
use crate::metadata::Value;
use crate::{GgmlType, DEFAULT_ALIGNMENT, GGUF_MAGIC};

/// Collects metadata and tensors, then serializes a GGUF v3 file.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    /// (name, shape in GGML order, type, raw bytes)
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn meta(&mut self, key: &str, value: Value) -> &mut Self {
        self.metadata.push((key.to_owned(), value));
        self
    }

    /// Sets `key`, replacing its earlier value in place if it has one (tests doctor the
    /// metadata of generated files with it).
    pub fn set_meta(&mut self, key: &str, value: Value) -> &mut Self {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key.to_owned(), value)),
        }
        self
    }

    pub fn meta_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.meta(key, Value::String(value.to_owned()))
    }

    pub fn meta_u32(&mut self, key: &str, value: u32) -> &mut Self {
        self.meta(key, Value::U32(value))
    }

    pub fn meta_f32(&mut self, key: &str, value: f32) -> &mut Self {
        self.meta(key, Value::F32(value))
    }

    pub fn meta_strings<S: AsRef<str>>(&mut self, key: &str, values: &[S]) -> &mut Self {
        let strings = values.iter().collect();
        self.meta(key, Value::Array(Array::String(strings)))
    }

    /// Adds a tensor from its raw encoded bytes.
    pub fn tensor(&mut self, name: &str, shape: &[u64], ty: GgmlType, bytes: Vec<u8>) -> &mut Self {
        self.tensors
            .push((name.to_owned(), shape.to_vec(), ty, bytes));
        self
    }

    /// Adds an F32 tensor.
    pub fn tensor_f32(&mut self, name: &str, shape: &[u64], data: &[f32]) -> &mut Self {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, shape, GgmlType::F32, bytes)
    }

    /// Serializes the file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            put_value(&mut out, value);
        }
        let align = DEFAULT_ALIGNMENT;
        let mut offset = 0u64;
        for (name, shape, ty, bytes) in &self.tensors {
            put_str(&mut out, name);
            out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
            for d in shape {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + bytes.len() as u64).div_ceil(align) * align;
        }
        pad_to(&mut out, align);
        for (_, _, _, bytes) in &self.tensors {
            out.extend_from_slice(bytes);
            pad_to(&mut out, align);
        }
        out
    }
}

fn pad_to(out: &mut Vec<u8>, align: u64) {
    let len = (out.len() as u64).div_ceil(align) * align;
    out.resize(len as usize, 0);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.push(*v as u8),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(*v as u8),
        Value::String(s) => put_str(out, s),
        Value::Array(items) => {
            out.extend_from_slice(&(items.elem_type() as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items.values() {
                put_value(out, &item);
            }
        }
    }
}
