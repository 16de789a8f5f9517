//! The vocabulary part of `tokenizer.ggml.*` that every tokenizer model shares: token texts,
//! scores, token types turned into llama.cpp's token attributes, the special token ids and the
//! flags (`add_bos`, `add_eos`, `add_space_prefix`) with llama.cpp's defaults per model.
//! Malformed arrays (wrong lengths, wrong element types, types out of range) are refused here
//! with `ModelError::Tokenizer`, before any tokenizer is built on them.

use std::borrow::Cow;

use runahead_gguf::{Metadata, Value};

use super::table::TokenTexts;

use crate::{ModelError, Result};

/// llama.cpp's token attributes (`llama_token_attr`), as bits.
pub(crate) mod attr {
    pub const UNKNOWN: u32 = 1 << 1;
    pub const UNUSED: u32 = 1 << 2;
    pub const NORMAL: u32 = 1 << 3;
    pub const CONTROL: u32 = 1 << 4;
    pub const USER_DEFINED: u32 = 1 << 5;
    pub const BYTE: u32 = 1 << 6;
    /// Whitespace before the token is dropped when it is matched in text.
    pub const LSTRIP: u32 = 1 << 9;
    /// Whitespace after the token is dropped when it is matched in text.
    pub const RSTRIP: u32 = 1 << 10;
}

/// Which tokenizer algorithm a vocabulary uses (`tokenizer.ggml.model`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// `llama`: SentencePiece BPE by token score.
    Spm,
    /// `gpt2`: byte-level BPE by merge rank.
    Bpe,
    /// `gemma4`: BPE by merge rank over raw UTF-8 with `▁` for spaces and byte fallback.
    Gemma4,
}

/// Texts llama.cpp takes for end-of-generation tokens (its `special_eog_ids`, found by text);
/// it also marks each of them as a control token.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts llama.cpp takes for the end-of-turn token when the metadata names none, in the order
/// runahead prefers them.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<turn|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Fill-in-the-middle token texts, which llama.cpp also marks as control tokens.
const FIM_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// The `tokenizer.ggml.pre` names for which llama.cpp adds a BOS when the file does not say.
const PRE_WITH_BOS: &[&str] = &[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "tekken",
    "chameleon",
];

/// A vocabulary read from GGUF metadata.
pub(crate) struct Vocab {
    /// Token texts by id, and the first id of each text.
    pub tokens: TokenTexts,
    /// Per token, llama.cpp's attribute bits (see [`attr`]).
    pub attrs: Vec<u32>,
    /// Per token, `tokenizer.ggml.scores` (0 where a file has none and the model needs none).
    pub scores: Vec<f32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    /// Every end-of-generation token (EOS, end-of-turn and the texts llama.cpp stops on).
    pub eog: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
}

impl Vocab {
    pub fn from_metadata(meta: &Metadata, kind: Kind, pre: Option<&str>) -> Result<Self> {
        let texts = meta.strings("tokenizer.ggml.tokens")?;
        if texts.is_empty() {
            return Err(bad("the vocabulary has no tokens".into()));
        }
        // llama.cpp renames an empty token so that no text maps to it.
        let tokens = TokenTexts::new(texts.iter().enumerate().map(|(i, t)| {
            if t.is_empty() {
                Cow::Owned(format!("[EMPTY_{i}]"))
            } else {
                Cow::Borrowed(t)
            }
        }))?;
        let n = tokens.len();
        let types = token_types(meta, n)?;
        let scores = match meta.get("tokenizer.ggml.scores") {
            Some(v) => scores(v, n)?,
            // SentencePiece merges by score: a vocabulary without scores cannot be tokenized.
            None if kind == Kind::Spm => {
                return Err(bad(
                    "a SentencePiece vocabulary (tokenizer.ggml.model = llama) needs \
                     tokenizer.ggml.scores, and this one has none"
                        .into(),
                ))
            }
            None => vec![0.0; n],
        };
        let mut attrs: Vec<u32> = types.iter().map(|&t| type_attr(t)).collect();

        // llama.cpp's defaults per tokenizer model, then the file's keys.
        let (mut bos, mut eos) = match kind {
            Kind::Spm => (Some(1), Some(2)),
            Kind::Bpe => (Some(11), Some(11)),
            Kind::Gemma4 => (None, None),
        };
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        bos = in_range(bos);
        eos = in_range(eos);
        let key_id = |key: &str| -> Result<Option<u32>> {
            Ok(meta
                .opt(key, |m, k| m.u64(k))?
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| (v as usize) < n))
        };
        // An id out of range keeps the default, as in llama.cpp.
        bos = key_id("tokenizer.ggml.bos_token_id")?.or(bos);
        eos = key_id("tokenizer.ggml.eos_token_id")?.or(eos);
        let key_eot = key_id("tokenizer.ggml.eot_token_id")?;
        let (mut add_bos, mut add_eos, mut add_space_prefix) = match kind {
            Kind::Spm => (true, false, true),
            Kind::Bpe => (pre.is_some_and(|p| PRE_WITH_BOS.contains(&p)), false, false),
            Kind::Gemma4 => (true, false, false),
        };
        let flag = |key: &str| -> Result<Option<bool>> {
            match meta.get(key) {
                None => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(other) => Err(bad(format!("{key} is {other:?}, not a boolean"))),
            }
        };
        add_space_prefix = flag("tokenizer.ggml.add_space_prefix")?.unwrap_or(add_space_prefix);
        add_bos = flag("tokenizer.ggml.add_bos_token")?.unwrap_or(add_bos);
        add_eos = flag("tokenizer.ggml.add_eos_token")?.unwrap_or(add_eos);
        // llama.cpp always adds Gemma 4's BOS, whatever the file says.
        if kind == Kind::Gemma4 {
            add_bos = true;
        }

        // Attributes llama.cpp derives from token texts and the model's name.
        let find = |text: &str| tokens.id(text);
        for text in EOG_TEXTS.iter().chain(EOT_TEXTS).chain(FIM_TEXTS) {
            if let Some(id) = find(text) {
                attrs[id as usize] |= attr::CONTROL;
            }
        }
        // gpt-oss renders these as text.
        for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = find(text) {
                attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        let eot = key_eot.or_else(|| EOT_TEXTS.iter().find_map(|t| find(t)));
        let mut eog: Vec<u32> = EOG_TEXTS.iter().filter_map(|t| find(t)).collect();
        eog.extend(eos);
        eog.extend(eot);
        // o200k_harmony and solar-open: `<|end|>` ends a message, not the generation.
        let has = |t: &str| find(t).is_some();
        if let Some(end) = find("<|end|>") {
            if (has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>")) {
                eog.retain(|&i| i != end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // Gemma 4 and PLaMo 2 have an ordinary `</s>`.
        if let Some(s) = find("</s>") {
            if has("<|tool_response>") || has("<|plamo:eos|>") {
                eog.retain(|&i| i != s);
                attrs[s as usize] = attr::NORMAL;
            }
        }
        eog.sort_unstable();
        eog.dedup();
        let name = meta
            .get("general.name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name.contains("phi-3") || name.contains("phi3") {
            // Phi-3's special tokens swallow the whitespace after them.
            for a in attrs.iter_mut() {
                if *a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
                    *a |= attr::RSTRIP;
                }
            }
            if let Some(id) = find("</s>") {
                attrs[id as usize] |= attr::RSTRIP;
            }
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                if let Some(id) = find(text) {
                    attrs[id as usize] &= !attr::RSTRIP;
                }
            }
        }
        let arch = meta
            .get("general.architecture")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pre_name = pre.unwrap_or_default();
        if ["jina-v2-de", "jina-v2-es", "jina-v2-code", "mmbert"]
            .iter()
            .any(|p| pre_name.contains(p))
            || ["nomic-bert-moe", "jina-bert-v3"]
                .iter()
                .any(|a| arch.contains(a))
        {
            if let Some(id) = find("<mask>") {
                attrs[id as usize] |= attr::LSTRIP;
            }
        } else if name.contains("modern-bert") {
            if let Some(id) = find("[MASK]") {
                attrs[id as usize] |= attr::LSTRIP;
            }
        }

        Ok(Vocab {
            tokens,
            attrs,
            scores,
            bos,
            eos,
            eot,
            eog,
            add_bos,
            add_eos,
            add_space_prefix,
        })
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.tokens.id(text)
    }

    /// The text of token `id` as the vocabulary spells it.
    pub fn text(&self, id: usize) -> &str {
        self.tokens.get(id)
    }

    /// The token llama.cpp uses for a byte it cannot spell otherwise: `<0xXX>`, else the byte
    /// itself as a one-byte token.
    pub fn byte_token(&self, byte: u8) -> Option<u32> {
        self.id(&format!("<0x{byte:02X}>"))
            .or_else(|| std::str::from_utf8(&[byte]).ok().and_then(|s| self.id(s)))
    }

    /// Ids of the tokens matched as whole tokens in text (control, user-defined and unknown
    /// tokens), longest text first, as llama.cpp's special-token cache.
    pub fn special_tokens(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..self.len() as u32)
            .filter(|&i| {
                self.attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        ids.sort_by_key(|&i| std::cmp::Reverse(self.text(i as usize).len()));
        ids
    }

    /// The bytes a token stands for in a vocabulary whose tokens spell spaces as `▁` and bytes
    /// as `<0xXX>` (SentencePiece, Gemma 4), as llama.cpp's `token_to_piece` with special tokens
    /// rendered: unused and undefined tokens stand for nothing.
    pub fn spm_piece(&self, id: usize) -> Vec<u8> {
        let (text, a) = (self.text(id), self.attrs[id]);
        if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
            text.as_bytes().to_vec()
        } else if a & attr::NORMAL != 0 {
            text.replace('\u{2581}', " ").into_bytes()
        } else if a & attr::BYTE != 0 {
            parse_byte_token(text).map(|b| vec![b]).unwrap_or_default()
        } else {
            Vec::new()
        }
    }
}

/// The byte of a `<0xXX>` token.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn bad(msg: String) -> ModelError {
    ModelError::Tokenizer(msg)
}

/// `tokenizer.ggml.token_type`: one integer from 0 to 6 per token (all normal when absent).
fn token_types(meta: &Metadata, n: usize) -> Result<Vec<i64>> {
    let Some(v) = meta.get("tokenizer.ggml.token_type") else {
        return Ok(vec![1; n]);
    };
    let items = v
        .as_array()
        .ok_or_else(|| bad("tokenizer.ggml.token_type is not an array".into()))?;
    if items.len() != n {
        return Err(bad(format!(
            "tokenizer.ggml.token_type has {} entries for {n} tokens",
            items.len()
        )));
    }
    items
        .values()
        .enumerate()
        .map(|(i, t)| {
            let ty = match t {
                Value::I8(v) => Some(i64::from(v)),
                Value::I16(v) => Some(i64::from(v)),
                Value::I32(v) => Some(i64::from(v)),
                Value::I64(v) => Some(v),
                _ => t.as_u64().and_then(|v| i64::try_from(v).ok()),
            };
            match ty {
                Some(ty @ 0..=6) => Ok(ty),
                _ => Err(bad(format!(
                    "token {i} has type {t:?}; GGUF token types are integers from 0 to 6"
                ))),
            }
        })
        .collect()
}

/// `tokenizer.ggml.scores`: one finite number per token.
fn scores(v: &Value, n: usize) -> Result<Vec<f32>> {
    let items = v
        .as_array()
        .ok_or_else(|| bad("tokenizer.ggml.scores is not an array".into()))?;
    if items.len() != n {
        return Err(bad(format!(
            "tokenizer.ggml.scores has {} entries for {n} tokens",
            items.len()
        )));
    }
    items
        .values()
        .enumerate()
        .map(|(i, s)| match s.as_f64() {
            Some(f) if f.is_finite() => Ok(f as f32),
            _ => Err(bad(format!(
                "token {i} has score {s:?}, not a finite number"
            ))),
        })
        .collect()
}

/// llama.cpp's attribute for a GGUF token type.
fn type_attr(ty: i64) -> u32 {
    match ty {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        // 0: undefined.
        _ => 0,
    }
}
