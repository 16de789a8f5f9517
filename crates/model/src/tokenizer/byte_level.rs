//! Byte-level BPE (`tokenizer.ggml.model = gpt2`) on the `tokenizers` crate: the pipeline with
//! the pre-tokenizer that `tokenizer.ggml.pre` names, and the bytes each token stands for.

use std::collections::HashMap;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, TokenizerImpl};

use super::table::Packed;
use super::vocab::{attr, Vocab};
use crate::pre_tokenize::{pre_tokenizer, PreTokenize};
use crate::{ModelError, Result};

/// `tokenizers`' pipeline with runahead's pre-tokenizer (see [`PreTokenize`]).
pub(crate) type Bpe =
    TokenizerImpl<BPE, NormalizerWrapper, PreTokenize, PostProcessorWrapper, DecoderWrapper>;

/// The `tokenizers` pipeline of a byte-level BPE vocabulary, and the bytes of each token.
pub(crate) fn byte_level_bpe(
    vocab: &Vocab,
    merges: Vec<(String, String)>,
    pre: &str,
) -> Result<(Bpe, Packed)> {
    let map: ahash::AHashMap<String, u32> = vocab
        .tokens
        .first_ids()
        .map(|(t, id)| (t.to_owned(), id))
        .collect();
    let split = pre_tokenizer(pre)?;
    let bpe = BPE::builder()
        .vocab_and_merges(map, merges)
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
                AddedToken::from(t, special)
                    .normalized(false)
                    .lstrip(a & attr::LSTRIP != 0)
                    .rstrip(a & attr::RSTRIP != 0)
            })
            .collect()
    };
    inner.add_special_tokens(&added(true));
    inner.add_tokens(&added(false));

    let byte_of = byte_decoder();
    let mut token_bytes = Packed::with_capacity(vocab.len(), 0);
    let mut bytes = Vec::new();
    for (t, &a) in vocab.tokens.iter().zip(&vocab.attrs) {
        bytes.clear();
        if a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
            bytes.extend_from_slice(t.as_bytes());
        } else {
            for ch in t.chars() {
                match byte_of.get(&ch) {
                    Some(&b) => bytes.push(b),
                    None => bytes.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
        }
        token_bytes.push(&bytes)?;
    }
    token_bytes.shrink_to_fit();
    Ok((inner, token_bytes))
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
