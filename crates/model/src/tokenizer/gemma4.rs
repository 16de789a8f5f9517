//! Gemma 4's tokenizer (`tokenizer.ggml.model = gemma4`), as llama.cpp runs it: BPE by merge
//! rank over the raw UTF-8 text (no byte-level alphabet), spaces written as `▁`, the text cut
//! only into runs of newlines and runs of everything else, and what merges do not reach
//! spelled with byte tokens (`<0xXX>`). A run of newlines that is itself a token is that token
//! (llama.cpp's fix for Gemma 4's newline tokens, which the merges do not build).
//!
//! The merging is `tokenizers`' `BPE` with byte fallback, called on each run: it merges the
//! lowest-ranked pair first, leftmost on ties, as llama.cpp does.

use tokenizers::models::bpe::BPE;
use tokenizers::Model;

use super::vocab::Vocab;
use crate::{ModelError, Result};

pub(crate) struct Gemma4 {
    bpe: BPE,
}

impl Gemma4 {
    pub fn new(vocab: &Vocab, merges: Vec<(String, String)>) -> Result<Self> {
        let map: ahash::AHashMap<String, u32> = vocab
            .tokens
            .first_ids()
            .map(|(t, id)| (t.to_owned(), id))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(map, merges)
            .byte_fallback(true)
            .build()
            .map_err(|e| ModelError::Tokenizer(format!("building Gemma 4's BPE: {e}")))?;
        Ok(Gemma4 { bpe })
    }

    /// Appends the ids of one stretch of text between special tokens to `out`.
    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let escaped = text.replace(' ', "\u{2581}");
        for run in newline_runs(&escaped) {
            if run.bytes().all(|b| b == b'\n') {
                if let Some(id) = vocab.id(run) {
                    out.push(id);
                    continue;
                }
            }
            let tokens = self
                .bpe
                .tokenize(run)
                .map_err(|e| ModelError::Tokenizer(format!("encoding: {e}")))?;
            out.extend(tokens.iter().map(|t| t.id));
        }
        Ok(())
    }
}

/// `text` cut into maximal runs of `\n` and of everything else.
fn newline_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let newline = bytes[start] == b'\n';
        let len = bytes[start..]
            .iter()
            .position(|&b| (b == b'\n') != newline)
            .unwrap_or(bytes.len() - start);
        let run = &text[start..start + len];
        start += len;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::newline_runs;

    #[test]
    fn runs_of_newlines_and_of_the_rest() {
        let runs: Vec<&str> = newline_runs("a b\n\nc\n").collect();
        assert_eq!(runs, ["a b", "\n\n", "c", "\n"]);
        assert_eq!(newline_runs("").count(), 0);
    }
}
