//! Splitting text at special tokens before tokenizing the rest, as llama.cpp's
//! `tokenizer_st_partition` does: each special token in turn, longest first, is cut out of
//! every stretch of text still unsplit, left to right; a token with the LSTRIP / RSTRIP
//! attribute also takes the whitespace before / after it.

use super::vocab::{attr, Vocab};

/// A piece of the text: ordinary text (a byte range of the input) or a special token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// Splits `text` at the occurrences of `specials` (ids into `vocab`, in matching order).
/// With `parse_special` false, control and unknown tokens stay text and only user-defined
/// tokens are cut out (llama.cpp's `parse_special = false`).
pub(crate) fn partition(
    text: &str,
    vocab: &Vocab,
    specials: &[u32],
    parse_special: bool,
) -> Vec<Fragment> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut fragments = vec![Fragment::Text(0, text.len())];
    for &id in specials {
        let a = vocab.attrs[id as usize];
        if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let needle = vocab.text(id as usize);
        if !text.contains(needle) {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            let Fragment::Text(mut start, end) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(found) = text[start..end].find(needle) {
                let at = start + found;
                let mut left_end = at;
                if a & attr::LSTRIP != 0 {
                    while left_end > start && is_space(text.as_bytes()[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > start {
                    next.push(Fragment::Text(start, left_end));
                }
                next.push(Fragment::Token(id));
                start = at + needle.len();
                if a & attr::RSTRIP != 0 {
                    while start < end && is_space(text.as_bytes()[start]) {
                        start += 1;
                    }
                }
            }
            if start < end {
                next.push(Fragment::Text(start, end));
            }
        }
        fragments = next;
    }
    fragments
}

/// C's `isspace` in the C locale, which llama.cpp strips with (unlike Rust's
/// `is_ascii_whitespace`, it includes the vertical tab).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}
