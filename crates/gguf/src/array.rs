//! Metadata arrays, each element type in a compact form: numbers in a vector of their own type,
//! strings end to end in one buffer. A vocabulary's arrays (150,000-260,000 token texts, types
//! and scores, and as many merges) are most of a header; as one 16-32-byte value per element
//! (plus an allocation per string) they took three to four times their size in the file.

use crate::metadata::{Value, ValueType};

/// Strings stored end to end, indexed by position.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Strings {
    text: String,
    /// `[len]`: where each string ends in `text`.
    ends: Vec<usize>,
}

impl Strings {
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        Strings {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }
}

impl<S: AsRef<str>> FromIterator<S> for Strings {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut strings = Strings::default();
        for s in iter {
            strings.push(s.as_ref());
        }
        strings
    }
}

/// The elements of a metadata array, all of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    String(Strings),
    /// Arrays of arrays (each inner array of its own element type).
    Array(Vec<Array>),
}

impl Array {
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F32(_) => ValueType::F32,
            Array::F64(_) => ValueType::F64,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th element as a value (a string or an inner array is copied).
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.to_owned()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
        })
    }

    /// Every element as a value, in order (see [`Array::get`]).
    pub fn values(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The strings of an array of strings.
    pub fn strings(&self) -> Option<&Strings> {
        match self {
            Array::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array of values of type `ty`, `None` when one of them has another type.
    pub fn from_values(ty: ValueType, items: impl IntoIterator<Item = Value>) -> Option<Array> {
        fn all<T>(
            items: impl IntoIterator<Item = Value>,
            f: impl Fn(Value) -> Option<T>,
        ) -> Option<Vec<T>> {
            items.into_iter().map(f).collect()
        }
        macro_rules! typed {
            ($variant:ident) => {
                Array::$variant(all(items, |v| match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                })?)
            };
        }
        Some(match ty {
            ValueType::U8 => typed!(U8),
            ValueType::I8 => typed!(I8),
            ValueType::U16 => typed!(U16),
            ValueType::I16 => typed!(I16),
            ValueType::U32 => typed!(U32),
            ValueType::I32 => typed!(I32),
            ValueType::U64 => typed!(U64),
            ValueType::I64 => typed!(I64),
            ValueType::F32 => typed!(F32),
            ValueType::F64 => typed!(F64),
            ValueType::Bool => typed!(Bool),
            ValueType::String => {
                let mut strings = Strings::default();
                for v in items {
                    match v {
                        Value::String(s) => strings.push(&s),
                        _ => return None,
                    }
                }
                Array::String(strings)
            }
            ValueType::Array => typed!(Array),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_end_to_end() {
        let s: Strings = ["ab", "", "ç▁d"].iter().collect();
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(0), Some("ab"));
        assert_eq!(s.get(1), Some(""));
        assert_eq!(s.get(2), Some("ç▁d"));
        assert_eq!(s.get(3), None);
        assert_eq!(s.iter().collect::<Vec<_>>(), ["ab", "", "ç▁d"]);
    }

    #[test]
    fn arrays_from_values_and_back() {
        let a = Array::from_values(ValueType::I32, [Value::I32(1), Value::I32(-2)]).unwrap();
        assert_eq!(a, Array::I32(vec![1, -2]));
        assert_eq!(a.len(), 2);
        assert_eq!(a.get(1), Some(Value::I32(-2)));
        assert_eq!(
            a.values().collect::<Vec<_>>(),
            [Value::I32(1), Value::I32(-2)]
        );
        assert_eq!(
            Array::from_values(ValueType::I32, [Value::I32(1), Value::U8(2)]),
            None
        );
        let s = Array::from_values(ValueType::String, [Value::String("x".into())]).unwrap();
        assert_eq!(s.elem_type(), ValueType::String);
        assert_eq!(s.strings().and_then(|s| s.get(0)), Some("x"));
        let nested = Array::from_values(ValueType::Array, [Value::Array(a.clone())]).unwrap();
        assert_eq!(nested.get(0), Some(Value::Array(a)));
    }
}
