//! Byte-level BPE (`tokenizer.ggml.model = gpt2`) as llama.cpp runs it: the text between
//! special tokens is cut by the pre-tokenizer that `tokenizer.ggml.pre` names
//! (crate::pre_tokenize, on the `tokenizers` crate's splitting) into pieces spelled in GPT-2's
//! byte-level alphabet, and each piece is merged pair by pair, the pair of lowest merge rank
//! first and the leftmost of equal ranks, until no pair of neighbours has a merge.
//!
//! The merges are kept as token-id pairs (16 bytes each) and the token texts stay in the
//! vocabulary's one table: a 150,000-token vocabulary costs a few megabytes here, where
//! `tokenizers`' BPE model kept two maps with their own copies of every token string.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use runahead_gguf::Strings;
use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

use super::table::Packed;
use super::vocab::{attr, Vocab};
use crate::pre_tokenize::{pre_tokenizer, PreTokenize};
use crate::{ModelError, Result};

/// A byte-level BPE vocabulary's splitting and merges.
pub(crate) struct ByteLevelBpe {
    split: PreTokenize,
    /// A piece that is itself a token is that token, merges or not (see
    /// `PreSplit::ignore_merges`).
    ignore_merges: bool,
    /// `(left, right)` token ids to the merge's rank and the id of the token it makes; a pair
    /// listed twice keeps its first rank, as in llama.cpp.
    merges: ahash::AHashMap<(u32, u32), (u32, u32)>,
}

/// A symbol of a piece being merged: a byte range of the piece and its token.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    /// `None` for a character that is no token (it never merges).
    id: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

impl ByteLevelBpe {
    /// The merges of `tokenizer.ggml.merges` (each "left right", split at the first space after
    /// the first byte, as llama.cpp splits them, so a token may start with a space).
    pub fn new(vocab: &Vocab, merges: &Strings, pre: &str) -> Result<Self> {
        let split = pre_tokenizer(pre)?;
        let mut table = ahash::AHashMap::with_capacity(merges.len());
        let mut both = String::new();
        for (rank, m) in merges.iter().enumerate() {
            let at = m
                .as_bytes()
                .iter()
                .skip(1)
                .position(|&b| b == b' ')
                .ok_or_else(|| ModelError::Tokenizer(format!("malformed merge '{m}'")))?;
            let (left, right) = (&m[..at + 1], &m[at + 2..]);
            both.clear();
            both.push_str(left);
            both.push_str(right);
            let id = |text: &str| {
                vocab.id(text).ok_or_else(|| {
                    ModelError::Tokenizer(format!(
                        "merge '{m}' names '{text}', which is not in the vocabulary"
                    ))
                })
            };
            let pair = (id(left)?, id(right)?);
            let merged = id(&both)?;
            table.entry(pair).or_insert((rank as u32, merged));
        }
        table.shrink_to_fit();
        Ok(ByteLevelBpe {
            split: split.pre_tokenizer,
            ignore_merges: split.ignore_merges,
            merges: table,
        })
    }

    /// Appends the ids of one stretch of text between special tokens to `out`.
    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut pieces = PreTokenizedString::from(text);
        self.split
            .pre_tokenize(&mut pieces)
            .map_err(|e| ModelError::Tokenizer(format!("pre-tokenizing: {e}")))?;
        for (piece, _, _) in pieces.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            self.merge(vocab, piece, out);
        }
        Ok(())
    }

    /// Appends the tokens of one piece (in the byte-level alphabet) to `out`.
    fn merge(&self, vocab: &Vocab, piece: &str, out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        if self.ignore_merges {
            if let Some(id) = vocab.id(piece) {
                out.push(id);
                return;
            }
        }
        let mut symbols: Vec<Symbol> = Vec::with_capacity(piece.len());
        for (start, ch) in piece.char_indices() {
            let index = symbols.len();
            let len = ch.len_utf8();
            symbols.push(Symbol {
                start,
                len,
                id: vocab.id(&piece[start..start + len]),
                prev: index.checked_sub(1),
                next: None,
            });
            if index > 0 {
                symbols[index - 1].next = Some(index);
            }
        }
        // (rank, left symbol, right symbol, left id, right id, merged id), lowest rank first and
        // leftmost among equal ranks; an entry whose symbols changed since is skipped.
        type Candidate = Reverse<(u32, usize, usize, u32, u32, u32)>;
        let candidate = |symbols: &[Symbol], left: usize| -> Option<Candidate> {
            let right = symbols[left].next?;
            let (l, r) = (symbols[left].id?, symbols[right].id?);
            let &(rank, merged) = self.merges.get(&(l, r))?;
            Some(Reverse((rank, left, right, l, r, merged)))
        };
        let mut queue: BinaryHeap<Candidate> = (0..symbols.len())
            .filter_map(|i| candidate(&symbols, i))
            .collect();
        while let Some(Reverse((_, left, right, l, r, merged))) = queue.pop() {
            let (ls, rs) = (symbols[left], symbols[right]);
            let current = ls.next == Some(right) && ls.id == Some(l) && rs.id == Some(r);
            if ls.len == 0 || rs.len == 0 || !current {
                continue;
            }
            symbols[left].len += rs.len;
            symbols[left].id = Some(merged);
            symbols[left].next = rs.next;
            symbols[right].len = 0;
            if let Some(next) = rs.next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = ls.prev {
                queue.extend(candidate(&symbols, prev));
            }
            queue.extend(candidate(&symbols, left));
        }
        let mut at = Some(0);
        while let Some(i) = at {
            let s = symbols[i];
            match s.id {
                Some(id) => out.push(id),
                // llama.cpp spells a symbol that is no token with the one-byte tokens of its
                // bytes where there are such tokens, and drops the other bytes.
                None => {
                    let text = &piece.as_bytes()[s.start..s.start + s.len];
                    out.extend(
                        text.iter().filter_map(|&b| {
                            std::str::from_utf8(&[b]).ok().and_then(|t| vocab.id(t))
                        }),
                    );
                }
            }
            at = s.next;
        }
    }
}

/// The bytes each token of a byte-level vocabulary stands for: control, user-defined and
/// unknown tokens their text, every other token its characters mapped back to bytes.
pub(crate) fn byte_level_token_bytes(vocab: &Vocab) -> Result<Packed> {
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
    Ok(token_bytes)
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
