//! What one generation counted and timed, and totals over many.

/// What one drafter contributed to a generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrafterStats {
    pub name: &'static str,
    /// Steps that verified a draft of this drafter.
    pub steps: usize,
    pub drafted: usize,
    pub accepted: usize,
    pub draft_seconds: f64,
}

/// Counters and timings of one generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub prompt_tokens: usize,
    /// Leading prompt tokens whose cache entries the previous generation left (not computed
    /// again; [`crate::generate_cached`]).
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    /// Forward passes of the target after prefill.
    pub target_forwards: usize,
    pub drafted: usize,
    pub accepted: usize,
    pub prefill_seconds: f64,
    /// Decoding, without `calibration_seconds`.
    pub decode_seconds: f64,
    /// Timing the target behind a long context for adaptive depth (once per cost model).
    pub calibration_seconds: f64,
    /// Per drafter (one entry per drafter that proposed; `auto` lists the ones it chose).
    pub drafters: Vec<DrafterStats>,
    /// Token masks a constraint computed (one per picked or verified position).
    pub masks: usize,
    /// Time spent computing those masks (in `prefill_seconds` and `decode_seconds`).
    pub mask_seconds: f64,
}

impl Stats {
    /// Generated tokens per second of decoding (prefill excluded).
    pub fn tokens_per_second(&self) -> f64 {
        if self.decode_seconds > 0.0 {
            self.generated_tokens as f64 / self.decode_seconds
        } else {
            0.0
        }
    }

    /// Fraction of drafted tokens that were accepted.
    pub fn acceptance_rate(&self) -> f64 {
        ratio(self.accepted, self.drafted)
    }

    /// Tokens emitted per target forward (1 for plain decoding).
    pub fn tokens_per_forward(&self) -> f64 {
        ratio(self.generated_tokens, self.target_forwards)
    }

    /// Accepted draft tokens per step that verified a draft.
    pub fn mean_accepted_length(&self) -> f64 {
        let steps: usize = self.drafters.iter().map(|d| d.steps).sum();
        ratio(self.accepted, steps)
    }

    /// Mean time of one constraint mask (0 without a constraint).
    pub fn mean_mask_seconds(&self) -> f64 {
        if self.masks > 0 {
            self.mask_seconds / self.masks as f64
        } else {
            0.0
        }
    }

    /// Adds another generation's counts and timings (totals over a benchmark suite).
    pub fn add(&mut self, other: &Stats) {
        self.prompt_tokens += other.prompt_tokens;
        self.generated_tokens += other.generated_tokens;
        self.target_forwards += other.target_forwards;
        self.drafted += other.drafted;
        self.accepted += other.accepted;
        self.prefill_seconds += other.prefill_seconds;
        self.decode_seconds += other.decode_seconds;
        self.calibration_seconds += other.calibration_seconds;
        self.masks += other.masks;
        self.mask_seconds += other.mask_seconds;
        for d in &other.drafters {
            let total = self.drafter(d.name);
            total.steps += d.steps;
            total.drafted += d.drafted;
            total.accepted += d.accepted;
            total.draft_seconds += d.draft_seconds;
        }
    }

    pub(crate) fn drafter(&mut self, name: &'static str) -> &mut DrafterStats {
        if let Some(i) = self.drafters.iter().position(|d| d.name == name) {
            return &mut self.drafters[i];
        }
        self.drafters.push(DrafterStats {
            name,
            ..DrafterStats::default()
        });
        self.drafters.last_mut().expect("just pushed")
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_add_sums_counts_and_merges_drafters_by_name() {
        let one = |name, drafted, accepted| Stats {
            generated_tokens: 10,
            target_forwards: 4,
            drafted,
            accepted,
            decode_seconds: 1.0,
            drafters: vec![DrafterStats {
                name,
                steps: 3,
                drafted,
                accepted,
                draft_seconds: 0.5,
            }],
            ..Stats::default()
        };
        let mut total = Stats::default();
        total.add(&one("suffix", 6, 4));
        total.add(&one("model", 5, 1));
        total.add(&one("suffix", 2, 2));
        assert_eq!((total.generated_tokens, total.target_forwards), (30, 12));
        assert_eq!((total.drafted, total.accepted), (13, 7));
        assert_eq!(total.drafters.len(), 2);
        let suffix = &total.drafters[0];
        assert_eq!(
            (suffix.name, suffix.steps, suffix.drafted, suffix.accepted),
            ("suffix", 6, 8, 6)
        );
        assert_eq!(total.tokens_per_second(), 10.0);
        assert!((total.mean_accepted_length() - 7.0 / 9.0).abs() < 1e-12);
    }
}
