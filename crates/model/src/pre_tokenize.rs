//! How a `tokenizer.ggml.pre` splits text before BPE. The split patterns are compiled once per
//! process and shared by every tokenizer that uses them: compiling Qwen2's or Llama 3's pattern
//! (Unicode classes, a look-ahead) costs far more than building the rest of a small tokenizer,
//! and `tokenizers`' own `Split` compiles it again for every tokenizer (and every clone).

use std::sync::OnceLock;

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::utils::SysRegex;
use tokenizers::{PreTokenizedString, PreTokenizer, PreTokenizerWrapper, SplitDelimiterBehavior};

use crate::{ModelError, Result};

/// A split pattern, compiled at its first use.
struct Pattern {
    source: &'static str,
    compiled: OnceLock<std::result::Result<SysRegex, String>>,
}

impl Pattern {
    const fn new(source: &'static str) -> Self {
        Pattern {
            source,
            compiled: OnceLock::new(),
        }
    }

    fn regex(&'static self) -> Result<&'static SysRegex> {
        self.compiled
            .get_or_init(|| SysRegex::new(self.source).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| ModelError::Tokenizer(format!("split pattern: {e}")))
    }
}

/// Qwen2's split pattern (llama.cpp `LLAMA_VOCAB_PRE_TYPE_QWEN2`): single digits, letters with
/// at most one leading non-letter, newlines kept with the punctuation before them.
static QWEN2: Pattern = Pattern::new(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Llama 3's split pattern (`llama-bpe`): numbers in runs of at most three digits.
static LLAMA3: Pattern = Pattern::new(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// The pre-tokenizer of a tokenizer.
pub(crate) enum PreTokenize {
    /// One of `tokenizers`' own (nothing to compile per tokenizer).
    Builtin(PreTokenizerWrapper),
    /// Pieces split off where a shared pattern matches (each match its own piece, as
    /// `Split` with `Isolated` does), then mapped to byte-level characters.
    Pattern(&'static SysRegex, ByteLevel),
}

impl PreTokenizer for PreTokenize {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        match self {
            PreTokenize::Builtin(builtin) => builtin.pre_tokenize(pretokenized),
            PreTokenize::Pattern(regex, byte_level) => {
                pretokenized.split(|_, normalized| {
                    normalized.split(*regex, SplitDelimiterBehavior::Isolated)
                })?;
                byte_level.pre_tokenize(pretokenized)
            }
        }
    }
}

/// How a `tokenizer.ggml.pre` splits text before BPE.
pub(crate) struct PreSplit {
    pub pre_tokenizer: PreTokenize,
    /// A pre-token that is itself in the vocabulary becomes that one token, merges or not
    /// (llama.cpp's `ignore_merges`, set for the pre-tokenizers whose Hugging Face tokenizer has
    /// it). Merges alone can stop short of it: Llama 3's merges spell " Việt" as " Vi", "ệ",
    /// "t", although " Việt" is one token.
    pub ignore_merges: bool,
}

pub(crate) fn pre_tokenizer(pre: &str) -> Result<PreSplit> {
    let split = |pattern: &'static Pattern| -> Result<PreTokenize> {
        Ok(PreTokenize::Pattern(
            pattern.regex()?,
            ByteLevel::new(false, false, false),
        ))
    };
    let merging = |pre_tokenizer| PreSplit {
        pre_tokenizer,
        ignore_merges: false,
    };
    let builtin = |b: PreTokenizerWrapper| PreTokenize::Builtin(b);
    match pre {
        // GPT-2's pattern, digits first split one by one (llama.cpp treats these names alike;
        // command-r differs only in detokenizing, which runahead does byte for byte).
        "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" => Ok(merging(builtin(
            Sequence::new(vec![
                Digits::new(true).into(),
                ByteLevel::new(false, false, true).into(),
            ])
            .into(),
        ))),
        "qwen2" | "deepseek-r1-qwen" => Ok(merging(split(&QWEN2)?)),
        "llama-bpe" | "llama3" => Ok(PreSplit {
            pre_tokenizer: split(&LLAMA3)?,
            ignore_merges: true,
        }),
        // GPT-2's pattern (llama.cpp: LLAMA_VOCAB_PRE_TYPE_GPT2 and _MPT split alike).
        "gpt-2" | "gpt2" | "mpt" => Ok(merging(builtin(ByteLevel::new(false, false, true).into()))),
        other => Err(ModelError::Tokenizer(format!(
            "pre-tokenizer '{other}' is not supported (supported: smollm, starcoder, refact, \
             codeshell, command-r, qwen2, deepseek-r1-qwen, llama-bpe, llama3, gpt-2, mpt)"
        ))),
    }
}
