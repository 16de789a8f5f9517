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

/// Qwen3.5's (`qwen35`): Qwen2's, with combining marks (`\p{M}`) kept with the letters.
static QWEN35: Pattern = Pattern::new(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Llama 3's split pattern (`llama-bpe`): numbers in runs of at most three digits.
static LLAMA3: Pattern = Pattern::new(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// GPT-4o's (`gpt-4o`, `llama4`; Phi-4-mini) as llama.cpp runs it. The original pattern tells
/// upper- from lower-case letters with `\p{Lu}`, `\p{Ll}`, ...; llama.cpp's engine sees every
/// non-ASCII letter as one class, so it counts them as both cases (and combining marks as
/// neither): upper-case here is `[A-Z]` or a non-ASCII letter, lower-case `[a-z]` or one.
static GPT4O: Pattern = Pattern::new(
    r"[^\r\n\p{L}\p{N}]?[\p{L}&&[^a-z]]*[\p{L}&&[^A-Z]]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{L}&&[^a-z]]+[\p{L}&&[^A-Z]]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// GPT-2's pattern, as llama.cpp writes it (without a final `\s+`: the whitespace it would
/// match is a piece of its own either way).
static GPT2: Pattern =
    Pattern::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)");

static NEWLINE: Pattern = Pattern::new(r"[\r\n]");
static DIGITS: Pattern = Pattern::new(r"\p{N}+");
static DIGIT: Pattern = Pattern::new(r"\p{N}");
static THREE_DIGITS: Pattern = Pattern::new(r"[0-9][0-9][0-9]");
/// CJK ideographs, and everything from U+0800 to U+4E00 and Hangul, as one run (DeepSeek's
/// rule). llama.cpp matches it on text where every non-ASCII whitespace character was replaced
/// by a vertical tab, so whitespace in those ranges never matches.
static DEEPSEEK_CJK: Pattern = Pattern::new(r"[[一-龥ࠀ-一가-퟿]&&[^\s]]+");
/// DeepSeek LLM's letters: Latin, Greek, Cyrillic, ... listed by range, with one optional
/// leading whitespace character.
static DEEPSEEK_LLM_LETTERS: Pattern = Pattern::new(
    r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
);
/// DeepSeek LLM's punctuation: ASCII and full-width, quotes, and U+3001-U+3002 (llama.cpp's
/// range starts at U+3000, the ideographic space, which its engine sees as whitespace).
static DEEPSEEK_LLM_PUNCT: Pattern = Pattern::new(r"\s?[!-/:-~！-／：-～‘-‟、-。]+");
static TRAILING_SPACE: Pattern = Pattern::new(r"\s+$");
static LETTERS: Pattern = Pattern::new(r"\s?\p{L}+");
static PUNCT: Pattern = Pattern::new(r"\s?\p{P}+");
/// Falcon's punctuation runs (with the ASCII symbols `$+<=>^~|` and the backtick).
static FALCON_PUNCT: Pattern = Pattern::new(r"[\p{P}\$\+<=>\^~\|`]+");
/// llama.cpp's default rule's punctuation runs (as Falcon's, without the backtick).
static DEFAULT_PUNCT: Pattern = Pattern::new(r"[\p{P}\$\+<=>\^~\|]+");

/// The pre-tokenizer of a tokenizer.
pub(crate) enum PreTokenize {
    /// One of `tokenizers`' own (nothing to compile per tokenizer).
    Builtin(PreTokenizerWrapper),
    /// Split by each shared pattern in turn, as llama.cpp's `unicode_regex_split` does: every
    /// piece is cut into its matches and the text between them (each its own piece, as `Split`
    /// with `Isolated` does), then mapped to byte-level characters.
    Patterns(Vec<&'static SysRegex>, ByteLevel),
}

impl PreTokenizer for PreTokenize {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        match self {
            PreTokenize::Builtin(builtin) => builtin.pre_tokenize(pretokenized),
            PreTokenize::Patterns(regexes, byte_level) => {
                for regex in regexes {
                    pretokenized.split(|_, normalized| {
                        normalized.split(*regex, SplitDelimiterBehavior::Isolated)
                    })?;
                }
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

/// The `tokenizer.ggml.pre` names runahead splits text for.
pub const SUPPORTED: &[&str] = &[
    "default",
    "smollm",
    "starcoder",
    "refact",
    "codeshell",
    "command-r",
    "qwen2",
    "deepseek-r1-qwen",
    "qwen35",
    "llama-bpe",
    "llama3",
    "gpt-2",
    "gpt2",
    "mpt",
    "deepseek-llm",
    "deepseek-coder",
    "falcon",
    "gpt-4o",
    "llama4",
];

pub(crate) fn pre_tokenizer(pre: &str) -> Result<PreSplit> {
    let split = |patterns: &[&'static Pattern]| -> Result<PreTokenize> {
        Ok(PreTokenize::Patterns(
            patterns.iter().map(|p| p.regex()).collect::<Result<_>>()?,
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
        "qwen2" | "deepseek-r1-qwen" => Ok(merging(split(&[&QWEN2])?)),
        "qwen35" => Ok(merging(split(&[&QWEN35])?)),
        "llama-bpe" | "llama3" => Ok(PreSplit {
            pre_tokenizer: split(&[&LLAMA3])?,
            ignore_merges: true,
        }),
        // GPT-2's pattern (llama.cpp: LLAMA_VOCAB_PRE_TYPE_GPT2 and _MPT split alike).
        "gpt-2" | "gpt2" | "mpt" => Ok(merging(builtin(ByteLevel::new(false, false, true).into()))),
        "deepseek-llm" => Ok(merging(split(&[
            &NEWLINE,
            &DEEPSEEK_LLM_LETTERS,
            &DEEPSEEK_LLM_PUNCT,
            &TRAILING_SPACE,
            &DEEPSEEK_CJK,
            &DIGITS,
        ])?)),
        "deepseek-coder" => Ok(merging(split(&[
            &NEWLINE,
            &LETTERS,
            &PUNCT,
            &DEEPSEEK_CJK,
            &DIGIT,
        ])?)),
        "falcon" => Ok(merging(split(&[&FALCON_PUNCT, &GPT2, &THREE_DIGITS])?)),
        "gpt-4o" | "llama4" => Ok(merging(split(&[&GPT4O])?)),
        // llama.cpp's rule for a file that names no pre-tokenizer (pre-2024 conversions).
        "default" => Ok(merging(split(&[
            &DEFAULT_PUNCT,
            &GPT2,
            &DIGITS,
            &THREE_DIGITS,
        ])?)),
        other => Err(ModelError::Tokenizer(format!(
            "pre-tokenizer '{other}' is not supported (supported: {})",
            SUPPORTED.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces `pre` cuts `text` into.
    fn pieces<'a>(pre: &str, text: &'a str) -> Vec<&'a str> {
        use tokenizers::{OffsetReferential, OffsetType};
        let split = pre_tokenizer(pre).unwrap();
        let mut pretokenized = PreTokenizedString::from(text);
        split.pre_tokenizer.pre_tokenize(&mut pretokenized).unwrap();
        pretokenized
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(_, (start, end), _)| &text[start..end])
            .collect()
    }

    /// GPT-4o's rule (Phi-4-mini) as llama.cpp applies it: a non-ASCII letter counts as both
    /// cases ("aÉ" stays whole, where the original pattern cuts before the capital) and a
    /// combining mark is no letter (cut off from its "e", where the original keeps it).
    #[test]
    fn gpt4o_splits_as_llama_cpp() {
        assert_eq!(
            pieces("gpt-4o", "HelloWORLD they're aÉ e\u{301} 12345\n\n  x"),
            [
                "Hello", "WORLD", " they're", " aÉ", " e", "\u{301}", " ", "123", "45", "\n\n",
                " ", " x"
            ]
        );
    }

    #[test]
    fn every_supported_pre_tokenizer_compiles() {
        for pre in SUPPORTED {
            if let Err(e) = pre_tokenizer(pre) {
                panic!("{pre}: {e}");
            }
        }
    }
}
