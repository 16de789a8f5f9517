//! The suffix drafter's earlier outputs as bytes, so a page can keep them across visits
//! (OPFS, IndexedDB) and a returning visitor's repeated work drafts from the first visit.
//!
//! Stored bytes are untrusted on the way back (another version of runahead wrote them, another
//! model's tokenizer, a full disk cut them short, anything else on the origin overwrote them):
//! every length is checked against the bytes left before anything is allocated, a checksum
//! covers the whole record, token ids must fit the vocabulary, and every failure is a
//! [`HistoryError`] the caller can discard the record on.
//!
//! Layout (little-endian): magic `RAHS`, format version (u32), the tokenizer's fingerprint
//! (u64), the sequence count (u32), then per sequence its length (u32) and its token ids (u32
//! each), and last an FNV-1a 64 checksum of everything before it.

use runahead_model::Tokenizer;
use thiserror::Error;

const MAGIC: &[u8; 4] = b"RAHS";
/// Bumped whenever the layout or the meaning of a record changes.
pub const HISTORY_VERSION: u32 = 1;
const HEADER_BYTES: usize = 4 + 4 + 8 + 4;
const CHECKSUM_BYTES: usize = 8;

/// Why stored history cannot be used (the caller discards it and starts empty).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HistoryError {
    #[error("not a runahead history record")]
    NotHistory,
    #[error("history format {found} (this runahead reads format {HISTORY_VERSION})")]
    Version { found: u32 },
    #[error("the history was written for another tokenizer")]
    OtherTokenizer,
    #[error("the history record is damaged: {0}")]
    Damaged(&'static str),
    #[error("the history holds token {token}, past the vocabulary's {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
}

/// FNV-1a, 64-bit: stable across platforms and versions (unlike the hashers of the standard
/// library or ahash, which are seeded per process).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of what `hash` covers followed by `bytes`.
fn fnv1a_extend(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// What a record is keyed by: the tokenizer's pre-tokenizer and every token's bytes, so a
/// history is only read back by a model that gives the same ids the same meaning.
pub fn tokenizer_fingerprint(tokenizer: &Tokenizer) -> u64 {
    let mut hash = fnv1a_extend(FNV_OFFSET, tokenizer.pre.as_bytes());
    for id in 0..tokenizer.vocab_size() as u32 {
        let token = tokenizer.token_bytes(id);
        hash = fnv1a_extend(hash, &(token.len() as u32).to_le_bytes());
        hash = fnv1a_extend(hash, token);
    }
    hash
}

/// The record of `sequences` (oldest first) for the tokenizer with `fingerprint`.
pub fn encode_history<'a>(
    fingerprint: u64,
    sequences: impl IntoIterator<Item = &'a [u32]>,
) -> Vec<u8> {
    let sequences: Vec<&[u32]> = sequences.into_iter().collect();
    let tokens: usize = sequences.iter().map(|s| s.len()).sum();
    let mut out = Vec::with_capacity(HEADER_BYTES + 4 * (sequences.len() + tokens) + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&HISTORY_VERSION.to_le_bytes());
    out.extend_from_slice(&fingerprint.to_le_bytes());
    out.extend_from_slice(&(sequences.len() as u32).to_le_bytes());
    for seq in sequences {
        out.extend_from_slice(&(seq.len() as u32).to_le_bytes());
        for &t in seq {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    let checksum = fnv1a(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The sequences of a record written by [`encode_history`] for the tokenizer with
/// `fingerprint` and `vocab` tokens, oldest first.
pub fn decode_history(
    bytes: &[u8],
    fingerprint: u64,
    vocab: usize,
) -> Result<Vec<Vec<u32>>, HistoryError> {
    if bytes.len() < HEADER_BYTES + CHECKSUM_BYTES || &bytes[..4] != MAGIC {
        return Err(HistoryError::NotHistory);
    }
    let (body, checksum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
    let mut r = Reader { rest: &body[4..] };
    let version = r.u32()?;
    if version != HISTORY_VERSION {
        return Err(HistoryError::Version { found: version });
    }
    if fnv1a(body) != u64::from_le_bytes(checksum.try_into().unwrap_or_default()) {
        return Err(HistoryError::Damaged("checksum mismatch"));
    }
    if r.u64()? != fingerprint {
        return Err(HistoryError::OtherTokenizer);
    }
    let count = r.u32()? as usize;
    // Each sequence takes at least its 4-byte length: a count the bytes cannot hold is refused
    // before the list is allocated.
    if count > r.rest.len() / 4 {
        return Err(HistoryError::Damaged("more sequences than bytes"));
    }
    let mut sequences = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.u32()? as usize;
        if len > r.rest.len() / 4 {
            return Err(HistoryError::Damaged("a sequence longer than the record"));
        }
        let (ids, rest) = r.rest.split_at(len * 4);
        r.rest = rest;
        let seq: Vec<u32> = ids
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if let Some(&token) = seq.iter().find(|&&t| t as usize >= vocab) {
            return Err(HistoryError::TokenOutOfRange { token, vocab });
        }
        sequences.push(seq);
    }
    if !r.rest.is_empty() {
        return Err(HistoryError::Damaged("bytes after the last sequence"));
    }
    Ok(sequences)
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], HistoryError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(HistoryError::Damaged("cut short"))?;
        self.rest = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, HistoryError> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, HistoryError> {
        self.take::<8>().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Vec<u32>> {
        vec![vec![1, 2, 3], vec![], vec![7; 50], vec![99]]
    }

    /// A drafter restored from a record drafts for a repeated request exactly what the
    /// drafter that wrote it drafts; an empty one drafts nothing from the global index.
    #[test]
    fn a_restored_drafter_drafts_like_the_original() {
        use crate::SuffixDrafter;
        let answer: Vec<u32> = (0..60).map(|i| (i * 7 + 3) % 50).collect();
        let mut original = SuffixDrafter::new(1000);
        original.add_history(&[9, 9, 9]);
        original.add_history(&answer);
        let bytes = encode_history(11, original.history());
        let mut restored = SuffixDrafter::new(1000);
        for seq in decode_history(&bytes, 11, 50).unwrap() {
            restored.add_history(&seq);
        }
        assert_eq!(restored.global_tokens(), original.global_tokens());
        let context = [40u32, 41, 42, answer[0], answer[1], answer[2], answer[3]];
        let a = original.draft(&context, 16);
        let b = restored.draft(&context, 16);
        assert!(!a.is_empty(), "the history should match the context");
        assert_eq!((a.tokens.clone(), a.parents.clone()), (b.tokens, b.parents));
        restored.clear_history();
        assert_eq!(restored.global_tokens(), 0);
        assert!(restored.draft(&context, 16).is_empty());
    }

    #[test]
    fn round_trips() {
        let seqs = sample();
        let bytes = encode_history(42, seqs.iter().map(|s| s.as_slice()));
        assert_eq!(decode_history(&bytes, 42, 100).unwrap(), seqs);
        let empty = encode_history(42, std::iter::empty());
        assert_eq!(
            decode_history(&empty, 42, 100).unwrap(),
            Vec::<Vec<u32>>::new()
        );
    }

    #[test]
    fn other_tokenizers_versions_and_vocabularies_are_refused() {
        let bytes = encode_history(42, sample().iter().map(|s| s.as_slice()));
        assert_eq!(
            decode_history(&bytes, 43, 100),
            Err(HistoryError::OtherTokenizer)
        );
        assert_eq!(
            decode_history(&bytes, 42, 99),
            Err(HistoryError::TokenOutOfRange {
                token: 99,
                vocab: 99
            })
        );
        let mut newer = bytes.clone();
        newer[4] = 2;
        assert_eq!(
            decode_history(&newer, 42, 100),
            Err(HistoryError::Version { found: 2 })
        );
        assert_eq!(
            decode_history(b"{\"json\": true}", 42, 100),
            Err(HistoryError::NotHistory)
        );
    }

    /// Every truncation and every single-byte change of a record is an error, never a panic,
    /// and never a different history.
    #[test]
    fn damage_is_detected() {
        let bytes = encode_history(7, sample().iter().map(|s| s.as_slice()));
        for len in 0..bytes.len() {
            assert!(
                decode_history(&bytes[..len], 7, 100).is_err(),
                "cut at {len}"
            );
        }
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                assert!(decode_history(&b, 7, 100).is_err(), "byte {i} ^ {flip:#x}");
            }
        }
    }

    /// A record whose counts claim more than its bytes (with a valid checksum: written by
    /// someone who meant it) is refused before anything is allocated for the claim.
    #[test]
    fn claimed_sizes_are_checked_before_allocating() {
        for (count, len) in [(u32::MAX, 0u32), (1, u32::MAX), (2, 1 << 30)] {
            let mut body = Vec::new();
            body.extend_from_slice(MAGIC);
            body.extend_from_slice(&HISTORY_VERSION.to_le_bytes());
            body.extend_from_slice(&5u64.to_le_bytes());
            body.extend_from_slice(&count.to_le_bytes());
            body.extend_from_slice(&len.to_le_bytes());
            let checksum = fnv1a(&body);
            body.extend_from_slice(&checksum.to_le_bytes());
            assert!(matches!(
                decode_history(&body, 5, 100),
                Err(HistoryError::Damaged(_))
            ));
        }
    }
}
