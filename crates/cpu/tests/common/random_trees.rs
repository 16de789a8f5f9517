//! A drafter of random trees, rejected almost always: every step verifies a tree and compacts
//! the cache, which is what the engines' compaction tests need.

use runahead_model::testing::TestRng;
use runahead_model::ModelError;
use runahead_speculate::{ready, Draft, DraftRequest, Drafter, LocalFuture};

/// Trees of up to seven random nodes (`.1`: the vocabulary size), half of them repeating the
/// context's last token.
pub struct RandomTrees(pub TestRng, pub usize);

impl Drafter for RandomTrees {
    fn name(&self) -> &'static str {
        "random"
    }
    fn propose<'a>(
        &'a mut self,
        r: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        let mut d = Draft::empty("random");
        let last = r.context.last().copied().unwrap_or(0);
        for i in 0..r.max_nodes.min(7) {
            let parent = (i > 0 && !self.0.next_u64().is_multiple_of(3))
                .then(|| (self.0.next_u64() % i as u64) as usize);
            let t = if self.0.next_u64().is_multiple_of(2) {
                last
            } else {
                (self.0.next_u64() % self.1 as u64) as u32
            };
            d.push(t, parent, 0.5);
        }
        ready(Ok(d))
    }
}
