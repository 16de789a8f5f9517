//! Token strings stored end to end in one buffer, indexed by id (the texts in the GGUF reader's
//! [`Strings`], the decoded bytes in [`Packed`]), and a hash index from text to id that points
//! into that buffer instead of keeping its own copy of every string. A vocabulary
//! of 150,000-260,000 tokens held as one `String` per token (plus a map with another copy)
//! costs several times its text: this keeps the text once and 4-9 bytes a token beside it,
//! which is what a page keeps in wasm memory while the weights stream to the GPU.

use hashbrown::HashTable;
use runahead_gguf::Strings;

use crate::{ModelError, Result};

/// Byte strings indexed by id, stored end to end.
#[derive(Default)]
pub(crate) struct Packed {
    bytes: Vec<u8>,
    /// `[n]`: where each string ends in `bytes`.
    ends: Vec<u32>,
}

impl Packed {
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        Packed {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    pub fn push(&mut self, s: &[u8]) -> Result<()> {
        self.bytes.extend_from_slice(s);
        let end = u32::try_from(self.bytes.len()).map_err(|_| {
            ModelError::Tokenizer("the vocabulary's tokens take more than 4 GiB".into())
        })?;
        self.ends.push(end);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `i`-th string (empty past the end).
    pub fn get(&self, i: usize) -> &[u8] {
        let Some(&end) = self.ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start as usize..end as usize]
    }

    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// A vocabulary's token texts by id, and the first id of each text.
pub(crate) struct TokenTexts {
    texts: Strings,
    /// Ids, found by the hash of their text (the first id of a text that occurs twice).
    index: HashTable<u32>,
    hasher: ahash::RandomState,
}

impl TokenTexts {
    pub fn new<S: AsRef<str>>(texts: impl ExactSizeIterator<Item = S>) -> Result<Self> {
        let mut strings = Strings::with_capacity(texts.len(), 0);
        for t in texts {
            strings.push(t.as_ref());
        }
        strings.shrink_to_fit();
        if u32::try_from(strings.len()).is_err() {
            return Err(ModelError::Tokenizer(format!(
                "{} tokens is beyond any model",
                strings.len()
            )));
        }
        let hasher = ahash::RandomState::new();
        let get = |i: u32| strings.get(i as usize).unwrap_or_default();
        let mut index = HashTable::with_capacity(strings.len());
        for id in 0..strings.len() as u32 {
            let text = get(id);
            let hash = hasher.hash_one(text);
            if index.find(hash, |&other| get(other) == text).is_none() {
                index.insert_unique(hash, id, |&i| hasher.hash_one(get(i)));
            }
        }
        Ok(TokenTexts {
            texts: strings,
            index,
            hasher,
        })
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// The text of token `id` (empty past the end).
    pub fn get(&self, id: usize) -> &str {
        self.texts.get(id).unwrap_or_default()
    }

    /// The first id whose text is `text`.
    pub fn id(&self, text: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(text);
        self.index
            .find(hash, |&i| self.get(i as usize) == text)
            .copied()
    }

    /// `(text, id)` for each distinct text, with the first id of a text that occurs twice.
    pub fn first_ids(&self) -> impl Iterator<Item = (&str, u32)> {
        self.index.iter().map(|&id| (self.get(id as usize), id))
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.texts.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_by_id_and_ids_by_text() {
        let words = ["a", "", "bc", "a", "é▁x", "bc"];
        let t = TokenTexts::new(words.iter().copied()).unwrap();
        assert_eq!(t.len(), 6);
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.get(i), *w);
        }
        assert_eq!(t.get(6), "");
        assert_eq!(t.id("a"), Some(0));
        assert_eq!(t.id("bc"), Some(2));
        assert_eq!(t.id(""), Some(1));
        assert_eq!(t.id("é▁x"), Some(4));
        assert_eq!(t.id("b"), None);
        let mut first: Vec<(&str, u32)> = t.first_ids().collect();
        first.sort_by_key(|&(_, id)| id);
        assert_eq!(first, [("a", 0), ("", 1), ("bc", 2), ("é▁x", 4)]);
        assert_eq!(t.iter().collect::<Vec<_>>(), words);
    }

    #[test]
    fn packed_bytes() {
        let mut p = Packed::default();
        for s in [&b"\xff\x00"[..], b"", b"xyz"] {
            p.push(s).unwrap();
        }
        assert_eq!(p.get(0), b"\xff\x00");
        assert_eq!(p.get(1), b"");
        assert_eq!(p.get(2), b"xyz");
        assert_eq!(p.get(3), b"");
        assert_eq!(p.len(), 3);
    }
}
