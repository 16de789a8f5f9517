//! The one interface between an engine and the decoding algorithms (see docs/design.md): a
//! forward pass over a block of new tokens, and KV-cache truncation/compaction.

use crate::{ModelConfig, ModelError, Result};

/// Which entries of the block each new token attends to, in addition to the whole cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Token `i` sees block tokens `0..=i`.
    Causal,
    /// Token `i` sees itself and its ancestors: `parents[i]` is the index of its parent in the
    /// block (always `< i`), or `None` for a token that hangs directly off the cache.
    Tree(Vec<Option<usize>>),
}

/// A block of new tokens for one forward pass.
#[derive(Clone, Debug)]
pub struct Batch {
    pub tokens: Vec<u32>,
    /// RoPE position of each token. For a causal block these are consecutive; in a tree a
    /// token's position is the cache length plus its depth.
    pub positions: Vec<usize>,
    pub mask: Mask,
    /// Rows `first_output..` get logits; the rows before only write their cache entries (a
    /// prompt's tokens before its last), so engines may skip their output product: 0 from
    /// every constructor, set with [`Batch::logits_for_last`].
    pub first_output: usize,
}

impl Batch {
    /// Consecutive tokens starting at position `start` (prefill, decoding, chain verification).
    pub fn causal(tokens: &[u32], start: usize) -> Self {
        Batch {
            tokens: tokens.to_vec(),
            positions: (start..start + tokens.len()).collect(),
            mask: Mask::Causal,
            first_output: 0,
        }
    }

    /// A tree of tokens hanging off a cache of length `start`; `parents` as in [`Mask::Tree`].
    pub fn tree(tokens: &[u32], parents: &[Option<usize>], start: usize) -> Result<Self> {
        if parents.len() != tokens.len() {
            return Err(ModelError::InvalidBatch(
                "one parent per token is required".into(),
            ));
        }
        let mut depth = vec![0usize; tokens.len()];
        for (i, p) in parents.iter().enumerate() {
            if let Some(p) = *p {
                if p >= i {
                    return Err(ModelError::InvalidBatch(format!(
                        "token {i} has parent {p}: parents must come first"
                    )));
                }
                depth[i] = depth[p] + 1;
            }
        }
        Ok(Batch {
            tokens: tokens.to_vec(),
            positions: depth.iter().map(|d| start + d).collect(),
            mask: Mask::Tree(parents.to_vec()),
            first_output: 0,
        })
    }

    /// The same block with logits for its last `rows` rows only (all of them when `rows` is
    /// at least its length; none: the block only fills the cache). What a prompt needs: its
    /// last token's logits, and every earlier token's cache entries.
    pub fn logits_for_last(mut self, rows: usize) -> Self {
        self.first_output = self.len().saturating_sub(rows);
        self
    }

    /// Rows that get logits.
    pub fn n_outputs(&self) -> usize {
        self.len().saturating_sub(self.first_output)
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// `visible[i * n + j]`: whether block token `i` attends to block token `j`.
    pub fn visibility(&self) -> Vec<bool> {
        let n = self.len();
        let mut visible = vec![false; n * n];
        for i in 0..n {
            match &self.mask {
                Mask::Causal => visible[i * n..i * n + i + 1].fill(true),
                Mask::Tree(parents) => {
                    let mut node = Some(i);
                    while let Some(j) = node {
                        visible[i * n + j] = true;
                        node = parents[j];
                    }
                }
            }
        }
        visible
    }

    /// Checks the batch against a model's vocabulary and the free room in its cache.
    pub fn validate(&self, vocab: usize, cache_len: usize, capacity: usize) -> Result<()> {
        if self.is_empty() {
            return Err(ModelError::InvalidBatch("empty batch".into()));
        }
        if self.positions.len() != self.tokens.len() {
            return Err(ModelError::InvalidBatch(
                "one position per token is required".into(),
            ));
        }
        if self.first_output > self.len() {
            return Err(ModelError::InvalidBatch(format!(
                "logits from row {} of a block of {}",
                self.first_output,
                self.len()
            )));
        }
        if let Mask::Tree(parents) = &self.mask {
            if parents.len() != self.len()
                || parents
                    .iter()
                    .enumerate()
                    .any(|(i, p)| p.is_some_and(|p| p >= i))
            {
                return Err(ModelError::InvalidBatch(
                    "tree parents must precede children".into(),
                ));
            }
        }
        if let Some(&id) = self.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab });
        }
        let needed = cache_len + self.len();
        let max_pos = self.positions.iter().copied().max().unwrap_or(0);
        if needed > capacity || max_pos >= capacity {
            return Err(ModelError::ContextFull {
                needed: needed.max(max_pos + 1),
                context: capacity,
            });
        }
        Ok(())
    }
}

/// Logits for every token of a block.
#[derive(Clone, Debug, PartialEq)]
pub struct Logits {
    /// `[n_rows, vocab]`, row-major.
    pub data: Vec<f32>,
    pub vocab: usize,
}

impl Logits {
    pub fn n_rows(&self) -> usize {
        self.data.len() / self.vocab.max(1)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.vocab..(i + 1) * self.vocab]
    }

    /// Index of the largest logit of row `i`; the lowest index wins a tie (as in llama.cpp).
    pub fn argmax(&self, i: usize) -> u32 {
        argmax(self.row(i))
    }
}

/// Index of the largest value; the lowest index wins a tie. NaN never wins (a slice of NaN
/// alone gives its last index).
pub fn argmax(values: &[f32]) -> u32 {
    let max = max_of(values);
    first_equal(values, max).unwrap_or(values.len().saturating_sub(1)) as u32
}

/// The largest value that is not NaN (-inf when there is none), sixteen lanes at a time:
/// `if v > m` is what `maxps` computes, so the loop vectorizes, where a running index of the
/// best is a chain of dependent compares, a few cycles a value (a vocabulary of 49,152 took
/// tens of microseconds a row, at every verified row).
fn max_of(values: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            if v > *m {
                *m = v;
            }
        }
    }
    lanes
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

/// The first index whose value equals `x`, found a chunk at a time (a branch-free test per
/// chunk, which vectorizes; an early exit per value does not).
fn first_equal(values: &[f32], x: f32) -> Option<usize> {
    const CHUNK: usize = 64;
    values
        .chunks(CHUNK)
        .enumerate()
        .find(|(_, chunk)| chunk.iter().fold(false, |hit, &v| hit | (v == x)))
        .and_then(|(c, chunk)| Some(c * CHUNK + chunk.iter().position(|&v| v == x)?))
}

/// The largest logits of each row of a block: what top-k sampling and a draft model's
/// confidence need, without the whole vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub struct TopLogits {
    /// Per row: up to `k` (token, logit) pairs, largest logit first in the order of
    /// [`f32::total_cmp`], ties to the lower token; NaN and -inf are never listed, so a row
    /// has fewer than `k` entries only when it has fewer usable logits.
    pub rows: Vec<Vec<(u32, f32)>>,
    /// Per row: `ln(sum(exp(logit)))` over its finite logits (-inf when there is none), so that
    /// `exp(logit - log_norm)` is a softmax probability over the whole vocabulary.
    pub log_norm: Vec<f32>,
    pub vocab: usize,
}

impl TopLogits {
    /// The `k` largest of each row of `logits` (see [`top_k_of`]).
    pub fn of(logits: &Logits, k: usize) -> Self {
        Self::of_rows(&logits.data, logits.vocab, k)
    }

    /// The `k` largest of each row of `[rows, vocab]` logits in a slice (an engine's buffer).
    pub fn of_rows(data: &[f32], vocab: usize, k: usize) -> Self {
        let rows = data.chunks_exact(vocab.max(1));
        TopLogits {
            rows: rows.clone().map(|r| top_k_of(r, k)).collect(),
            log_norm: rows.map(log_sum_exp).collect(),
            vocab,
        }
    }
}

/// The `k` largest values of `row` with their indices, largest first in the order of
/// [`f32::total_cmp`], ties to the lower index; NaN and -inf are skipped.
pub fn top_k_of(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut all: Vec<(u32, f32)> = row
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan() && **v > f32::NEG_INFINITY)
        .map(|(i, &v)| (i as u32, v))
        .collect();
    if k < all.len() {
        if k == 0 {
            return Vec::new();
        }
        all.select_nth_unstable_by(k - 1, rank);
        all.truncate(k);
    }
    all.sort_unstable_by(rank);
    all
}

/// Each row's argmax, or [`ModelError::NoUsableLogit`] for a row whose logits are all NaN or
/// -inf: [`LanguageModel::forward_argmax`] for engines that select on the CPU.
pub fn argmax_rows(logits: &Logits) -> Result<Vec<u32>> {
    argmax_rows_of(&logits.data, logits.vocab)
}

/// [`argmax_rows`] of `[rows, vocab]` logits in a slice (an engine's own buffer).
pub fn argmax_rows_of(data: &[f32], vocab: usize) -> Result<Vec<u32>> {
    data.chunks_exact(vocab.max(1))
        .enumerate()
        .map(|(row, values)| {
            // NaN compares false: only a value above -inf can be picked.
            let max = max_of(values);
            match first_equal(values, max) {
                Some(i) if max > f32::NEG_INFINITY => Ok(i as u32),
                _ => Err(ModelError::NoUsableLogit { row }),
            }
        })
        .collect()
}

/// `ln(sum(exp(v)))` over the finite values of `row`, -inf when there is none.
pub fn log_sum_exp(row: &[f32]) -> f32 {
    let finite = || row.iter().copied().filter(|v| v.is_finite());
    let Some(max) = finite().reduce(f32::max) else {
        return f32::NEG_INFINITY;
    };
    let sum: f64 = finite().map(|v| ((v - max) as f64).exp()).sum();
    max + sum.ln() as f32
}

/// A model that maps blocks of tokens to logits and keeps a KV cache.
///
/// The cache holds one entry per committed token, in slot order `0..cache_len()`. A forward
/// pass appends one entry per block token at slots `cache_len()..cache_len() + n` and returns
/// the logits of the block's rows from [`Batch::first_output`] on (every row unless the caller
/// asked for fewer with [`Batch::logits_for_last`]); the caller then keeps what it accepted with
/// [`LanguageModel::truncate`] or [`LanguageModel::compact`].
///
/// Futures are not `Send`: in the browser the GPU lives on one thread.
#[allow(async_fn_in_trait)]
pub trait LanguageModel {
    fn config(&self) -> &ModelConfig;

    /// Number of entries in the KV cache.
    fn cache_len(&self) -> usize;

    /// Most entries the KV cache can hold.
    fn capacity(&self) -> usize;

    /// Runs the block and returns its logits ([`Batch::n_outputs`] rows).
    async fn forward(&mut self, batch: &Batch) -> Result<Logits>;

    // The engine calls have no default bodies, so a wrapper of another model (a pacing or
    // counting layer) that forgets one does not compile, instead of silently falling back to a
    // slower path.

    /// Like [`LanguageModel::forward`] but returns only each row's argmax, so engines that
    /// reduce on the device read back a few bytes instead of whole vocabularies (engines that
    /// select on the CPU return [`argmax_rows`] of their logits). A row whose logits are all
    /// NaN or -inf is [`ModelError::NoUsableLogit`].
    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>>;

    /// Like [`LanguageModel::forward`] but returns only each row's `k` largest logits and its
    /// softmax normalizer ([`TopLogits`]; engines that select on the CPU return
    /// [`TopLogits::of`] their logits).
    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits>;

    /// The shortest cache length other than 0 that [`LanguageModel::truncate`] keeps exactly:
    /// an engine whose sliding-window layers keep only a ring of their latest entries (see
    /// [`crate::kv_ring`]) has lost the entries a shorter cache's next token would attend to.
    /// 0 for an engine that keeps every entry. Truncating within the last forward's block is
    /// always exact.
    fn truncate_floor(&self) -> usize;

    /// Drops cache entries `len..`. O(1). A `len` other than 0 below
    /// [`LanguageModel::truncate_floor`] empties the cache instead (never a cache that gives
    /// other logits than computing its entries again): [`LanguageModel::cache_len`] says what
    /// was kept.
    fn truncate(&mut self, len: usize);

    /// Keeps cache entries `..base` followed by the block entries `base + keep[k]` (in that
    /// order, `keep` increasing), moved to consecutive slots. Used after tree verification.
    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_positions_and_visibility() {
        // 0 -> 1 -> 2, 0 -> 3
        let b = Batch::tree(&[5, 6, 7, 8], &[None, Some(0), Some(1), Some(0)], 10).unwrap();
        assert_eq!(b.positions, vec![10, 11, 12, 11]);
        let v = b.visibility();
        let row = |i: usize| v[i * 4..i * 4 + 4].to_vec();
        assert_eq!(row(2), vec![true, true, true, false]);
        assert_eq!(row(3), vec![true, false, false, true]);
        assert!(Batch::tree(&[1, 2], &[Some(1), None], 0).is_err());
    }

    #[test]
    fn causal_visibility_and_validation() {
        let b = Batch::causal(&[1, 2, 3], 4);
        assert_eq!(b.positions, vec![4, 5, 6]);
        assert_eq!(
            b.visibility(),
            vec![true, false, false, true, true, false, true, true, true]
        );
        assert!(b.validate(10, 4, 7).is_ok());
        assert!(matches!(
            b.validate(10, 4, 6),
            Err(ModelError::ContextFull { .. })
        ));
        assert!(matches!(
            b.validate(3, 4, 7),
            Err(ModelError::TokenOutOfRange { id: 3, .. })
        ));
        assert!(Batch::causal(&[], 0).validate(10, 0, 10).is_err());
    }

    #[test]
    fn logits_for_the_last_rows() {
        let b = Batch::causal(&[1, 2, 3], 4);
        assert_eq!((b.first_output, b.n_outputs()), (0, 3));
        let last = b.clone().logits_for_last(1);
        assert_eq!((last.first_output, last.n_outputs()), (2, 1));
        assert_eq!(b.clone().logits_for_last(0).n_outputs(), 0);
        assert_eq!(b.clone().logits_for_last(9).first_output, 0);
        assert!(last.validate(10, 4, 7).is_ok());
        let mut past_the_end = b;
        past_the_end.first_output = 4;
        assert!(matches!(
            past_the_end.validate(10, 4, 7),
            Err(ModelError::InvalidBatch(_))
        ));
    }

    #[test]
    fn top_k_orders_by_value_then_index_and_skips_nan_and_minus_infinity() {
        let row = [
            1.0,
            f32::NAN,
            3.0,
            f32::NEG_INFINITY,
            3.0,
            -0.0,
            0.0,
            f32::INFINITY,
        ];
        assert_eq!(
            top_k_of(&row, 4),
            vec![(7, f32::INFINITY), (2, 3.0), (4, 3.0), (0, 1.0)]
        );
        // +0 ranks before -0 (total order), then the list ends: NaN and -inf are never listed.
        let all = top_k_of(&row, 10);
        assert_eq!(all.len(), 6);
        assert_eq!(all[4].0, 6);
        assert_eq!(all[5].0, 5);
        assert!(top_k_of(&row, 0).is_empty());
        let lse = log_sum_exp(&[0.0, 1.0, f32::INFINITY, f32::NAN]);
        assert!((lse - (1.0f32.exp() + 1.0).ln()).abs() < 1e-6);
        assert_eq!(log_sum_exp(&[f32::NAN]), f32::NEG_INFINITY);
    }

    #[test]
    fn argmax_prefers_lowest_index() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
    }

    /// The scan the vectorized argmax replaced: its definition.
    fn argmax_by_scan(values: &[f32]) -> u32 {
        let mut best = 0usize;
        for (i, &v) in values.iter().enumerate() {
            if v > values[best] || values[best].is_nan() {
                best = i;
            }
        }
        best as u32
    }

    #[test]
    fn argmax_equals_the_scan_on_rows_with_ties_nan_and_infinities() {
        // A seeded generator (no dependency): values drawn from a few levels, so ties are
        // common, with NaN, infinities and signed zeros mixed in, at odd lengths.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
        for len in [0usize, 1, 2, 15, 16, 17, 63, 64, 65, 129, 1000, 49_152] {
            for trial in 0..20 {
                let row: Vec<f32> = (0..len)
                    .map(|_| match next() % 8 {
                        0 if trial % 2 == 0 => specials[(next() % 5) as usize],
                        1 if trial % 5 == 0 => f32::NAN,
                        _ => (next() % 7) as f32 - 3.0,
                    })
                    .collect();
                assert_eq!(
                    argmax(&row),
                    argmax_by_scan(&row),
                    "len {len} trial {trial}"
                );
                let usable = row.iter().any(|&v| v > f32::NEG_INFINITY);
                match argmax_rows_of(&row, len.max(1)) {
                    Ok(ids) if len > 0 => {
                        assert!(usable, "len {len} trial {trial}");
                        assert_eq!(ids, vec![argmax_by_scan(&row)]);
                    }
                    Ok(ids) => assert!(ids.is_empty()),
                    Err(_) => assert!(!usable, "len {len} trial {trial}"),
                }
            }
        }
        let all_nan = [f32::NAN; 20];
        assert_eq!(argmax(&all_nan), 19);
        assert!(argmax_rows_of(&all_nan, 20).is_err());
        assert!(argmax_rows_of(&[f32::NEG_INFINITY, f32::NAN], 2).is_err());
    }
}
