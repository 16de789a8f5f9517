//! Suffix-tree drafting in the manner of SuffixDecoding (arXiv 2411.04975): every substring
//! of up to `DEPTH` tokens of the indexed text is a path in a trie whose nodes count how often
//! that substring occurs. The longest suffix of the context that is a path with continuations
//! is the match; from its node the most frequent continuations are expanded best-first into a
//! tree of candidates, each scored by the empirical probability of its path.
//!
//! Two indices: one over the current request (prompt and output, extended token by token as
//! the output grows), one over earlier requests' outputs (bounded in tokens; the oldest
//! sequence is evicted first). The draft comes from whichever gives the better-scored tree.

use std::collections::{BinaryHeap, VecDeque};

use ahash::AHashMap;
use runahead_model::ModelError;

use crate::draft::Draft;
use crate::drafter::{ready, DraftRequest, Drafter, LocalFuture, RatioByLength};

/// Longest substring indexed: pattern plus continuation.
pub const DEPTH: usize = 40;
/// Longest pattern (context suffix) matched.
const MAX_PATTERN: usize = 24;

const ROOT: u32 = 0;
const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    token: u32,
    /// Occurrences of this node's substring in the indexed sequences.
    count: u32,
    parent: u32,
    first_child: u32,
    next_sibling: u32,
}

/// A trie of all substrings of at most [`DEPTH`] tokens of a set of sequences.
///
/// Invariants (checked by `check` in tests):
/// - a node's `count` is the number of (sequence, start) occurrences of its substring;
/// - the counts of a node's children sum to at most its own count (an occurrence may end
///   at the end of its sequence);
/// - every node but the root has `count > 0`: removing a sequence frees what only it used,
///   so inserting and then removing a sequence leaves the trie as it was;
/// - `children[(node, token)]` holds exactly the linked child list of each node.
#[derive(Clone, Debug)]
pub struct SuffixTrie {
    nodes: Vec<Node>,
    children: AHashMap<(u32, u32), u32>,
    free: Vec<u32>,
}

impl Default for SuffixTrie {
    fn default() -> Self {
        SuffixTrie {
            nodes: vec![Node {
                token: NONE,
                count: 0,
                parent: NONE,
                first_child: NONE,
                next_sibling: NONE,
            }],
            children: AHashMap::new(),
            free: Vec::new(),
        }
    }
}

impl SuffixTrie {
    /// Nodes in use (the root included).
    pub fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 1
    }

    fn child(&self, node: u32, token: u32) -> Option<u32> {
        self.children.get(&(node, token)).copied()
    }

    /// The child of `node` for `token`, created if missing; its count is incremented.
    fn bump_child(&mut self, node: u32, token: u32) -> u32 {
        let id = match self.child(node, token) {
            Some(c) => c,
            None => {
                let fresh = Node {
                    token,
                    count: 0,
                    parent: node,
                    first_child: NONE,
                    next_sibling: self.nodes[node as usize].first_child,
                };
                let id = match self.free.pop() {
                    Some(id) => {
                        self.nodes[id as usize] = fresh;
                        id
                    }
                    None => {
                        self.nodes.push(fresh);
                        (self.nodes.len() - 1) as u32
                    }
                };
                self.nodes[node as usize].first_child = id;
                self.children.insert((node, token), id);
                id
            }
        };
        self.nodes[id as usize].count += 1;
        id
    }

    /// Indexes every substring of `seq` of at most [`DEPTH`] tokens.
    pub fn insert(&mut self, seq: &[u32]) {
        for start in 0..seq.len() {
            let mut node = ROOT;
            for &t in &seq[start..(start + DEPTH).min(seq.len())] {
                node = self.bump_child(node, t);
            }
        }
    }

    /// Undoes [`SuffixTrie::insert`] of the same sequence.
    pub fn remove(&mut self, seq: &[u32]) {
        for start in 0..seq.len() {
            let end = (start + DEPTH).min(seq.len());
            let mut path = Vec::with_capacity(end - start);
            let mut node = ROOT;
            for &t in &seq[start..end] {
                match self.child(node, t) {
                    Some(c) => {
                        path.push(c);
                        node = c;
                    }
                    None => break, // not indexed: nothing to undo below here
                }
            }
            // Deepest first, so a freed node never has live children.
            for &n in path.iter().rev() {
                let count = &mut self.nodes[n as usize].count;
                *count -= 1;
                if *count == 0 {
                    self.unlink(n);
                }
            }
        }
    }

    fn unlink(&mut self, n: u32) {
        let Node {
            token,
            parent,
            next_sibling,
            ..
        } = self.nodes[n as usize];
        self.children.remove(&(parent, token));
        let first = &mut self.nodes[parent as usize].first_child;
        if *first == n {
            *first = next_sibling;
        } else {
            let mut s = *first;
            while self.nodes[s as usize].next_sibling != n {
                s = self.nodes[s as usize].next_sibling;
            }
            self.nodes[s as usize].next_sibling = next_sibling;
        }
        self.free.push(n);
    }

    fn child_list(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let mut c = self.nodes[node as usize].first_child;
        std::iter::from_fn(move || {
            (c != NONE).then(|| {
                let here = c;
                c = self.nodes[c as usize].next_sibling;
                here
            })
        })
    }

    /// The node of the longest suffix of `context` (at most `MAX_PATTERN` tokens) that is in
    /// the trie and has continuations, with the suffix's length.
    fn longest_match(&self, context: &[u32]) -> Option<(u32, usize)> {
        let longest = context.len().min(MAX_PATTERN);
        (1..=longest).rev().find_map(|len| {
            let mut node = ROOT;
            for &t in &context[context.len() - len..] {
                node = self.child(node, t)?;
            }
            (self.nodes[node as usize].first_child != NONE).then_some((node, len))
        })
    }

    /// Best-first expansion below the match: each candidate's confidence is
    /// `count(child) / sum(count(children))`, its score the product along its path. Stops at
    /// `max_nodes` nodes, at `max_depth`, at the trie's depth, or below `min_score`.
    fn expand(
        &self,
        node: u32,
        matched: usize,
        max_nodes: usize,
        max_depth: usize,
        min_score: f32,
    ) -> Draft {
        #[derive(PartialEq)]
        struct Candidate {
            score: f32,
            node: u32,
            parent: Option<usize>,
            depth: usize,
            confidence: f32,
        }
        impl Eq for Candidate {}
        impl PartialOrd for Candidate {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Candidate {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                // Highest score first; ties to the lower node id, for determinism.
                self.score
                    .total_cmp(&other.score)
                    .then(other.node.cmp(&self.node))
            }
        }
        let max_depth = max_depth.min(DEPTH - matched);
        let mut draft = Draft::empty("suffix");
        let mut heap = BinaryHeap::new();
        let push_children = |heap: &mut BinaryHeap<Candidate>,
                             of: u32,
                             parent: Option<usize>,
                             score: f32,
                             depth: usize| {
            if depth >= max_depth {
                return;
            }
            let total: u32 = self
                .child_list(of)
                .map(|c| self.nodes[c as usize].count)
                .sum();
            for c in self.child_list(of) {
                let confidence = self.nodes[c as usize].count as f32 / total as f32;
                heap.push(Candidate {
                    score: score * confidence,
                    node: c,
                    parent,
                    depth: depth + 1,
                    confidence,
                });
            }
        };
        push_children(&mut heap, node, None, 1.0, 0);
        while let Some(c) = heap.pop() {
            if draft.len() >= max_nodes || c.score < min_score {
                break;
            }
            draft.push(self.nodes[c.node as usize].token, c.parent, c.confidence);
            let index = draft.len() - 1;
            push_children(&mut heap, c.node, Some(index), c.score, c.depth);
        }
        draft
    }

    #[cfg(test)]
    fn check(&self) {
        for (i, n) in self.nodes.iter().enumerate() {
            if i == 0 || self.free.contains(&(i as u32)) {
                continue;
            }
            assert!(n.count > 0, "live node {i} has count 0");
            assert_eq!(self.child(n.parent, n.token), Some(i as u32));
        }
        for i in 0..self.nodes.len() as u32 {
            if self.free.contains(&i) {
                continue;
            }
            let kids: Vec<u32> = self.child_list(i).collect();
            let sum: u32 = kids.iter().map(|&c| self.nodes[c as usize].count).sum();
            if i != ROOT {
                assert!(
                    sum <= self.nodes[i as usize].count,
                    "children outnumber node {i}"
                );
            }
            for &c in &kids {
                assert_eq!(self.nodes[c as usize].parent, i);
            }
        }
        let linked: usize = (0..self.nodes.len() as u32)
            .filter(|i| !self.free.contains(i))
            .map(|i| self.child_list(i).count())
            .sum();
        assert_eq!(linked, self.children.len());
    }

    /// Every (substring, count), sorted: a canonical form for comparing tries.
    #[cfg(test)]
    fn dump(&self) -> Vec<(Vec<u32>, u32)> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, Vec::new())];
        while let Some((n, path)) = stack.pop() {
            for c in self.child_list(n) {
                let mut p = path.clone();
                p.push(self.nodes[c as usize].token);
                out.push((p.clone(), self.nodes[c as usize].count));
                stack.push((c, p));
            }
        }
        out.sort();
        out
    }
}

/// The request-local index, extended one token at a time: `open[d]` is the node of the
/// substring of the last `d + 1` tokens, so appending a token bumps one child of each.
#[derive(Clone, Debug, Default)]
struct RequestIndex {
    trie: SuffixTrie,
    seq: Vec<u32>,
    open: VecDeque<u32>,
}

impl RequestIndex {
    fn push(&mut self, t: u32) {
        self.seq.push(t);
        let mut next = VecDeque::with_capacity(DEPTH);
        next.push_back(self.trie.bump_child(ROOT, t));
        for &n in self.open.iter().take(DEPTH - 1) {
            next.push_back(self.trie.bump_child(n, t));
        }
        self.open = next;
    }

    /// Brings the index up to `context`: extends it when the context grew, rebuilds it when the
    /// context is a different sequence (a new request).
    fn sync(&mut self, context: &[u32]) {
        if !context.starts_with(&self.seq) {
            *self = RequestIndex::default();
        }
        for &t in &context[self.seq.len()..] {
            self.push(t);
        }
    }
}

/// Earlier requests' outputs, at most `max_tokens` tokens in all; oldest evicted first.
#[derive(Clone, Debug, Default)]
struct GlobalIndex {
    trie: SuffixTrie,
    sequences: VecDeque<Vec<u32>>,
    tokens: usize,
    max_tokens: usize,
}

impl GlobalIndex {
    fn add(&mut self, seq: &[u32]) {
        let seq = &seq[seq.len().saturating_sub(self.max_tokens)..];
        if seq.is_empty() {
            return;
        }
        while self.tokens + seq.len() > self.max_tokens {
            let Some(old) = self.sequences.pop_front() else {
                break;
            };
            self.trie.remove(&old);
            self.tokens -= old.len();
        }
        self.trie.insert(seq);
        self.tokens += seq.len();
        self.sequences.push_back(seq.to_vec());
    }
}

/// The suffix-tree drafter; see the module docs.
#[derive(Clone, Debug)]
pub struct SuffixDrafter {
    request: RequestIndex,
    global: GlobalIndex,
    /// Draft depth allowed per matched token (SuffixDecoding's match-length factor): short,
    /// likely-accidental matches propose short drafts.
    pub depth_per_match: f32,
    /// Candidates whose path probability falls below this are not proposed.
    pub min_score: f32,
    /// How well the trie's frequencies have predicted acceptance, per match length: after a
    /// match of one common token a continuation seen once says little (its frequency is 1/1),
    /// after a match of twelve it says a lot. A node's length is the draft's match plus the
    /// nodes above it: a draft that has followed the output for six tokens is as likely to go
    /// on as a match of seven (copying runs on, so acceptance rises down a chain, where one
    /// factor for the whole draft had it fall geometrically). Accepted over expected per level
    /// the verification reached, expected from the unscaled frequencies (comparing with the
    /// scaled ones would converge to the root of the true factor).
    trust: RatioByLength,
    /// Match length of the last draft, for [`Drafter::observe`].
    last: Option<usize>,
}

impl Default for SuffixDrafter {
    fn default() -> Self {
        SuffixDrafter::new(1 << 16)
    }
}

impl SuffixDrafter {
    /// A drafter whose global index keeps up to `global_tokens` tokens of earlier outputs.
    pub fn new(global_tokens: usize) -> Self {
        SuffixDrafter {
            request: RequestIndex::default(),
            global: GlobalIndex {
                max_tokens: global_tokens,
                ..GlobalIndex::default()
            },
            depth_per_match: 2.0,
            min_score: 0.02,
            trust: RatioByLength::new(16, (1.0, 1.0), 0.9),
            last: None,
        }
    }

    /// Tokens held by the global index.
    pub fn global_tokens(&self) -> usize {
        self.global.tokens
    }

    /// Earlier outputs the global index holds, oldest first (what a page persists: see
    /// [`crate::encode_history`]).
    pub fn history(&self) -> impl Iterator<Item = &[u32]> {
        self.global.sequences.iter().map(|s| s.as_slice())
    }

    /// Indexes an earlier output as if a generation had just produced it (the oldest are
    /// evicted past the global index's bound).
    pub fn add_history(&mut self, output: &[u32]) {
        self.global.add(output);
    }

    /// Forgets every earlier output (the current request's index is rebuilt as it goes).
    pub fn clear_history(&mut self) {
        let max_tokens = self.global.max_tokens;
        self.global = GlobalIndex {
            max_tokens,
            ..GlobalIndex::default()
        };
    }

    /// The draft for `context`: the better-scored of the request and global candidates, each
    /// node's frequency scaled by the trust earned at its own match length (the draft's match
    /// plus the nodes above it: see [`SuffixDrafter::trust`]).
    pub fn draft(&mut self, context: &[u32], max_nodes: usize) -> Draft {
        self.request.sync(context);
        let mut best = Draft::empty("suffix");
        let mut best_score = 0.0f32;
        self.last = None;
        for trie in [&self.request.trie, &self.global.trie] {
            if let Some((node, matched)) = trie.longest_match(context) {
                let depth = ((matched as f32 * self.depth_per_match).ceil() as usize).max(1);
                let mut d = trie.expand(node, matched, max_nodes, depth, self.min_score);
                let depths = d.depths();
                for (c, depth) in d.confidence.iter_mut().zip(depths) {
                    *c *= self.factor(matched, depth);
                }
                let score: f32 = d.path_confidence().iter().sum();
                if score > best_score {
                    best = d;
                    best_score = score;
                    self.last = Some(matched);
                }
            }
        }
        best
    }

    /// What a node's frequency is scaled by, `depth` below a match of `matched` tokens: the
    /// trust earned at its match length, discounted, never inflated.
    fn factor(&self, matched: usize, depth: usize) -> f32 {
        self.trust.ratio(matched + depth - 1).clamp(0.05, 1.0)
    }
}

impl Drafter for SuffixDrafter {
    fn name(&self) -> &'static str {
        "suffix"
    }

    fn propose<'a>(
        &'a mut self,
        request: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        ready(Ok(self.draft(request.context, request.max_nodes)))
    }

    fn observe(&mut self, draft: &Draft, path: &[usize]) {
        let Some(matched) = self.last.take() else {
            return;
        };
        // Each level the verification reached, judged on its own: the children of the last
        // accepted node (the root's at first) at their match length, accepted or not against
        // the frequencies' own estimate (the factor undone). Levels below the first rejection
        // were never judged.
        let depths = draft.depths();
        for level in 0..=path.len() {
            let parent = level.checked_sub(1).map(|l| path[l]);
            let expected: f32 = draft
                .children(parent)
                .map(|c| draft.confidence[c] / self.factor(matched, depths[c]))
                .sum();
            if expected == 0.0 {
                break;
            }
            let accepted = if level < path.len() { 1.0 } else { 0.0 };
            self.trust.add(matched + level, accepted, expected);
        }
    }

    fn finish(&mut self, prompt_len: usize, context: &[u32]) {
        self.global.add(&context[prompt_len.min(context.len())..]);
    }
}

#[cfg(test)]
mod tests;
