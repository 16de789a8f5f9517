//! The tokenizer, built from GGUF metadata alone (`tokenizer.ggml.*`), for the tokenizer
//! models llama.cpp's suite covers (see docs/models.md, "Vocabularies"):
//!
//! - `gpt2`: byte-level BPE by merge rank ([`byte_level`]), with the pre-tokenizer that
//!   `tokenizer.ggml.pre` names (crate::pre_tokenize, on the `tokenizers` crate's splitting);
//! - `llama`: SentencePiece, merged by token score as llama.cpp does ([`spm`]);
//! - `gemma4`: BPE over raw UTF-8 with `▁` for spaces and byte fallback ([`gemma4`]).
//!
//! Control, unknown and user-defined tokens are matched as whole tokens anywhere in the text
//! (llama.cpp's `parse_special`); BOS and EOS are added exactly when llama.cpp adds them: per
//! `tokenizer.ggml.add_bos_token` / `add_eos_token`, else llama.cpp's default for the model.

mod byte_level;
mod gemma4;
mod special;
mod spm;
mod table;
#[cfg(test)]
mod tests;
mod vocab;

use runahead_gguf::Metadata;

use crate::{ModelError, Result};
use byte_level::{byte_level_token_bytes, ByteLevelBpe};
use gemma4::Gemma4;
use special::{partition, Fragment};
use table::Packed;
use vocab::{Kind, Vocab};

/// How text becomes ids, per tokenizer model.
enum Engine {
    Bpe(Box<ByteLevelBpe>),
    Spm,
    Gemma4(Box<Gemma4>),
}

/// A model's tokenizer.
pub struct Tokenizer {
    engine: Engine,
    vocab: Vocab,
    /// Special tokens in llama.cpp's matching order.
    specials: Vec<u32>,
    parse_special: bool,
    /// `[vocab]`: the bytes each token stands for when decoded.
    token_bytes: Packed,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// End-of-turn token (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, ...) when the
    /// vocabulary has one.
    pub eot: Option<u32>,
    /// Whether [`Tokenizer::encode`] starts with the BOS token.
    pub add_bos: bool,
    /// Whether [`Tokenizer::encode`] ends with the EOS token.
    pub add_eos: bool,
    /// `tokenizer.ggml.pre` (or the tokenizer model where it has none), for display.
    pub pre: String,
}

impl Tokenizer {
    pub fn from_metadata(meta: &Metadata) -> Result<Self> {
        let model = meta.str("tokenizer.ggml.model")?;
        let kind =
            match model {
                "gpt2" => Kind::Bpe,
                "llama" => Kind::Spm,
                "gemma4" => Kind::Gemma4,
                "bert" => return Err(ModelError::Tokenizer(
                    "tokenizer model 'bert' (WordPiece, for embedding models) is not supported \
                     (supported: gpt2, llama, gemma4)"
                        .into(),
                )),
                other => {
                    return Err(ModelError::Tokenizer(format!(
                        "tokenizer model '{other}' is not supported (supported: gpt2 (byte-level \
                     BPE), llama (SentencePiece), gemma4)"
                    )))
                }
            };
        let pre = match meta.get("tokenizer.ggml.pre") {
            Some(_) => Some(meta.str("tokenizer.ggml.pre")?),
            None => None,
        };
        let vocab = Vocab::from_metadata(meta, kind, pre)?;
        let (engine, specials, token_bytes, pre) = match kind {
            Kind::Bpe => {
                // llama.cpp splits a file that names no pre-tokenizer by its default rule.
                let pre = pre.unwrap_or("default");
                let merges = meta.strings("tokenizer.ggml.merges")?;
                let engine = Engine::Bpe(Box::new(ByteLevelBpe::new(&vocab, merges, pre)?));
                let bytes = byte_level_token_bytes(&vocab)?;
                (engine, vocab.special_tokens(), bytes, pre.to_owned())
            }
            Kind::Spm => {
                let bytes = spm_pieces(&vocab)?;
                (Engine::Spm, vocab.special_tokens(), bytes, "spm".to_owned())
            }
            Kind::Gemma4 => {
                let engine = Engine::Gemma4(Box::new(Gemma4::new(&vocab, merges(meta)?)?));
                let bytes = spm_pieces(&vocab)?;
                (engine, vocab.special_tokens(), bytes, "gemma4".to_owned())
            }
        };
        Ok(Tokenizer {
            engine,
            specials,
            parse_special: true,
            token_bytes,
            bos: vocab.bos,
            eos: vocab.eos,
            eot: vocab.eot,
            add_bos: vocab.add_bos,
            add_eos: vocab.add_eos,
            pre,
            vocab,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Token ids of `text`, with special tokens recognized in the text (see
    /// [`Tokenizer::set_parse_special`]) and BOS / EOS added when the model asks for them.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        if self.add_bos {
            ids.extend(self.bos);
        }
        match &self.engine {
            Engine::Bpe(bpe) => self.each_stretch(text, &mut ids, |stretch, ids| {
                bpe.tokenize(&self.vocab, stretch, ids)
            })?,
            Engine::Spm => {
                // A space is prefixed to the text and to the text after each special token.
                let mut after_special = true;
                for fragment in partition(text, &self.vocab, &self.specials, self.parse_special) {
                    match fragment {
                        Fragment::Token(id) => {
                            ids.push(id);
                            after_special = true;
                        }
                        Fragment::Text(start, end) => {
                            let mut piece = String::with_capacity(end - start + 3);
                            if self.vocab.add_space_prefix && after_special {
                                piece.push('\u{2581}');
                            }
                            piece.push_str(&text[start..end].replace(' ', "\u{2581}"));
                            spm::tokenize(&self.vocab, &piece, &mut ids)?;
                            after_special = false;
                        }
                    }
                }
            }
            Engine::Gemma4(gemma4) => self.each_stretch(text, &mut ids, |stretch, ids| {
                gemma4.tokenize(&self.vocab, stretch, ids)
            })?,
        }
        if self.add_eos {
            ids.extend(self.eos);
        }
        Ok(ids)
    }

    /// Appends the ids of `text` to `ids`: its special tokens as they are, each stretch of
    /// text between them as `tokenize` spells it.
    fn each_stretch(
        &self,
        text: &str,
        ids: &mut Vec<u32>,
        mut tokenize: impl FnMut(&str, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        for fragment in partition(text, &self.vocab, &self.specials, self.parse_special) {
            match fragment {
                Fragment::Token(id) => ids.push(id),
                Fragment::Text(start, end) => tokenize(&text[start..end], ids)?,
            }
        }
        Ok(())
    }

    /// The ids of a prompt rendered by the model's chat template: as [`Tokenizer::encode`], but
    /// a BOS the template wrote itself is not added a second time (llama.cpp drops the BOS text
    /// from the start of a rendered prompt when the model adds a BOS).
    pub fn encode_rendered(&self, rendered: &str) -> Result<Vec<u32>> {
        let bos_text = self.bos.map(|id| self.token_text(id)).unwrap_or_default();
        match rendered.strip_prefix(bos_text.as_str()) {
            Some(rest) if self.add_bos && !bos_text.is_empty() => self.encode(rest),
            _ => self.encode(rendered),
        }
    }

    /// Whether `encode` recognizes control-token text as those tokens (the default, llama.cpp's
    /// `parse_special = true`) or tokenizes it as ordinary text (`false`: for text that must not
    /// smuggle in control tokens, and for llama.cpp's test suite). User-defined tokens are
    /// matched either way, as in llama.cpp.
    pub fn set_parse_special(&mut self, parse: bool) {
        self.parse_special = parse;
    }

    /// The bytes a token stands for (control tokens: their text).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.token_bytes.get(id as usize)
    }

    /// Whether a token is a control token (`<|im_start|>`, `<|eot_id|>`, ...) or another token
    /// matched as a whole in text (user-defined, unknown): text that a grammar never spells.
    pub fn is_special(&self, id: u32) -> bool {
        use vocab::attr;
        self.vocab.attrs.get(id as usize).is_some_and(|&a| {
            a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN | attr::UNUSED) != 0
        })
    }

    /// The text of a token as it appears in the vocabulary, for display.
    pub fn token_text(&self, id: u32) -> String {
        String::from_utf8_lossy(self.token_bytes(id)).into_owned()
    }

    /// Whether generation should stop after this token: EOS, end-of-turn, or another token
    /// llama.cpp ends generation on (`<|endoftext|>`, `<|eom_id|>`, Gemma 4's `<turn|>`, ...).
    pub fn is_end(&self, id: u32) -> bool {
        Some(id) == self.eos || Some(id) == self.eot || self.vocab.eog.binary_search(&id).is_ok()
    }

    /// The text of a sequence of tokens that continues a text (generated tokens): each token's
    /// bytes in turn, as [`Tokenizer::decoder`] streams them; invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The text of a whole tokenized text, the inverse of [`Tokenizer::encode`] (llama.cpp's
    /// `llama_detokenize` with special tokens rendered): as [`Tokenizer::decode`], but where
    /// the model prefixes a space when encoding (SentencePiece), the first token's leading
    /// space is dropped.
    pub fn detokenize(&self, ids: &[u32]) -> String {
        let mut bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        if self.vocab.add_space_prefix {
            if let Some(&first) = ids.first() {
                if self.token_bytes(first).first() == Some(&b' ') {
                    bytes.remove(0);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Checks that a draft model with tokenizer `draft` speaks this tokenizer's language: the
    /// same vocabulary size, the same text for every token, the same special tokens. Token ids
    /// pass between the two models unchanged, so anything less would make drafts meaningless.
    pub fn check_draft_compatible(&self, draft: &Tokenizer) -> Result<()> {
        let fail = |why: String| Err(ModelError::IncompatibleDraft(why));
        if self.vocab_size() != draft.vocab_size() {
            return fail(format!(
                "the draft's vocabulary has {} tokens, the target's {}",
                draft.vocab_size(),
                self.vocab_size()
            ));
        }
        if let Some(id) =
            (0..self.vocab_size() as u32).find(|&i| self.token_bytes(i) != draft.token_bytes(i))
        {
            return fail(format!(
                "token {id} is {:?} in the target but {:?} in the draft",
                self.token_text(id),
                draft.token_text(id)
            ));
        }
        for (what, a, b) in [
            ("BOS", self.bos, draft.bos),
            ("EOS", self.eos, draft.eos),
            ("end-of-turn", self.eot, draft.eot),
        ] {
            if a != b {
                return fail(format!("{what} token differs: target {a:?}, draft {b:?}"));
            }
        }
        if self.add_bos != draft.add_bos {
            return fail("one model adds a BOS token and the other does not".into());
        }
        if self.add_eos != draft.add_eos {
            return fail("one model adds an EOS token and the other does not".into());
        }
        Ok(())
    }

    /// A streaming decoder for this tokenizer.
    pub fn decoder(&self) -> TokenDecoder<'_> {
        TokenDecoder {
            tokenizer: self,
            pending: Vec::new(),
        }
    }
}

/// Turns tokens into text as they arrive, holding back bytes of a character that a later token
/// completes, so every piece it returns is valid UTF-8 and the pieces join to exactly the text
/// [`Tokenizer::decode`] gives for the whole sequence.
pub struct TokenDecoder<'a> {
    tokenizer: &'a Tokenizer,
    pending: Vec<u8>,
}

impl TokenDecoder<'_> {
    /// Adds a token and returns the text that became complete.
    pub fn push(&mut self, id: u32) -> String {
        self.pending
            .extend_from_slice(self.tokenizer.token_bytes(id));
        // Invalid sequences become U+FFFD one by one, as `String::from_utf8_lossy` replaces
        // them in the whole text; only an incomplete character at the very end waits. (Flushing
        // everything at the first invalid byte would also replace a character that the next
        // token completes, and the streamed text would differ from `decode`'s.)
        let mut text = String::new();
        let mut rest = self.pending.as_slice();
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        text
    }

    /// Returns what is still held back (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// The bytes of every token of a vocabulary that spells spaces as `▁` and bytes as `<0xXX>`.
fn spm_pieces(vocab: &Vocab) -> Result<Packed> {
    let mut pieces = Packed::with_capacity(vocab.len(), 0);
    for id in 0..vocab.len() {
        pieces.push(&vocab.spm_piece(id))?;
    }
    pieces.shrink_to_fit();
    Ok(pieces)
}

/// `tokenizer.ggml.merges` as pairs, split at the first space after the first byte (as
/// llama.cpp splits them, so a token may start with a space).
fn merges(meta: &Metadata) -> Result<Vec<(String, String)>> {
    meta.strings("tokenizer.ggml.merges")?
        .iter()
        .map(|m| {
            m.as_bytes()
                .iter()
                .skip(1)
                .position(|&b| b == b' ')
                .map(|at| (m[..at + 1].to_owned(), m[at + 2..].to_owned()))
                .ok_or_else(|| ModelError::Tokenizer(format!("malformed merge '{m}'")))
        })
        .collect()
}
