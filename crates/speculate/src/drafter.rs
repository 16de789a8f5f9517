//! Drafters propose tokens the target is likely to produce next; the target then verifies a
//! whole draft in one forward pass (see `verify`). A drafter never affects what is output,
//! only how many target forwards it takes.

use std::future::Future;
use std::pin::Pin;

use runahead_model::ModelError;

use crate::cost::CostCurve;
use crate::draft::Draft;
use crate::sampling::SamplingParams;

/// A boxed, non-`Send` future (in the browser the GPU lives on one thread).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a drafter is asked for at one decoding step.
#[derive(Clone, Copy, Debug)]
pub struct DraftRequest<'a> {
    /// The prompt, the output so far, and the token about to be fed to the target (last).
    pub context: &'a [u32],
    /// Most nodes the draft may have (adaptive depth's budget; always >= 1).
    pub max_nodes: usize,
    /// How the target samples: a drafter that samples (a draft model) must process its own
    /// distribution the same way and attach it to the nodes as `q`.
    pub sampling: &'a SamplingParams,
    /// The target's measured verification cost at the current context, when depth is adaptive
    /// (lets a drafter that chooses between sources weigh their costs).
    pub cost: Option<&'a CostCurve>,
}

/// Proposes continuations of the current context.
pub trait Drafter {
    /// Short name for statistics and the CLI (`ngram`, `suffix`, `model`, `auto`).
    fn name(&self) -> &'static str;

    /// A draft of at most `request.max_nodes` nodes. An empty draft means "no idea": the
    /// step falls back to plain decoding.
    fn propose<'a>(
        &'a mut self,
        request: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>>;

    /// The generation's prompt, while the target prefills it: a draft model reads it here, so
    /// that its prompt processing counts as prefill (time to first token), as the target's does,
    /// and its first proposal costs what any proposal costs.
    fn prefill<'a>(&'a mut self, prompt: &'a [u32]) -> LocalFuture<'a, Result<(), ModelError>> {
        let _ = prompt;
        ready(Ok(()))
    }

    /// The outcome of the last proposal: `path` lists the accepted nodes of `draft`, root
    /// first. Called once per verified draft.
    fn observe(&mut self, draft: &Draft, path: &[usize]) {
        let _ = (draft, path);
    }

    /// The generation ended; `context` is its prompt followed by its output. Drafters that
    /// learn across requests index it here.
    fn finish(&mut self, prompt_len: usize, context: &[u32]) {
        let _ = (prompt_len, context);
    }

    /// Whether proposing costs model time (a draft model) rather than a lookup; adaptive
    /// depth accounts for that cost.
    fn runs_a_model(&self) -> bool {
        false
    }
}

/// Judges a draft that was not verified by its first level alone, against `next`, the token the
/// target emitted instead, and tells `drafter`: a drafter whose drafts are not worth verifying
/// can still show that they would have been, and earn its way back. Returns what the first
/// level's confidences expected and what was accepted (0 or 1), for adaptive depth's record.
pub fn observe_unverified<D: Drafter + ?Sized>(
    drafter: &mut D,
    mut draft: Draft,
    next: u32,
) -> (f64, usize) {
    let depths = draft.depths();
    draft.retain(&depths.iter().map(|&d| d == 1).collect::<Vec<_>>());
    let path: Vec<usize> = draft
        .children(None)
        .find(|&c| draft.tokens[c] == next)
        .into_iter()
        .collect();
    drafter.observe(&draft, &path);
    let expected: f32 = draft.confidence.iter().sum();
    (expected as f64, path.len())
}

/// A ready future, for drafters that answer without awaiting anything.
pub fn ready<'a, T: 'a>(value: T) -> LocalFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// A running ratio per match length (what was accepted over what was judged or expected),
/// exponentially decayed from a prior; lengths past the last share its bucket.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RatioByLength {
    /// `[length] -> (numerator, denominator)`.
    counts: Vec<(f32, f32)>,
    decay: f32,
}

impl RatioByLength {
    pub fn new(max_len: usize, prior: (f32, f32), decay: f32) -> Self {
        RatioByLength {
            counts: vec![prior; max_len + 1],
            decay,
        }
    }

    pub fn ratio(&self, len: usize) -> f32 {
        let (a, n) = self.counts[len.min(self.counts.len() - 1)];
        a / n
    }

    pub fn add(&mut self, len: usize, numerator: f32, denominator: f32) {
        let i = len.min(self.counts.len() - 1);
        let (a, n) = &mut self.counts[i];
        *a = *a * self.decay + numerator;
        *n = *n * self.decay + denominator;
    }
}

/// Running acceptance rate of drafted tokens, per match length (longer matches are more
/// trustworthy). Starts from an optimistic prior so that a drafter gets tried.
#[derive(Clone, Debug)]
pub(crate) struct AcceptanceByLength(RatioByLength);

impl AcceptanceByLength {
    pub fn new(max_len: usize) -> Self {
        AcceptanceByLength(RatioByLength::new(max_len, (0.6, 1.0), 0.95))
    }

    pub fn rate(&self, len: usize) -> f32 {
        self.0.ratio(len).clamp(0.02, 0.98)
    }

    /// Records `offered` tokens drafted after a match of `len`, of which `accepted` were.
    pub fn record(&mut self, len: usize, offered: usize, accepted: usize) {
        // Each offered token is one Bernoulli trial (the first rejection ends the chain, so
        // count it and the accepted ones; later tokens were never judged).
        let judged = accepted + usize::from(accepted < offered);
        self.0.add(len, accepted as f32, judged as f32);
    }
}

/// Prompt lookup: finds the most recent earlier occurrence of the context's last `n` tokens
/// (longest `n` first, from `max_n` down to `min_n`) and proposes the tokens that followed it.
/// Model-free, so it costs nothing on the GPU; it shines when the output repeats the input
/// (summaries, edits, code refactors, quoting). Its confidence is the acceptance rate it has
/// seen so far for matches of the same length.
#[derive(Clone, Debug)]
pub struct NgramDrafter {
    pub min_n: usize,
    pub max_n: usize,
    /// Longest draft proposed.
    pub max_len: usize,
    acceptance: AcceptanceByLength,
    last_match: usize,
}

impl Default for NgramDrafter {
    fn default() -> Self {
        NgramDrafter::new(1, 4, 16)
    }
}

impl NgramDrafter {
    pub fn new(min_n: usize, max_n: usize, max_len: usize) -> Self {
        NgramDrafter {
            min_n,
            max_n,
            max_len,
            acceptance: AcceptanceByLength::new(max_n),
            last_match: 0,
        }
    }

    /// The continuation after the latest earlier occurrence of the longest matching suffix,
    /// and that suffix's length.
    pub fn lookup(&self, context: &[u32], max: usize) -> (Vec<u32>, usize) {
        let len = context.len();
        let max = max.min(self.max_len);
        if max == 0 {
            return (Vec::new(), 0);
        }
        for n in (self.min_n.max(1)..=self.max_n.min(len.saturating_sub(1))).rev() {
            let pattern = &context[len - n..];
            // Latest start s < len - n whose n tokens equal the pattern and are followed by at
            // least one token.
            if let Some(s) = (0..len - n).rev().find(|&s| &context[s..s + n] == pattern) {
                let from = s + n;
                return (context[from..(from + max).min(len)].to_vec(), n);
            }
        }
        (Vec::new(), 0)
    }
}

impl Drafter for NgramDrafter {
    fn name(&self) -> &'static str {
        "ngram"
    }

    fn propose<'a>(
        &'a mut self,
        request: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        let (tokens, n) = self.lookup(request.context, request.max_nodes);
        self.last_match = n;
        ready(Ok(Draft::chain("ngram", &tokens, self.acceptance.rate(n))))
    }

    fn observe(&mut self, draft: &Draft, path: &[usize]) {
        self.acceptance
            .record(self.last_match, draft.len(), path.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposes_what_followed_the_latest_match() {
        let d = NgramDrafter::default();
        let look = |c: &[u32], max| d.lookup(c, max).0;
        // ... 1 2 3 [4 5 6] ... 1 2 3  -> propose 4 5 6
        assert_eq!(look(&[9, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3], 3), vec![4, 5, 6]);
        // The latest occurrence wins.
        assert_eq!(look(&[1, 2, 8, 1, 2, 9, 1, 2], 1), vec![9]);
        // Longest n first: the 2-gram (5, 1) matches at its first place, not the later 1-gram.
        assert_eq!(d.lookup(&[5, 1, 7, 1, 3, 5, 1], 2), (vec![7, 1], 2));
        // Draft stops at the end of the context.
        assert_eq!(look(&[1, 2, 1], 5), vec![2, 1]);
        assert!(look(&[1, 2, 3], 4).is_empty(), "no repeat, no draft");
        assert!(look(&[], 4).is_empty());
        assert!(look(&[1, 1], 0).is_empty());
    }

    #[test]
    fn confidence_follows_acceptance_per_match_length() {
        let mut a = AcceptanceByLength::new(4);
        let prior = a.rate(2);
        for _ in 0..20 {
            a.record(2, 8, 0);
            a.record(4, 8, 8);
        }
        assert!(a.rate(2) < 0.1 && a.rate(2) < prior);
        assert!(a.rate(4) > 0.9);
        assert_eq!(a.rate(9), a.rate(4), "longer matches share the last bucket");
    }
}
