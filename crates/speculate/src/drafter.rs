//! Drafters propose tokens the target is likely to produce next; the target then verifies a
//! whole draft in one forward pass (see `generate`). A drafter never affects what is output,
//! only how many target forwards it takes.

/// Proposes continuations of the current context.
pub trait Drafter {
    /// Short name for statistics and the CLI (`ngram`, `suffix`, ...).
    fn name(&self) -> &str;

    /// Up to `max` tokens that may follow `context` (the prompt, the output so far, and the
    /// token about to be fed to the target). An empty draft means "no idea": the step falls
    /// back to plain decoding.
    fn propose(&mut self, context: &[u32], max: usize) -> Vec<u32>;

    /// The outcome of the last proposal: `accepted` of its `proposed` tokens matched.
    fn observe(&mut self, proposed: usize, accepted: usize) {
        let _ = (proposed, accepted);
    }
}

/// Prompt lookup: finds the most recent earlier occurrence of the context's last `n` tokens
/// (longest `n` first, from `max_n` down to `min_n`) and proposes the tokens that followed it.
/// Model-free, so it costs nothing on the GPU; it shines when the output repeats the input
/// (summaries, edits, code refactors, quoting).
#[derive(Clone, Debug)]
pub struct NgramDrafter {
    pub min_n: usize,
    pub max_n: usize,
    /// Longest draft proposed (verification cost grows with it; adaptive depth comes later).
    pub max_len: usize,
}

impl Default for NgramDrafter {
    fn default() -> Self {
        NgramDrafter {
            min_n: 1,
            max_n: 4,
            max_len: 8,
        }
    }
}

impl Drafter for NgramDrafter {
    fn name(&self) -> &str {
        "ngram"
    }

    fn propose(&mut self, context: &[u32], max: usize) -> Vec<u32> {
        let len = context.len();
        let max = max.min(self.max_len);
        if max == 0 {
            return Vec::new();
        }
        for n in (self.min_n.max(1)..=self.max_n.min(len.saturating_sub(1))).rev() {
            let pattern = &context[len - n..];
            // Latest start s < len - n whose n tokens equal the pattern and are followed by at
            // least one token.
            if let Some(s) = (0..len - n).rev().find(|&s| &context[s..s + n] == pattern) {
                let from = s + n;
                return context[from..(from + max).min(len)].to_vec();
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposes_what_followed_the_latest_match() {
        let mut d = NgramDrafter::default();
        // ... 1 2 3 [4 5 6] ... 1 2 3  -> propose 4 5 6
        assert_eq!(
            d.propose(&[9, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3], 3),
            vec![4, 5, 6]
        );
        // The latest occurrence wins.
        assert_eq!(d.propose(&[1, 2, 8, 1, 2, 9, 1, 2], 1), vec![9]);
        // Longest n first: the 2-gram (5, 1) matches at its first place, not the later 1-gram.
        assert_eq!(d.propose(&[5, 1, 7, 1, 3, 5, 1], 2), vec![7, 1]);
        // Draft stops at the end of the context.
        assert_eq!(d.propose(&[1, 2, 1], 5), vec![2, 1]);
        assert!(d.propose(&[1, 2, 3], 4).is_empty(), "no repeat, no draft");
        assert!(d.propose(&[], 4).is_empty());
        assert!(d.propose(&[1, 1], 0).is_empty());
    }
}
