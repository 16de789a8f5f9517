//! A draft: a tree of candidate tokens that may follow the token about to be fed to the target.
//! A chain is the tree in which every node is the child of the one before it.

use crate::sampling::Distribution;

/// Candidate continuations, as a tree hanging off the root (the token the target is about to
/// be fed). Node `i` is token `tokens[i]` whose parent is node `parents[i]` (`None`: the
/// root). Invariant: parents come before their children (`parents[i] < i`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Draft {
    pub tokens: Vec<u32>,
    pub parents: Vec<Option<usize>>,
    /// The drafter's estimate, in `(0, 1]`, that node `i` is accepted once its parent is:
    /// what adaptive depth ranks nodes by.
    pub confidence: Vec<f32>,
    /// The distribution each node was sampled from when a draft model samples (`q` of
    /// speculative sampling); `None` for tokens proposed deterministically (one-hot `q`).
    pub q: Vec<Option<Distribution>>,
    /// Which drafter proposed it (statistics; `auto` reports the drafter it chose).
    pub source: &'static str,
}

impl Draft {
    pub fn empty(source: &'static str) -> Self {
        Draft {
            source,
            ..Draft::default()
        }
    }

    /// A chain of deterministic tokens, all with the same confidence.
    pub fn chain(source: &'static str, tokens: &[u32], confidence: f32) -> Self {
        Draft {
            tokens: tokens.to_vec(),
            parents: (0..tokens.len()).map(|i| i.checked_sub(1)).collect(),
            confidence: vec![confidence; tokens.len()],
            q: vec![None; tokens.len()],
            source,
        }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Appends a node; `parent` must already be in the draft.
    pub fn push(&mut self, token: u32, parent: Option<usize>, confidence: f32) {
        debug_assert!(parent.is_none_or(|p| p < self.len()));
        self.tokens.push(token);
        self.parents.push(parent);
        self.confidence.push(confidence);
        self.q.push(None);
    }

    /// Whether every node's parent is the node before it.
    pub fn is_chain(&self) -> bool {
        self.parents
            .iter()
            .enumerate()
            .all(|(i, &p)| p == i.checked_sub(1))
    }

    /// Depth of each node (children of the root have depth 1).
    pub fn depths(&self) -> Vec<usize> {
        let mut depth = vec![0usize; self.len()];
        for i in 0..self.len() {
            depth[i] = self.parents[i].map_or(1, |p| depth[p] + 1);
        }
        depth
    }

    pub fn max_depth(&self) -> usize {
        self.depths().into_iter().max().unwrap_or(0)
    }

    /// Children of `node` (`None`: the root), in draft order.
    pub fn children(&self, node: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).filter(move |&i| self.parents[i] == node)
    }

    /// Probability, under the drafter's own confidences, that node `i` and all its ancestors
    /// are accepted.
    pub fn path_confidence(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.len()];
        for i in 0..self.len() {
            let parent = self.parents[i].map_or(1.0, |p| out[p]);
            out[i] = parent * self.confidence[i].clamp(0.0, 1.0);
        }
        out
    }

    /// Keeps only the nodes in `keep` (which must contain every kept node's parent), in draft
    /// order, with parents renumbered.
    pub fn retain(&mut self, keep: &[bool]) {
        let mut new_index = vec![None; self.len()];
        let mut next = 0;
        for (i, &k) in keep.iter().enumerate().take(self.len()) {
            if k && self.parents[i].is_none_or(|p| new_index[p].is_some()) {
                new_index[i] = Some(next);
                next += 1;
            }
        }
        let old = std::mem::take(self);
        let mut q = old.q.into_iter();
        self.source = old.source;
        for i in 0..old.tokens.len() {
            let qi = q.next().flatten();
            if new_index[i].is_some() {
                self.tokens.push(old.tokens[i]);
                self.parents.push(old.parents[i].and_then(|p| new_index[p]));
                self.confidence.push(old.confidence[i]);
                self.q.push(qi);
            }
        }
    }

    /// Keeps the `n` nodes most likely to be accepted (by path confidence, ties to the
    /// earlier node). Path confidence never grows from parent to child, so the kept set
    /// contains every kept node's parent: it is still a tree.
    pub fn truncate_to_best(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let keep = best_nodes(&self.path_confidence(), n);
        self.retain(&keep);
    }
}

/// Marks the `n` highest values (ties to the lower index).
fn best_nodes(score: &[f32], n: usize) -> Vec<bool> {
    let mut order: Vec<usize> = (0..score.len()).collect();
    order.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    let mut keep = vec![false; score.len()];
    for &i in order.iter().take(n) {
        keep[i] = true;
    }
    keep
}

/// The nodes of `draft` sorted by path confidence, best first: the order adaptive depth adds
/// them in.
pub(crate) fn ranked_path_confidence(draft: &Draft) -> Vec<f32> {
    let mut c = draft.path_confidence();
    c.sort_by(|a, b| b.total_cmp(a));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Draft {
        // root -> 0 (a) -> 1 (b) -> 2 (c);  root -> 3 (x) -> 4 (y)
        let mut d = Draft::empty("test");
        d.push(10, None, 0.9);
        d.push(11, Some(0), 0.8);
        d.push(12, Some(1), 0.5);
        d.push(20, None, 0.3);
        d.push(21, Some(3), 0.9);
        d
    }

    #[test]
    fn shape_queries() {
        let d = tree();
        assert!(!d.is_chain());
        assert!(Draft::chain("c", &[1, 2, 3], 0.5).is_chain());
        assert_eq!(d.depths(), vec![1, 2, 3, 1, 2]);
        assert_eq!(d.children(None).collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(d.children(Some(0)).collect::<Vec<_>>(), vec![1]);
        let p = d.path_confidence();
        assert!((p[2] - 0.9 * 0.8 * 0.5).abs() < 1e-6);
        assert!((p[4] - 0.27).abs() < 1e-6);
    }

    #[test]
    fn truncating_keeps_a_tree() {
        let mut d = tree();
        d.truncate_to_best(3); // 0.9, 0.72, 0.36 -> nodes 0, 1, 2
        assert_eq!(d.tokens, vec![10, 11, 12]);
        assert!(d.is_chain());
        let mut d = tree();
        d.truncate_to_best(4); // + node 3 (0.3)
        assert_eq!(d.tokens, vec![10, 11, 12, 20]);
        assert_eq!(d.parents, vec![None, Some(0), Some(1), None]);
        let mut d = tree();
        d.retain(&[true, false, true, true, true]); // node 2 loses its parent: dropped too
        assert_eq!(d.tokens, vec![10, 20, 21]);
        assert_eq!(d.parents, vec![None, None, Some(1)]);
    }
}
