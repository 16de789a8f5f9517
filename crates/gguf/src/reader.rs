use std::collections::HashMap;

use crate::array::{Array, Strings};
use crate::limits::{Budget, ENTRY_SIZE, MAX_ARRAY_DEPTH, TENSOR_SIZE};
use crate::metadata::{Metadata, Value, ValueType};
use crate::tensor_info::{checked_product, TensorInfo};
use crate::{GgmlType, GgufError, Result, DEFAULT_ALIGNMENT, DEFAULT_HEADER_BUDGET, GGUF_MAGIC};

/// The parsed header of a GGUF file: version, metadata and tensor table. Tensor data stays
/// in the file's bytes (see [`crate::GgufFile`]).
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute offset of the data section in the file.
    pub data_offset: u64,
    /// Bytes of memory the parsed metadata and tensor table take, as charged against the
    /// budget of [`Gguf::parse_with_budget`].
    pub memory: u64,
    /// Position of each tensor in `tensors` by name. Loaders look up every tensor a config
    /// reads; a linear search made that quadratic in a file's tensor count (a 50 MB file of
    /// a million empty tensors and a 1024-layer config: 10^10 string comparisons).
    index: HashMap<String, usize>,
}

impl Gguf {
    /// Parses the header of a complete GGUF file and checks that every tensor lies inside it,
    /// within [`DEFAULT_HEADER_BUDGET`] bytes of memory.
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        Self::parse_with_budget(bytes, DEFAULT_HEADER_BUDGET)
    }

    /// [`Gguf::parse`] with another memory budget for the parsed metadata and tensor table:
    /// a header that would take more is [`GgufError::HeaderTooLarge`], found before the
    /// allocation that would exceed it.
    pub fn parse_with_budget(bytes: &[u8], budget: u64) -> Result<Gguf> {
        Self::parse_inner(bytes, bytes.len() as u64, budget)
    }

    /// Parses the header from the first bytes of a file of `file_len` bytes (every tensor must
    /// lie inside `file_len`; `u64::MAX` when the size is unknown), within
    /// [`DEFAULT_HEADER_BUDGET`]: for describing a file before its tensor data is read. A prefix
    /// that ends inside the header is [`GgufError::Truncated`], whose `offset + needed` is a
    /// lower bound of the header's length (see [`GgufError::bytes_needed`]).
    pub fn parse_prefix(prefix: &[u8], file_len: u64) -> Result<Gguf> {
        Self::parse_inner(prefix, file_len, DEFAULT_HEADER_BUDGET)
    }

    fn parse_inner(bytes: &[u8], file_len: u64, budget: u64) -> Result<Gguf> {
        let mut r = Reader {
            bytes,
            pos: 0,
            budget: Budget::new(budget),
        };
        let magic = r.array::<4>("magic")?;
        if magic != GGUF_MAGIC {
            return Err(GgufError::BadMagic(magic));
        }
        let version = r.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;

        let mut metadata = Metadata::default();
        // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes.
        r.check_count(n_kv, 13, "metadata entries")?;
        for _ in 0..n_kv {
            r.budget.charge(1, ENTRY_SIZE, "metadata entries")?;
            let key = r.string("metadata key")?;
            // The lookup map holds a second copy of the key.
            r.budget.charge(key.len() as u64, 1, "metadata keys")?;
            let ty_id = r.u32("metadata value type")?;
            let ty = ValueType::from_id(ty_id).ok_or_else(|| GgufError::UnknownValueType {
                key: key.clone(),
                ty: ty_id,
            })?;
            let value = r.value(ty, &key, 0)?;
            metadata.insert(key, value)?;
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => {
                let a = v.as_u64().unwrap_or(0);
                if a == 0 || !a.is_power_of_two() {
                    return Err(GgufError::BadAlignment(a));
                }
                a
            }
        };

        // Each tensor entry takes at least 8 (name length) + 4 + 4 + 8 bytes.
        r.check_count(n_tensors, 24, "tensor table")?;
        r.budget
            .charge(n_tensors, TENSOR_SIZE, "the tensor table")?;
        let mut tensors = Vec::with_capacity(r.to_usize(n_tensors, "tensor table")?);
        let mut index = HashMap::new();
        for _ in 0..n_tensors {
            let t = r.tensor_info()?;
            // The index keeps a copy of the name.
            r.budget.charge(t.name.len() as u64, 1, "tensor names")?;
            if index.insert(t.name.clone(), tensors.len()).is_some() {
                return Err(GgufError::DuplicateTensor(t.name));
            }
            tensors.push(t);
        }

        let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
        let data_len = file_len.saturating_sub(data_offset);
        for t in &tensors {
            if t.offset % alignment != 0 {
                return Err(GgufError::MisalignedTensor {
                    name: t.name.clone(),
                    offset: t.offset,
                    alignment,
                });
            }
        }
        check_bounds(&tensors, data_len)?;
        Ok(Gguf {
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
            memory: r.budget.used,
            index,
        })
    }

    /// The tensor named `name`, from the index the parser built (a caller that edits
    /// `tensors` makes this fall back to a search).
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        match self.index.get(name).and_then(|&i| self.tensors.get(i)) {
            Some(t) if t.name == name => Some(t),
            None if self.tensors.len() == self.index.len() => None,
            _ => self.tensors.iter().find(|t| t.name == name),
        }
    }
}

/// A bounds-checked little-endian cursor over the file's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    budget: Budget,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let rest = &self.bytes[self.pos..];
        // A length that does not fit in usize cannot fit in what remains either.
        let s = usize::try_from(n).ok().and_then(|n| rest.get(..n));
        let s = s.ok_or_else(|| GgufError::Truncated {
            what: what.to_owned(),
            offset: self.pos as u64,
            needed: n,
            len: self.bytes.len() as u64,
        })?;
        self.pos += s.len();
        Ok(s)
    }

    /// A count from the file as a `usize`. Counts are checked against the remaining bytes
    /// first, so this only fails where that check was skipped; but on wasm32 usize is 32
    /// bits, and a plain `as` would silently truncate.
    fn to_usize(&self, n: u64, what: &str) -> Result<usize> {
        usize::try_from(n).map_err(|_| GgufError::Truncated {
            what: format!("{what} ({n} entries, more than this platform can address)"),
            offset: self.pos as u64,
            needed: n,
            len: self.bytes.len() as u64,
        })
    }

    /// Rejects a count whose smallest possible encoding is already larger than what remains,
    /// so that no allocation is sized by an unchecked number from the file.
    fn check_count(&self, count: u64, min_each: u64, what: &str) -> Result<()> {
        let remaining = (self.bytes.len() - self.pos) as u64;
        match count.checked_mul(min_each) {
            Some(n) if n <= remaining => Ok(()),
            _ => Err(GgufError::Truncated {
                what: format!("{what} ({count} entries)"),
                offset: self.pos as u64,
                needed: count.saturating_mul(min_each),
                len: self.bytes.len() as u64,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A length-prefixed string; its bytes are charged to the budget before they are copied.
    fn string(&mut self, what: &str) -> Result<String> {
        self.str(what).map(str::to_owned)
    }

    /// A length-prefixed string in the file's bytes, charged to the budget as if copied.
    fn str(&mut self, what: &str) -> Result<&'a str> {
        let len = self.u64(what)?;
        let offset = self.pos as u64;
        let s = self.take(len, what)?;
        self.budget.charge(len, 1, what)?;
        std::str::from_utf8(s).map_err(|_| GgufError::InvalidUtf8 {
            what: what.to_owned(),
            offset,
        })
    }

    /// One value of type `ty`; `depth` is how many arrays enclose it.
    fn value(&mut self, ty: ValueType, key: &str, depth: u32) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>(key)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(key)?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            ValueType::U32 => Value::U32(self.u32(key)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            ValueType::U64 => Value::U64(self.u64(key)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            ValueType::Bool => Value::Bool(self.array::<1>(key)?[0] != 0),
            ValueType::String => Value::String(self.string(key)?),
            ValueType::Array => Value::Array(self.array_value(key, depth + 1)?),
        })
    }

    /// An array header and its elements; `depth` counts this array.
    fn array_value(&mut self, key: &str, depth: u32) -> Result<Array> {
        // Each level recurses: an unbounded depth would overflow the stack.
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArraysTooDeep {
                key: key.to_owned(),
                limit: MAX_ARRAY_DEPTH,
            });
        }
        let elem_id = self.u32(key)?;
        let elem = ValueType::from_id(elem_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.to_owned(),
            ty: elem_id,
        })?;
        let count = self.u64(key)?;
        self.check_count(count, elem.min_size(), key)?;
        let n = self.to_usize(count, key)?;
        // Each element is charged what it takes in memory before the vector is allocated.
        macro_rules! numbers {
            ($variant:ident, $t:ty, $read:expr) => {{
                self.budget.charge(count, size_of::<$t>() as u64, key)?;
                let mut items: Vec<$t> = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push($read(&mut *self)?);
                }
                Array::$variant(items)
            }};
        }
        let array = match elem {
            ValueType::U8 => numbers!(U8, u8, |r: &mut Self| Ok::<_, GgufError>(
                r.array::<1>(key)?[0]
            )),
            ValueType::I8 => numbers!(I8, i8, |r: &mut Self| Ok::<_, GgufError>(
                r.array::<1>(key)?[0] as i8
            )),
            ValueType::U16 => numbers!(U16, u16, |r: &mut Self| Ok::<_, GgufError>(
                u16::from_le_bytes(r.array(key)?)
            )),
            ValueType::I16 => numbers!(I16, i16, |r: &mut Self| Ok::<_, GgufError>(
                i16::from_le_bytes(r.array(key)?)
            )),
            ValueType::U32 => numbers!(U32, u32, |r: &mut Self| r.u32(key)),
            ValueType::I32 => numbers!(I32, i32, |r: &mut Self| Ok::<_, GgufError>(
                i32::from_le_bytes(r.array(key)?)
            )),
            ValueType::U64 => numbers!(U64, u64, |r: &mut Self| r.u64(key)),
            ValueType::I64 => numbers!(I64, i64, |r: &mut Self| Ok::<_, GgufError>(
                i64::from_le_bytes(r.array(key)?)
            )),
            ValueType::F32 => numbers!(F32, f32, |r: &mut Self| Ok::<_, GgufError>(
                f32::from_le_bytes(r.array(key)?)
            )),
            ValueType::F64 => numbers!(F64, f64, |r: &mut Self| Ok::<_, GgufError>(
                f64::from_le_bytes(r.array(key)?)
            )),
            ValueType::Bool => numbers!(Bool, bool, |r: &mut Self| Ok::<_, GgufError>(
                r.array::<1>(key)?[0] != 0
            )),
            ValueType::String => {
                self.budget.charge(count, size_of::<usize>() as u64, key)?;
                let mut strings = Strings::with_capacity(n, 0);
                for _ in 0..n {
                    strings.push(self.str(key)?);
                }
                Array::String(strings)
            }
            ValueType::Array => {
                self.budget.charge(count, size_of::<Array>() as u64, key)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.array_value(key, depth + 1)?);
                }
                Array::Array(items)
            }
        };
        Ok(array)
    }

    fn tensor_info(&mut self) -> Result<TensorInfo> {
        let name = self.string("tensor name")?;
        let n_dims = self.u32("tensor dimension count")?;
        if n_dims > 4 {
            return Err(GgufError::TooManyDims { name, n_dims });
        }
        self.budget.charge(n_dims.into(), 8, "tensor shapes")?;
        let mut shape = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            shape.push(self.u64("tensor dimension")?);
        }
        let type_id = self.u32("tensor type")?;
        let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
            name: name.clone(),
            id: type_id,
        })?;
        let offset = self.u64("tensor offset")?;

        let bad = |reason: &str| GgufError::BadShape {
            name: name.clone(),
            shape: shape.clone(),
            ty,
            reason: reason.to_owned(),
        };
        let n_elements = checked_product(&shape).ok_or_else(|| bad("element count overflows"))?;
        if shape.first().copied().unwrap_or(1) % ty.block_size() != 0 {
            return Err(bad("row length is not a multiple of the block size"));
        }
        let size = ty
            .bytes_for(n_elements)
            .ok_or_else(|| bad("byte size overflows"))?;
        Ok(TensorInfo {
            name,
            shape,
            ty,
            offset,
            size,
        })
    }
}

/// Checks that every tensor lies inside a data section of `data_len` bytes.
pub(crate) fn check_bounds(tensors: &[TensorInfo], data_len: u64) -> Result<()> {
    for t in tensors {
        let end = t.offset.checked_add(t.size);
        if end.is_none_or(|end| end > data_len) {
            return Err(GgufError::TensorOutOfBounds {
                name: t.name.clone(),
                start: t.offset,
                end: end.unwrap_or(u64::MAX),
                data_len,
            });
        }
    }
    Ok(())
}
