//! The generation loop's side of a [`Constraint`] and of [`LogitOptions`]: picking under the
//! mask (and the penalties and bias), checking drafts against the constraint before the
//! verification forward, and verifying with both applied at every row the walk visits.
//!
//! The mask is applied to the target's distribution `p` before temperature, top-k and top-p;
//! a drafted token the constraint forbids has `p = 0` there, so verification would reject it
//! for certain. Dropping a deterministic draft token (one-hot `q`) the constraint forbids is
//! therefore exact (`p` without a token of probability 0 is `p`). A token a draft model sampled
//! from its own `q` is kept (its descendants dropped): its rejection still turns `p` into the
//! residual `max(0, p - q)`, which exactness needs.

use runahead_model::{Batch, LanguageModel};
use web_time::Instant;

use crate::constraint::{Constraint, ConstraintError, TokenSet};
use crate::draft::Draft;
use crate::error::GenerateError;
use crate::logits::{LogitOptions, LogitProcessor, TokenLogprob};
use crate::sampling::{Distribution, Sampler, SamplingError};
use crate::verify::{verification_batch, walk_sampling, Rejection, Verdict};

/// What the loop does to the target's logits at every position it picks or verifies: a
/// constraint's mask, the penalties and bias of [`LogitOptions`], and the log-probabilities of
/// the picked tokens.
pub(crate) struct Guide<'c> {
    constraint: Option<&'c mut dyn Constraint>,
    mask: TokenSet,
    logits: LogitProcessor,
    /// The processed rows of the positions visited since the last pick, when reporting
    /// log-probabilities (their tokens are known once the walk ends).
    visited: Vec<Vec<f32>>,
    /// One per picked token, in order.
    pub(crate) logprobs: Vec<TokenLogprob>,
    /// Masks computed so far and their total time ([`crate::Stats::masks`]).
    pub(crate) masks: usize,
    pub(crate) mask_seconds: f64,
}

impl<'c> Guide<'c> {
    pub(crate) fn new(constraint: Option<&'c mut dyn Constraint>, logits: LogitOptions) -> Self {
        Guide {
            constraint,
            mask: TokenSet::default(),
            logits: LogitProcessor::new(logits),
            visited: Vec::new(),
            logprobs: Vec::new(),
            masks: 0,
            mask_seconds: 0.0,
        }
    }

    pub(crate) fn has_constraint(&self) -> bool {
        self.constraint.is_some()
    }

    /// Advances past a generated token: the constraint's state and the penalties' counts.
    pub(crate) fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.logits.commit(token);
        match self.constraint.as_deref_mut() {
            Some(c) => c.commit(token),
            None => Ok(()),
        }
    }

    /// The tokens the constraint forces next, at most `room` (none without a constraint).
    pub(crate) fn forced(&mut self, room: usize) -> Vec<u32> {
        let Some(c) = self.constraint.as_deref_mut() else {
            return Vec::new();
        };
        let mut forced = c.forced_tokens();
        forced.truncate(room);
        forced
    }

    /// The distribution `sampler`'s parameters give `logits` after the bias, the penalties
    /// and the mask.
    fn distribution(
        &mut self,
        logits: &[f32],
        sampler: &Sampler,
    ) -> Result<Distribution, GenerateError> {
        let mut processed = logits.to_vec();
        self.logits.apply(&mut processed);
        if let Some(c) = self.constraint.as_deref_mut() {
            if self.mask.len() != logits.len() {
                self.mask = TokenSet::new(logits.len());
            }
            let start = Instant::now();
            c.mask(&mut self.mask)?;
            self.mask_seconds += start.elapsed().as_secs_f64();
            self.masks += 1;
            self.mask.apply(&mut processed);
        }
        let dist = sampler.distribution(&processed)?;
        if self.logits.reports_logprobs() {
            self.visited.push(processed);
        }
        Ok(dist)
    }

    /// Records the log-probabilities of the visited positions' picked `tokens`, in order.
    fn record(&mut self, tokens: impl Iterator<Item = u32>, temperature: f32) {
        let visited = std::mem::take(&mut self.visited);
        for (row, token) in visited.iter().zip(tokens) {
            let lp = self.logits.logprob(row, temperature, token);
            self.logprobs.push(lp);
        }
    }

    /// Picks the next token from `logits` (greedy: the best allowed token).
    pub(crate) fn pick(
        &mut self,
        logits: &[f32],
        sampler: &mut Sampler,
    ) -> Result<u32, GenerateError> {
        self.visited.clear();
        let dist = self.distribution(logits, sampler)?;
        let token = if sampler.params.is_greedy() {
            dist.support[0]
        } else {
            let u = sampler.uniform();
            dist.pick(u)
        };
        self.record(std::iter::once(token), sampler.params.temperature);
        Ok(token)
    }

    /// Drops the draft nodes the constraint forbids after the root `next` is committed, with
    /// their descendants. A forbidden node sampled from a draft distribution is kept (not its
    /// descendants) when sampling, so its certain rejection still leaves the residual.
    pub(crate) fn check_draft(
        &mut self,
        draft: &mut Draft,
        sampling: bool,
    ) -> Result<(), ConstraintError> {
        let Some(constraint) = self.constraint.as_deref_mut() else {
            return Ok(());
        };
        if draft.is_empty() {
            return Ok(());
        }
        let mut keep = vec![true; draft.len()];
        // Whether the path from the root through node i is allowed (kept nodes only).
        let mut allowed = vec![false; draft.len()];
        for i in 0..draft.len() {
            if let Some(p) = draft.parents[i] {
                if !keep[p] || !allowed[p] {
                    keep[i] = false;
                    continue;
                }
            }
            let mut path = vec![draft.tokens[i]];
            let mut node = draft.parents[i];
            while let Some(p) = node {
                path.push(draft.tokens[p]);
                node = draft.parents[p];
            }
            path.reverse();
            allowed[i] = constraint.allowed_prefix(&path)? == path.len();
            if !allowed[i] {
                keep[i] = sampling && draft.q[i].is_some();
            }
        }
        if keep.iter().any(|&k| !k) {
            draft.retain(&keep);
        }
        Ok(())
    }

    /// Verification under the constraint and the logit options: the target scores `[next,
    /// draft...]` in one forward and the walk picks from the processed distribution at each row
    /// it visits, committing each accepted draft token as it goes (the root `next` is
    /// committed), so a row's penalties count the path that leads to it.
    pub(crate) async fn verify<M: LanguageModel>(
        &mut self,
        model: &mut M,
        next: u32,
        draft: &Draft,
        sampler: &mut Sampler,
        rejection: Rejection,
    ) -> Result<Verdict, GenerateError> {
        let batch = verification_batch(next, draft, model.cache_len())?;
        let logits = model.forward(&batch).await?;
        let mut failed: Option<GenerateError> = None;
        let params_sampler = Sampler::new(sampler.params.clone())?;
        self.visited.clear();
        let mut row = |r: usize| -> Result<Distribution, SamplingError> {
            let mut step = || -> Result<Distribution, GenerateError> {
                if r > 0 {
                    self.commit(draft.tokens[r - 1])?;
                }
                self.distribution(logits.row(r), &params_sampler)
            };
            step().map_err(|e| {
                let carried = match &e {
                    GenerateError::Sampling(s) => s.clone(),
                    _ => SamplingError::NoFiniteLogit,
                };
                failed = Some(e);
                carried
            })
        };
        let verdict = walk_sampling(draft, &mut row, &mut || sampler.uniform(), rejection);
        let verdict = match (verdict, failed) {
            (_, Some(e)) => return Err(e),
            (Ok(v), None) => v,
            (Err(e), None) => return Err(e.into()),
        };
        let picked = verdict.path.iter().map(|&n| draft.tokens[n]);
        let picked = picked.chain(std::iter::once(verdict.next));
        self.record(picked, sampler.params.temperature);
        Ok(verdict)
    }
}

/// The prompt's last row picked under the constraint: a forward of the prefill's last block
/// with whole logits (the mask needs every token's score).
pub(crate) async fn pick_after_prefill<M: LanguageModel>(
    guide: &mut Guide<'_>,
    model: &mut M,
    batch: &Batch,
    sampler: &mut Sampler,
) -> Result<u32, GenerateError> {
    let logits = model.forward(batch).await?;
    let last = logits
        .n_rows()
        .checked_sub(1)
        .ok_or(GenerateError::EmptyPrompt)?;
    guide.pick(logits.row(last), sampler)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SamplingParams;

    /// Allows only odd tokens (and any commit).
    struct Odd;

    impl Constraint for Odd {
        fn mask(&mut self, allowed: &mut TokenSet) -> Result<(), ConstraintError> {
            for t in (1..allowed.len() as u32).step_by(2) {
                allowed.insert(t);
            }
            Ok(())
        }
        fn commit(&mut self, _: u32) -> Result<(), ConstraintError> {
            Ok(())
        }
        fn allowed_prefix(&mut self, tokens: &[u32]) -> Result<usize, ConstraintError> {
            Ok(tokens.iter().take_while(|t| *t % 2 == 1).count())
        }
        fn forced_tokens(&mut self) -> Vec<u32> {
            Vec::new()
        }
        fn rollback(&mut self, _: usize) -> Result<(), ConstraintError> {
            Ok(())
        }
    }

    #[test]
    fn the_guide_counts_and_times_the_masks_it_computes() {
        let logits = [0.0, 1.0, 3.0, 2.0, 0.5];
        let mut sampler = Sampler::new(SamplingParams::greedy()).unwrap();
        let mut odd = Odd;
        let mut guide = Guide::new(Some(&mut odd), LogitOptions::default());
        for _ in 0..3 {
            // The best odd token, not the best token.
            assert_eq!(guide.pick(&logits, &mut sampler).unwrap(), 3);
        }
        assert_eq!(guide.masks, 3);
        assert!(guide.mask_seconds > 0.0);

        let mut unconstrained = Guide::new(None, LogitOptions::default());
        assert_eq!(unconstrained.pick(&logits, &mut sampler).unwrap(), 2);
        assert_eq!((unconstrained.masks, unconstrained.mask_seconds), (0, 0.0));
    }
}
