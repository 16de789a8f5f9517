//! SentencePiece vocabularies from GGUF (`tokenizer.ggml.model = llama`: Llama 1/2, Mistral
//! v0.1, Phi-3, Gemma 1-3, Baichuan), tokenized as llama.cpp's `llm_tokenizer_spm` does.
//!
//! This is implemented here rather than on a `tokenizers` model because none reproduces
//! llama.cpp's ids: llama.cpp splits the text into characters and repeatedly merges the
//! adjacent pair whose concatenation is the vocabulary token with the highest score (ties:
//! the leftmost pair), with no merge list and no pre-split into words; `tokenizers`' `Unigram`
//! finds the most likely segmentation instead (a different answer wherever the greedy merges
//! are not optimal), and its `BPE` merges by a list of ranked pairs, which a vocabulary of
//! scores does not have. What is left unmerged and is not a token is spelled with byte tokens
//! (`<0xXX>`). llama.cpp's suite (llama-spm, phi-3) checks these ids exactly.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;
use crate::{ModelError, Result};

/// A candidate merge of two adjacent symbols.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    /// Bytes of the merged text, to tell a stale candidate (a side merged since) from a live one.
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// The max-heap pops the highest score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// A run of the text: bytes `start..start + len`, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Appends the ids of `text` (spaces already written as `▁`) to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<()> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, ch) in text.char_indices() {
        let index = symbols.len();
        symbols.push(Symbol {
            start,
            len: ch.len_utf8(),
            prev: index.checked_sub(1),
            next: None,
        });
        if index > 0 {
            symbols[index - 1].next = Some(index);
        }
    }
    let mut queue = BinaryHeap::new();
    let candidate = |symbols: &[Symbol], left: usize, right: usize| -> Option<Bigram> {
        let (l, r) = (symbols[left], symbols[right]);
        let merged = text.get(l.start..l.start + l.len + r.len)?;
        let id = vocab.id(merged)?;
        Some(Bigram {
            score: vocab.scores[id as usize],
            left,
            right,
            len: merged.len(),
        })
    };
    for i in 1..symbols.len() {
        queue.extend(candidate(&symbols, i - 1, i));
    }
    while let Some(b) = queue.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
            continue;
        }
        symbols[b.left].len += r.len;
        symbols[b.right].len = 0;
        symbols[b.left].next = r.next;
        if let Some(next) = r.next {
            symbols[next].prev = Some(b.left);
        }
        if let Some(prev) = symbols[b.left].prev {
            queue.extend(candidate(&symbols, prev, b.left));
        }
        if let Some(next) = symbols[b.left].next {
            queue.extend(candidate(&symbols, b.left, next));
        }
    }
    let mut at = if symbols.is_empty() { None } else { Some(0) };
    while let Some(i) = at {
        let s = symbols[i];
        let piece = text.get(s.start..s.start + s.len).unwrap_or_default();
        match vocab.id(piece) {
            Some(id) => out.push(id),
            None => {
                for &byte in piece.as_bytes() {
                    out.push(vocab.byte_token(byte).ok_or_else(|| {
                        ModelError::Tokenizer(format!(
                            "the vocabulary has no token for byte 0x{byte:02X} (no <0x{byte:02X}>)"
                        ))
                    })?);
                }
            }
        }
        at = s.next;
    }
    Ok(())
}
