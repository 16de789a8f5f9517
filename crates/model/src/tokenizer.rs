//! The tokenizer, built from GGUF metadata alone (`tokenizer.ggml.*`), on the `tokenizers`
//! crate: byte-level BPE with the pre-tokenizer that `tokenizer.ggml.pre` names, and the
//! control / user-defined tokens matched as whole tokens anywhere in the text (as llama.cpp
//! does with `parse_special`).

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

/// GGUF token types (`tokenizer.ggml.token_type`).
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

/// `tokenizers`' pipeline with runahead's pre-tokenizer (see [`PreTokenize`]).
type Bpe = TokenizerImpl<BPE, NormalizerWrapper, PreTokenize, PostProcessorWrapper, DecoderWrapper>;

/// A model's tokenizer.
pub struct Tokenizer {
    inner: Bpe,
    /// Bytes each token stands for when decoded.
    token_bytes: Vec<Vec<u8>>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// End-of-turn token (`<|im_end|>`, `<|eot_id|>`) when the vocabulary has one.
    pub eot: Option<u32>,
    pub add_bos: bool,
    /// `tokenizer.ggml.pre`, for display.
    pub pre: String,
}

impl Tokenizer {
    pub fn from_metadata(meta: &Metadata) -> Result<Self> {
        let model = meta.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(ModelError::Tokenizer(format!(
                "tokenizer model '{model}' is not supported (only byte-level BPE, 'gpt2')"
            )));
        }
        // A file that names no pre-tokenizer is split by llama.cpp's default rule (punctuation
        // runs apart, digits in threes), which runahead does not implement: refused rather
        // than split another way (llama.cpp's suite: aquila, gpt-neox).
        let pre = match meta.get("tokenizer.ggml.pre") {
            Some(_) => meta.str("tokenizer.ggml.pre")?,
            None => {
                return Err(ModelError::Tokenizer(
                    "the model names no pre-tokenizer (tokenizer.ggml.pre): runahead splits \
                     text only by the rules of the pre-tokenizers it names; re-convert the \
                     model with a recent llama.cpp"
                        .into(),
                ))
            }
        };
        let tokens = meta.strings("tokenizer.ggml.tokens")?;
        let types: Vec<i64> = match meta.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .as_array()
                .ok_or_else(|| ModelError::Tokenizer("token_type is not an array".into()))?
                .iter()
                .map(|t| t.as_f64().map(|f| f as i64).unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(ModelError::Tokenizer(
                "token_type and tokens differ in length".into(),
            ));
        }
        let merges = meta
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .ok_or_else(|| ModelError::Tokenizer(format!("malformed merge '{m}'")))
            })
            .collect::<Result<Vec<_>>>()?;

        let mut vocab = ahash::AHashMap::with_capacity(tokens.len());
        for (id, t) in tokens.iter().enumerate() {
            // Keep the first id of a duplicated string, as llama.cpp's lookup does.
            vocab.entry((*t).to_owned()).or_insert(id as u32);
        }
        let split = pre_tokenizer(pre)?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(split.ignore_merges)
            .build()
            .map_err(|e| ModelError::Tokenizer(format!("building BPE: {e}")))?;
        let mut inner = Bpe::new(bpe);
        inner.with_pre_tokenizer(Some(split.pre_tokenizer));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        // Both kinds are matched as whole tokens in the text, but only control tokens are
        // "special": llama.cpp's parse_special = false still matches user-defined ones (GPT-NeoX's
        // runs of spaces, for one), and `set_encode_special_tokens` skips special ones only.
        let added = |kind: i64| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&types)
                .filter(|(_, &ty)| ty == kind)
                .map(|(t, _)| {
                    AddedToken::from(t.to_string(), kind == TYPE_CONTROL).normalized(false)
                })
                .collect()
        };
        inner.add_special_tokens(&added(TYPE_CONTROL));
        inner.add_tokens(&added(TYPE_USER_DEFINED));

        let byte_of = byte_decoder();
        let token_bytes = tokens
            .iter()
            .zip(&types)
            .map(|(t, &ty)| {
                if ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED {
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

        let id = |key: &str| -> Result<Option<u32>> {
            Ok(meta
                .opt(key, |m, k| m.u64(k))?
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| (v as usize) < tokens.len()))
        };
        let find = |text: &str| tokens.iter().position(|t| *t == text).map(|i| i as u32);
        let eot = id("tokenizer.ggml.eot_token_id")?
            .or_else(|| find("<|im_end|>"))
            .or_else(|| find("<|eot_id|>"));
        Ok(Tokenizer {
            inner,
            token_bytes,
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos: id("tokenizer.ggml.eos_token_id")?,
            eot,
            add_bos: meta
                .get("tokenizer.ggml.add_bos_token")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
            pre: pre.to_owned(),
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Token ids of `text`, with control tokens recognized in the text and a BOS prepended
    /// when the model's metadata asks for one.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| ModelError::Tokenizer(format!("encoding: {e}")))?;
        let mut ids = Vec::with_capacity(enc.get_ids().len() + 1);
        if self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Whether `encode` recognizes control-token text as those tokens (the default, llama.cpp's
    /// `parse_special = true`) or tokenizes it as ordinary text (`false`: for text that must not
    /// smuggle in control tokens, and for llama.cpp's test suite). User-defined tokens are
    /// matched either way, as in llama.cpp.
    pub fn set_parse_special(&mut self, parse: bool) {
        self.inner.set_encode_special_tokens(!parse);
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

    /// Whether generation should stop after this token (EOS or end-of-turn).
    pub fn is_end(&self, id: u32) -> bool {
        Some(id) == self.eos || Some(id) == self.eot
    }

    /// Decodes a whole sequence; invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
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
