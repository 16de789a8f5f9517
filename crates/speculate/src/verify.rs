//! Verification: the target scores `[next, draft...]` in one forward pass, and the accepted
//! path through the draft tree is chosen so that the emitted tokens are distributed exactly as
//! plain decoding would emit them.
//!
//! Block row 0 is the root (`next`, the token being fed); draft node `i` is block row `i + 1`.

use runahead_model::{Batch, LanguageModel};

use crate::draft::Draft;
use crate::error::GenerateError;
use crate::sampling::{Distribution, Sampler, SamplingError, Scores};

/// The outcome of verifying one draft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Accepted draft nodes, root first; each is the parent of the next.
    pub path: Vec<usize>,
    /// The token the target picks after the accepted path (a correction or a bonus token).
    pub next: u32,
}

/// How a rejected draft token is replaced. Only [`Rejection::Residual`] is exact; the other
/// rule exists so the statistical tests can show that they catch a wrong verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Draw from `max(0, p - q)` renormalized (for one-hot `q`: `p` without the token).
    Residual,
    /// Draw from `p` itself: a classic bug that over-weights drafted tokens. Never use it.
    BrokenResampleFromTarget,
}

/// The block a draft is verified with: a causal block for a chain, a tree block otherwise.
pub fn verification_batch(
    next: u32,
    draft: &Draft,
    base: usize,
) -> Result<Batch, runahead_model::ModelError> {
    let mut tokens = Vec::with_capacity(draft.len() + 1);
    tokens.push(next);
    tokens.extend_from_slice(&draft.tokens);
    if draft.is_chain() {
        return Ok(Batch::causal(&tokens, base));
    }
    let mut parents = Vec::with_capacity(tokens.len());
    parents.push(None);
    parents.extend(draft.parents.iter().map(|p| Some(p.map_or(0, |p| p + 1))));
    Batch::tree(&tokens, &parents, base)
}

/// Runs the target over the draft and picks the accepted path.
pub async fn verify<M: LanguageModel>(
    model: &mut M,
    next: u32,
    draft: &Draft,
    sampler: &mut Sampler,
    rejection: Rejection,
) -> Result<Verdict, GenerateError> {
    let batch = verification_batch(next, draft, model.cache_len())?;
    if sampler.params.is_greedy() {
        let ids = model.forward_argmax(&batch).await?;
        return Ok(walk_greedy(draft, &ids));
    }
    let scores = Scores::forward(model, &batch, &sampler.params).await?;
    let params = sampler.params.clone();
    let mut row = |r: usize| scores.distribution(r, &params);
    walk_sampling(draft, &mut row, &mut || sampler.uniform(), rejection)
        .map_err(GenerateError::from)
}

/// Greedy: follow the child whose token is the target's argmax, as long as there is one.
/// `argmax[r]` is the target's pick after block row `r`.
pub fn walk_greedy(draft: &Draft, argmax: &[u32]) -> Verdict {
    let mut path = Vec::new();
    let mut row = 0;
    loop {
        let want = argmax[row];
        let parent = row.checked_sub(1);
        match draft.children(parent).find(|&c| draft.tokens[c] == want) {
            Some(c) => {
                path.push(c);
                row = c + 1;
            }
            None => return Verdict { path, next: want },
        }
    }
}

/// Sampling: at each node, offer its children one after another to the target's distribution
/// `p` (recursive rejection sampling). A child with draft distribution `q` is accepted with
/// probability `min(1, p(x) / q(x))` (`q` one-hot for deterministic drafts: `p(x)`); after a
/// rejection `p` becomes the residual `max(0, p - q)` renormalized, and the next child is
/// offered to that. When every child is rejected (or there is none) the token is drawn from the
/// current `p`. Each emitted token is then distributed exactly as under `p`, whatever the
/// draft. A child with a sampled `q` must be its parent's only child (draft models propose
/// chains), which is what the `min(1, p/q)` rule assumes.
pub fn walk_sampling(
    draft: &Draft,
    row: &mut dyn FnMut(usize) -> Result<Distribution, SamplingError>,
    uniform: &mut dyn FnMut() -> f64,
    rejection: Rejection,
) -> Result<Verdict, SamplingError> {
    let mut path = Vec::new();
    let mut r = 0;
    'node: loop {
        let mut p = row(r)?;
        let parent = r.checked_sub(1);
        for c in draft.children(parent) {
            let x = draft.tokens[c];
            let px = p.probs.get(x as usize).copied().unwrap_or(0.0) as f64;
            let (accept, residual) = match &draft.q[c] {
                None => (px, None),
                Some(q) => {
                    let qx = q.probs.get(x as usize).copied().unwrap_or(0.0) as f64;
                    let ratio = if qx > 0.0 { (px / qx).min(1.0) } else { 1.0 };
                    (ratio, Some(q))
                }
            };
            if uniform() < accept {
                path.push(c);
                r = c + 1;
                continue 'node;
            }
            if rejection == Rejection::Residual {
                p = match residual {
                    None => p.without(x),
                    Some(q) => p.residual(q),
                };
            }
        }
        return Ok(Verdict {
            path,
            next: p.pick(uniform()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_walk_follows_the_argmax_through_the_tree() {
        // root -> 0 (5) -> 1 (6);  root -> 2 (7) -> 3 (8)
        let mut d = Draft::empty("t");
        d.push(5, None, 1.0);
        d.push(6, Some(0), 1.0);
        d.push(7, None, 1.0);
        d.push(8, Some(2), 1.0);
        // Target: after root 7, after node 2 (row 3) 8, after node 3 (row 4) 9.
        let v = walk_greedy(&d, &[7, 0, 0, 8, 9]);
        assert_eq!(
            v,
            Verdict {
                path: vec![2, 3],
                next: 9
            }
        );
        // Nothing matches at the root.
        assert_eq!(
            walk_greedy(&d, &[4, 0, 0, 0, 0]),
            Verdict {
                path: vec![],
                next: 4
            }
        );
    }

    #[test]
    fn tree_batches_shift_parents_past_the_root() {
        let mut d = Draft::empty("t");
        d.push(5, None, 1.0);
        d.push(7, None, 1.0);
        d.push(8, Some(1), 1.0);
        let b = verification_batch(1, &d, 10).unwrap();
        assert_eq!(b.tokens, vec![1, 5, 7, 8]);
        assert_eq!(b.positions, vec![10, 11, 11, 12]);
        let chain = verification_batch(1, &Draft::chain("c", &[2, 3], 1.0), 4).unwrap();
        assert_eq!(chain.mask, runahead_model::Mask::Causal);
        assert_eq!(chain.positions, vec![4, 5, 6]);
    }
}
