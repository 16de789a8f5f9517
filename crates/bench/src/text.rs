//! Small text utilities used to select and build prompts: word counts, filters, fenced code
//! blocks, a keyword pick. Deterministic, no randomness.

use std::collections::HashMap;
use std::ops::RangeInclusive;

/// Source-text length of prose documents (ShareGPT answers, transcripts), in words.
pub(crate) const PROSE_WORDS: RangeInclusive<usize> = 150..=700;
/// Source-text length of code, in whitespace-separated words. Code is denser in tokens than
/// prose (about three tokens per word against 1.3), so the lower bound is lower.
pub(crate) const CODE_WORDS: RangeInclusive<usize> = 50..=700;
/// Prose documents must average this many words per non-empty line: keeps paragraphs and
/// bulleted explanations, drops songs, poems and one-word lists.
pub(crate) const MIN_WORDS_PER_LINE: usize = 8;

pub(crate) fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// True when the text reads as paragraphs (see [`MIN_WORDS_PER_LINE`]).
pub(crate) fn is_prose(text: &str) -> bool {
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    lines > 0 && words(text) >= lines * MIN_WORDS_PER_LINE
}

/// True when nearly all characters are ASCII: keeps English text and code, drops most
/// non-English ShareGPT conversations.
pub(crate) fn mostly_ascii(text: &str) -> bool {
    let total = text.chars().count();
    let ascii = text.chars().filter(char::is_ascii).count();
    total > 0 && ascii * 100 >= total * 98
}

/// The first fenced code block (```lang ... ```) of a markdown text, with its language tag
/// normalised; None when there is none or the language is not a programming language we know.
/// (ShareGPT's tags are sometimes wrong, so prompts do not name the language in words.)
pub(crate) fn first_code_block(markdown: &str) -> Option<(&'static str, &str)> {
    let start = markdown.find("```")?;
    let rest = &markdown[start + 3..];
    let line_end = rest.find('\n')?;
    let tag = rest[..line_end].trim().to_ascii_lowercase();
    let body = &rest[line_end + 1..];
    let end = body.find("```")?;
    let lang = match tag.as_str() {
        "python" | "py" => "python",
        "javascript" | "js" | "jsx" => "javascript",
        "typescript" | "ts" | "tsx" => "typescript",
        "java" => "java",
        "c" => "c",
        "cpp" | "c++" => "cpp",
        "csharp" | "c#" | "cs" => "csharp",
        "go" | "golang" => "go",
        "rust" | "rs" => "rust",
        "php" => "php",
        "ruby" | "rb" => "ruby",
        "kotlin" => "kotlin",
        "swift" => "swift",
        "scala" => "scala",
        "bash" | "sh" | "shell" => "bash",
        "sql" => "sql",
        _ => return None,
    };
    Some((lang, body[..end].trim_end()))
}

const STOPWORDS: &[&str] = &[
    "about",
    "above",
    "after",
    "again",
    "against",
    "along",
    "also",
    "although",
    "among",
    "another",
    "because",
    "before",
    "being",
    "below",
    "between",
    "could",
    "different",
    "during",
    "every",
    "example",
    "first",
    "following",
    "further",
    "having",
    "however",
    "important",
    "include",
    "includes",
    "including",
    "into",
    "itself",
    "makes",
    "might",
    "other",
    "others",
    "overall",
    "provide",
    "provides",
    "several",
    "should",
    "since",
    "specific",
    "still",
    "their",
    "theirs",
    "them",
    "themselves",
    "there",
    "these",
    "thing",
    "things",
    "those",
    "through",
    "under",
    "until",
    "using",
    "various",
    "where",
    "which",
    "while",
    "whose",
    "within",
    "without",
    "would",
    "yours",
    "yourself",
    "additionally",
    "ensure",
    "help",
    "helps",
    "great",
    "better",
    "based",
    "always",
    "often",
    "certain",
    "possible",
    "means",
    "today",
    "around",
    "whether",
];

/// The document's most frequent content word (letters only, at least 5 of them, not a common
/// function word); ties go to the earliest. Lowercase if it ever occurs in lowercase, else as
/// first written (a name). None unless it occurs at least twice.
pub(crate) fn keyword(text: &str) -> Option<String> {
    // lowercase word -> (count, first position, form to show)
    let mut counts: HashMap<String, (usize, usize, String)> = HashMap::new();
    for (pos, raw) in text.split_whitespace().enumerate() {
        let word = raw.trim_matches(|c: char| !c.is_ascii_alphabetic());
        if word.len() < 5 || !word.chars().all(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        let lower = word.to_ascii_lowercase();
        if STOPWORDS.contains(&lower.as_str()) {
            continue;
        }
        let entry = counts
            .entry(lower.clone())
            .or_insert((0, pos, word.to_owned()));
        entry.0 += 1;
        if word == lower {
            entry.2 = lower;
        }
    }
    counts
        .into_values()
        .filter(|(n, _, _)| *n >= 2)
        .min_by_key(|(n, first, _)| (std::cmp::Reverse(*n), *first))
        .map(|(_, _, word)| word)
}

/// The items of `pool` in a fixed spread order: every `stride`-th item first (0, s, 2s, ...),
/// then the ones after those (1, 1+s, ...), and so on; the first `n` of that order. For a fixed
/// pool, the pick for a smaller `n` is a prefix of the pick for a larger one.
pub(crate) fn spread<T>(pool: Vec<T>, stride: usize, n: usize) -> Vec<T> {
    let stride = stride.max(1);
    let mut slots: Vec<Option<T>> = pool.into_iter().map(Some).collect();
    let len = slots.len();
    (0..stride)
        .flat_map(|offset| (offset..len).step_by(stride))
        .take(n)
        .filter_map(|i| slots[i].take())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_order_is_strided_and_prefix_stable() {
        let pool: Vec<usize> = (0..10).collect();
        assert_eq!(spread(pool.clone(), 4, 10), [0, 4, 8, 1, 5, 9, 2, 6, 3, 7]);
        assert_eq!(spread(pool.clone(), 4, 3), [0, 4, 8]);
        assert_eq!(spread(pool.clone(), 1, 3), [0, 1, 2]);
        assert_eq!(spread(pool, 4, 50).len(), 10);
        assert!(spread(Vec::<u8>::new(), 4, 5).is_empty());
    }

    #[test]
    fn code_blocks() {
        let md = "Here:\n```Python\ndef f():\n    return 1\n```\nand more";
        assert_eq!(
            first_code_block(md),
            Some(("python", "def f():\n    return 1"))
        );
        assert_eq!(first_code_block("```\nplain\n```"), None);
        assert_eq!(first_code_block("```rust\nunterminated"), None);
    }

    #[test]
    fn keyword_is_the_most_frequent_content_word() {
        let text =
            "Gardens need Water. A garden's soil holds water, and Water is life. Plants, plants.";
        assert_eq!(keyword(text).as_deref(), Some("water"));
        assert_eq!(
            keyword("Alice met Bob. Then Alice left.").as_deref(),
            Some("Alice")
        );
        assert_eq!(keyword("nothing repeats in this short sentence"), None);
    }

    #[test]
    fn prose_filter() {
        assert!(is_prose("A paragraph of text that goes on for more than eight words.\n\nAnother one here that is long enough too."));
        assert!(!is_prose(
            "Roses are red\nViolets are blue\nSugar is sweet\nAnd so are you"
        ));
        assert!(!is_prose(""));
    }

    #[test]
    fn ascii_filter() {
        assert!(mostly_ascii("plain English text"));
        assert!(!mostly_ascii("这是中文文本 with a little English"));
        assert!(!mostly_ascii(""));
    }
}
