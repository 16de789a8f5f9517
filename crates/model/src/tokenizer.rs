//! The tokenizer, built from GGUF metadata alone (`tokenizer.ggml.*`), for the tokenizer
//! models llama.cpp's suite covers (see docs/models.md, "Vocabularies"):
//!
//! - `gpt2`: byte-level BPE on the `tokenizers` crate, with the pre-tokenizer that
//!   `tokenizer.ggml.pre` names (crate::pre_tokenize);
//! - `llama`: SentencePiece, merged by token score as llama.cpp does ([`spm`]);
//! - `gemma4`: BPE over raw UTF-8 with `▁` for spaces and byte fallback ([`gemma4`]).
//!
//! Control, unknown and user-defined tokens are matched as whole tokens anywhere in the text
//! (llama.cpp's `parse_special`); BOS and EOS are added exactly when llama.cpp adds them: per
//! `tokenizer.ggml.add_bos_token` / `add_eos_token`, else llama.cpp's default for the model.

mod gemma4;
mod special;
mod spm;
mod vocab;

use std::collections::HashMap;

use runahead_gguf::Metadata;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, TokenizerImpl};

use crate::pre_tokenize::{pre_tokenizer, PreTokenize};
use crate::{ModelError, Result};
use gemma4::Gemma4;
use special::{partition, Fragment};
use vocab::{attr, Kind, Vocab};

/// `tokenizers`' pipeline with runahead's pre-tokenizer (see [`PreTokenize`]).
type Bpe = TokenizerImpl<BPE, NormalizerWrapper, PreTokenize, PostProcessorWrapper, DecoderWrapper>;

/// How text becomes ids, per tokenizer model.
enum Engine {
    Bpe(Box<Bpe>),
    Spm,
    Gemma4(Box<Gemma4>),
}

/// A model's tokenizer.
pub struct Tokenizer {
    engine: Engine,
    vocab: Vocab,
    /// Special tokens in llama.cpp's matching order (SentencePiece and Gemma 4; the `gpt2`
    /// pipeline matches its own added tokens).
    specials: Vec<u32>,
    parse_special: bool,
    /// Bytes each token stands for when decoded.
    token_bytes: Vec<Vec<u8>>,
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
                let (engine, bytes) = byte_level_bpe(&vocab, &merges(meta)?, pre)?;
                (engine, Vec::new(), bytes, pre.to_owned())
            }
            Kind::Spm => {
                let bytes = (0..vocab.len()).map(|i| vocab.spm_piece(i)).collect();
                (Engine::Spm, vocab.special_tokens(), bytes, "spm".to_owned())
            }
            Kind::Gemma4 => {
                let engine = Engine::Gemma4(Box::new(Gemma4::new(&vocab, merges(meta)?)?));
                let bytes = (0..vocab.len()).map(|i| vocab.spm_piece(i)).collect();
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
            Engine::Bpe(inner) => {
                let enc = inner
                    .encode_fast(text, false)
                    .map_err(|e| ModelError::Tokenizer(format!("encoding: {e}")))?;
                ids.extend_from_slice(enc.get_ids());
            }
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
            Engine::Gemma4(gemma4) => {
                for fragment in partition(text, &self.vocab, &self.specials, self.parse_special) {
                    match fragment {
                        Fragment::Token(id) => ids.push(id),
                        Fragment::Text(start, end) => {
                            gemma4.tokenize(&self.vocab, &text[start..end], &mut ids)?
                        }
                    }
                }
            }
        }
        if self.add_eos {
            ids.extend(self.eos);
        }
        Ok(ids)
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
        if let Engine::Bpe(inner) = &mut self.engine {
            inner.set_encode_special_tokens(!parse);
        }
    }

    /// The bytes a token stands for (control tokens: their text).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.token_bytes
            .get(id as usize)
            .map_or(&[], |b| b.as_slice())
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

/// `tokenizer.ggml.merges` as pairs, split at the first space after the first byte (as
/// llama.cpp splits them, so a token may start with a space).
fn merges(meta: &Metadata) -> Result<Vec<(String, String)>> {
    meta.strings("tokenizer.ggml.merges")?
        .into_iter()
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

/// The `tokenizers` pipeline of a byte-level BPE vocabulary, and the bytes of each token.
fn byte_level_bpe(
    vocab: &Vocab,
    merges: &[(String, String)],
    pre: &str,
) -> Result<(Engine, Vec<Vec<u8>>)> {
    let map: ahash::AHashMap<String, u32> =
        vocab.ids.iter().map(|(t, &id)| (t.clone(), id)).collect();
    let split = pre_tokenizer(pre)?;
    let bpe = BPE::builder()
        .vocab_and_merges(map, merges.to_vec())
        .ignore_merges(split.ignore_merges)
        .build()
        .map_err(|e| ModelError::Tokenizer(format!("building BPE: {e}")))?;
    let mut inner = Bpe::new(bpe);
    inner.with_pre_tokenizer(Some(split.pre_tokenizer));
    inner.with_decoder(Some(ByteLevelDecoder::default()));
    // Both kinds are matched as whole tokens in the text, but only control and unknown tokens
    // are "special": llama.cpp's parse_special = false still matches user-defined ones
    // (GPT-NeoX's runs of spaces, for one), and `set_encode_special_tokens` skips special ones
    // only.
    let added = |special: bool| -> Vec<AddedToken> {
        vocab
            .tokens
            .iter()
            .zip(&vocab.attrs)
            .filter(|(_, &a)| {
                let is_special = a & (attr::CONTROL | attr::UNKNOWN) != 0;
                is_special == special && (is_special || a & attr::USER_DEFINED != 0)
            })
            .map(|(t, &a)| {
                AddedToken::from(t.clone(), special)
                    .normalized(false)
                    .lstrip(a & attr::LSTRIP != 0)
                    .rstrip(a & attr::RSTRIP != 0)
            })
            .collect()
    };
    inner.add_special_tokens(&added(true));
    inner.add_tokens(&added(false));

    let byte_of = byte_decoder();
    let token_bytes = vocab
        .tokens
        .iter()
        .zip(&vocab.attrs)
        .map(|(t, &a)| {
            if a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
                t.as_bytes().to_vec()
            } else {
                let mut bytes = Vec::with_capacity(t.len());
                for ch in t.chars() {
                    match byte_of.get(&ch) {
                        Some(&b) => bytes.push(b),
                        None => bytes.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                bytes
            }
        })
        .collect();
    Ok((Engine::Bpe(Box::new(inner)), token_bytes))
}

/// Inverse of GPT-2's byte-to-unicode map: byte-level BPE spells byte `b` as the character
/// `b` itself when printable, else as U+0100 + n for the n-th non-printable byte.
fn byte_decoder() -> HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
    let mut map = HashMap::with_capacity(256);
    let mut n = 0u32;
    for b in 0..=255u8 {
        if printable(b) {
            map.insert(b as char, b);
        } else {
            map.insert(char::from_u32(256 + n).unwrap_or('\u{fffd}'), b);
            n += 1;
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use runahead_gguf::{GgufFile, GgufWriter, Value, ValueType};

    use super::*;
    use crate::testing::TinyModel;

    /// A tiny vocabulary whose merges reach "ab" + "c" but never "abc", which is a token of its
    /// own, with a control and a user-defined token.
    fn tiny(pre: &str) -> Tokenizer {
        let tokens = [
            "a", "b", "c", "ab", "abc", "<", "|", "x", ">", "<|x|>", "<x>",
        ];
        // Normal, but "<|x|>" control and "<x>" user-defined.
        let types: Vec<Value> = [1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4]
            .into_iter()
            .map(Value::I32)
            .collect();
        let mut w = GgufWriter::new();
        w.meta_str("tokenizer.ggml.model", "gpt2")
            .meta_str("tokenizer.ggml.pre", pre)
            .meta_strings("tokenizer.ggml.tokens", &tokens)
            .meta_strings("tokenizer.ggml.merges", &["a b"])
            .meta(
                "tokenizer.ggml.token_type",
                Value::Array(ValueType::I32, types),
            );
        let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
        Tokenizer::from_metadata(&file.header.metadata).unwrap()
    }

    #[test]
    fn llama3_takes_a_whole_pre_token_from_the_vocabulary() {
        assert_eq!(tiny("llama-bpe").encode("abc").unwrap(), [4]);
        assert_eq!(tiny("llama3").encode("abc").unwrap(), [4]);
        // Pre-tokenizers without ignore_merges only merge.
        assert_eq!(tiny("gpt-2").encode("abc").unwrap(), [3, 2]);
        assert_eq!(tiny("qwen2").encode("abc").unwrap(), [3, 2]);
        assert_eq!(tiny("smollm").encode("abc").unwrap(), [3, 2]);
    }

    #[test]
    fn parse_special_off_tokenizes_control_text_as_text() {
        let mut tok = tiny("gpt-2");
        assert_eq!(tok.encode("<|x|><x>").unwrap(), [9, 10]);
        // As llama.cpp: control tokens become text, user-defined ones are still matched.
        tok.set_parse_special(false);
        assert_eq!(tok.encode("<|x|><x>").unwrap(), [5, 6, 7, 6, 8, 10]);
        tok.set_parse_special(true);
        assert_eq!(tok.encode("<|x|><x>").unwrap(), [9, 10]);
    }

    /// Found by fuzzing (fuzz/, target `tokenizer`): after an invalid byte, the streaming
    /// decoder replaced the start of the next character too ("\u{fffd}\u{fffd}" where decode
    /// gives "\u{fffd}€" for E1 E2 82 AC). Every sequence of three byte tokens drawn from
    /// ASCII, continuation, lead and never-valid bytes must stream to exactly the text decode
    /// gives.
    #[test]
    fn streaming_decode_equals_decode_after_invalid_bytes() {
        let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
        let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
        let id_of = |b: u8| {
            (0..tok.vocab_size() as u32)
                .find(|&id| tok.token_bytes(id) == [b])
                .unwrap()
        };
        let bytes = [0x41, 0x80, 0x82, 0xac, 0xbc, 0xc3, 0xe1, 0xe2, 0xf0, 0xff];
        let ids: Vec<u32> = bytes.iter().map(|&b| id_of(b)).collect();
        let stream = |seq: &[u32]| {
            let mut decoder = tok.decoder();
            let mut text: String = seq.iter().map(|&id| decoder.push(id)).collect();
            text.push_str(&decoder.finish());
            text
        };
        let mut sequences = vec![
            [0xe1, 0xe2, 0x82, 0xac].map(id_of).to_vec(),
            [0xff, 0xe2, 0x82, 0xac, 0x41].map(id_of).to_vec(),
        ];
        for &a in &ids {
            for &b in &ids {
                for &c in &ids {
                    sequences.push(vec![a, b, c]);
                }
            }
        }
        for seq in &sequences {
            assert_eq!(stream(seq), tok.decode(seq), "{seq:?}");
        }
        assert_eq!(stream(&sequences[0]), "\u{fffd}€");
    }
}
