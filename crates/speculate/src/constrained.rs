//! The generation loop's side of a [`Constraint`]: picking under the mask, checking drafts
//! against the constraint before the verification forward, and verifying with the mask
//! applied at every row the walk visits.
//!
//! The mask is applied to the target's distribution `p` before temperature, top-k and top-p;
//! a drafted token the constraint forbids has `p = 0` there, so verification would reject it
//! for certain. Dropping a deterministic draft token (one-hot `q`) the constraint forbids is
//! therefore exact (`p` without a token of probability 0 is `p`). A token a draft model sampled
//! from its own `q` is kept (its descendants dropped): its rejection still turns `p` into the
//! residual `max(0, p - q)`, which exactness needs.

use runahead_model::{Batch, LanguageModel};

use crate::constraint::{Constraint, ConstraintError, TokenSet};
use crate::draft::Draft;
use crate::error::GenerateError;
use crate::sampling::{Distribution, Sampler, SamplingError};
use crate::verify::{verification_batch, walk_sampling, Rejection, Verdict};

/// A constraint and the mask buffer the loop reuses.
pub(crate) struct Guide<'c> {
    constraint: &'c mut dyn Constraint,
    mask: TokenSet,
}

impl<'c> Guide<'c> {
    pub(crate) fn new(constraint: &'c mut dyn Constraint) -> Self {
        Guide {
            constraint,
            mask: TokenSet::default(),
        }
    }

    pub(crate) fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.constraint.commit(token)
    }

    /// The tokens the constraint forces next, at most `room`.
    pub(crate) fn forced(&mut self, room: usize) -> Vec<u32> {
        let mut forced = self.constraint.forced_tokens();
        forced.truncate(room);
        forced
    }

    /// The distribution `sampler`'s parameters give `logits` under the current mask.
    fn distribution(
        &mut self,
        logits: &[f32],
        sampler: &Sampler,
    ) -> Result<Distribution, GenerateError> {
        if self.mask.len() != logits.len() {
            self.mask = TokenSet::new(logits.len());
        }
        self.constraint.mask(&mut self.mask)?;
        let mut masked = logits.to_vec();
        self.mask.apply(&mut masked);
        Ok(sampler.distribution(&masked)?)
    }

    /// Picks the next token from `logits` under the mask (greedy: the best allowed token).
    pub(crate) fn pick(
        &mut self,
        logits: &[f32],
        sampler: &mut Sampler,
    ) -> Result<u32, GenerateError> {
        let dist = self.distribution(logits, sampler)?;
        if sampler.params.is_greedy() {
            return Ok(dist.support[0]);
        }
        let u = sampler.uniform();
        Ok(dist.pick(u))
    }

    /// Drops the draft nodes the constraint forbids after the root `next` is committed, with
    /// their descendants. A forbidden node sampled from a draft distribution is kept (not its
    /// descendants) when sampling, so its certain rejection still leaves the residual.
    pub(crate) fn check_draft(
        &mut self,
        draft: &mut Draft,
        sampling: bool,
    ) -> Result<(), ConstraintError> {
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
            allowed[i] = self.constraint.allowed_prefix(&path)? == path.len();
            if !allowed[i] {
                keep[i] = sampling && draft.q[i].is_some();
            }
        }
        if keep.iter().any(|&k| !k) {
            draft.retain(&keep);
        }
        Ok(())
    }

    /// Verification under the constraint: the target scores `[next, draft...]` in one forward
    /// and the walk picks from the masked distribution at each row it visits, committing each
    /// accepted draft token to the constraint as it goes (the root `next` is committed).
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
        let mut row = |r: usize| -> Result<Distribution, SamplingError> {
            let mut step = || -> Result<Distribution, GenerateError> {
                if r > 0 {
                    self.constraint.commit(draft.tokens[r - 1])?;
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
        match (verdict, failed) {
            (_, Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
            (Err(e), None) => Err(e.into()),
        }
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
