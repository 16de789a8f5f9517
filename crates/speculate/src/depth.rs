//! Adaptive depth: how many draft nodes to verify at each step.
//!
//! A step that verifies `n` draft nodes costs one target forward over `n + 1` rows and emits
//! `1 + (accepted nodes)` tokens. With the forward's cost measured on the device
//! ([`CostModel`], calibrated when a model loads and refined online) and each node's chance of
//! being accepted (the drafter's confidence, corrected by how well its confidences have
//! matched reality), the controller keeps the `n` best nodes that maximize expected tokens per
//! second. `n = 0` (plain decoding) is always a candidate, so speculation switches itself off
//! where it does not pay.

use std::collections::HashMap;

use runahead_model::{Batch, LanguageModel, ModelError};
use web_time::Instant;

use crate::draft::{ranked_path_confidence, Draft};
use crate::generate::MAX_DRAFT;

/// Seconds one target forward takes for a block of `rows` rows, `rows` in `1..=MAX_DRAFT + 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// `seconds[rows - 1]`.
    seconds: Vec<f64>,
}

impl CostModel {
    /// Every block size costs the same (an idealized wide GPU).
    pub fn flat() -> Self {
        CostModel {
            seconds: vec![1.0; MAX_DRAFT + 1],
        }
    }

    /// Cost growing linearly with the rows: `1 + per_row * (rows - 1)` (relative units).
    pub fn linear(per_row: f64) -> Self {
        CostModel {
            seconds: (0..=MAX_DRAFT).map(|r| 1.0 + per_row * r as f64).collect(),
        }
    }

    /// From measured `(rows, seconds)` samples: linear interpolation between them, constant
    /// extrapolation below the first and linear above the last, and made non-decreasing.
    pub fn from_samples(samples: &[(usize, f64)]) -> Self {
        let mut s: Vec<(usize, f64)> = samples
            .iter()
            .copied()
            .filter(|&(r, t)| r >= 1 && t.is_finite() && t > 0.0)
            .collect();
        s.sort_by_key(|&(r, _)| r);
        if s.is_empty() {
            return CostModel::flat();
        }
        let at = |rows: usize| -> f64 {
            let i = s.partition_point(|&(r, _)| r <= rows);
            if i == 0 {
                return s[0].1;
            }
            let (r0, t0) = s[i - 1];
            let (r1, t1) = if i < s.len() {
                s[i]
            } else if i >= 2 {
                s[i - 2]
            } else {
                return t0;
            };
            if r1 == r0 {
                return t0;
            }
            t0 + (t1 - t0) * (rows as f64 - r0 as f64) / (r1 as f64 - r0 as f64)
        };
        let mut seconds: Vec<f64> = (1..=MAX_DRAFT + 1).map(at).collect();
        for i in 1..seconds.len() {
            seconds[i] = seconds[i].max(seconds[i - 1]);
        }
        CostModel { seconds }
    }

    pub fn seconds(&self, rows: usize) -> f64 {
        self.seconds[rows.clamp(1, self.seconds.len()) - 1]
    }

    /// Folds in one measured forward (exponential moving average, so the model follows the
    /// device's actual state: thermal throttling, a busy tab).
    pub fn observe(&mut self, rows: usize, seconds: f64) {
        if !(seconds.is_finite() && seconds > 0.0) || rows == 0 || rows > self.seconds.len() {
            return;
        }
        let s = &mut self.seconds[rows - 1];
        *s = 0.8 * *s + 0.2 * seconds;
    }

    /// Cost relative to one row, for reports.
    pub fn ratios(&self) -> Vec<f64> {
        self.seconds.iter().map(|s| s / self.seconds[0]).collect()
    }
}

/// Cache entries in front of the timed blocks: verification runs behind a prompt, not on an
/// empty cache.
const CALIBRATION_CONTEXT: usize = 64;

/// Measures the target's forward time for blocks of 1, 2, 4, 8 and 16 rows behind a short
/// context (each the median of `repeats` runs, after a warm-up), and leaves the cache empty.
pub async fn calibrate<M: LanguageModel>(
    model: &mut M,
    repeats: usize,
) -> Result<CostModel, ModelError> {
    let vocab = model.config().vocab_size.max(1) as u32;
    let capacity = model.capacity();
    let base = CALIBRATION_CONTEXT.min(capacity.saturating_sub(17));
    let tokens: Vec<u32> = (0..base as u32 + 16)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    model.truncate(0);
    if base > 0 {
        model
            .forward_argmax(&Batch::causal(&tokens[..base], 0))
            .await?;
    }
    let mut samples = Vec::new();
    for &rows in [1usize, 2, 4, 8, 16]
        .iter()
        .filter(|&&r| base + r <= capacity)
    {
        let block = Batch::causal(&tokens[base..base + rows], base);
        // Warm-up (first use of a block size may compile or allocate).
        model.forward_argmax(&block).await?;
        model.truncate(base);
        let mut times = Vec::with_capacity(repeats.max(1));
        for _ in 0..repeats.max(1) {
            let start = Instant::now();
            model.forward_argmax(&block).await?;
            times.push(start.elapsed().as_secs_f64());
            model.truncate(base);
        }
        times.sort_by(f64::total_cmp);
        samples.push((rows, times[times.len() / 2]));
    }
    model.truncate(0);
    Ok(CostModel::from_samples(&samples))
}

/// Exponential moving average of a time that is 0 until first measured.
pub(crate) fn running_average(average: f64, sample: f64) -> f64 {
    if average == 0.0 {
        sample
    } else {
        0.8 * average + 0.2 * sample
    }
}

/// How deep to speculate.
#[derive(Clone, Debug, PartialEq)]
pub enum Depth {
    /// Verify every node the drafter proposes, up to this many.
    Fixed(usize),
    /// Choose per step from the measured costs and the running acceptance.
    Adaptive(CostModel),
}

impl Default for Depth {
    fn default() -> Self {
        Depth::Fixed(8)
    }
}

/// Running agreement between a drafter's confidences and what was accepted.
#[derive(Clone, Debug)]
struct Calibration {
    accepted: f64,
    expected: f64,
    /// Seconds of drafting per proposed node (draft models).
    draft_seconds_per_node: f64,
    /// Steps skipped in a row because drafting was not worth it.
    skipped: usize,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            accepted: 1.0,
            expected: 1.0,
            draft_seconds_per_node: 0.0,
            skipped: 0,
        }
    }
}

impl Calibration {
    fn scale(&self) -> f64 {
        (self.accepted / self.expected).clamp(0.25, 4.0)
    }
}

/// A step's choice: verify the `keep` best nodes, expecting `expected` of them accepted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub keep: usize,
    pub expected: f64,
}

/// What one step's outcome tells the controller.
#[derive(Clone, Copy, Debug)]
pub struct StepRecord {
    pub source: &'static str,
    /// Expected accepted nodes, from [`DepthController::plan`].
    pub expected: f64,
    pub accepted: usize,
    /// Nodes proposed, in `draft_seconds` of drafting.
    pub proposed: usize,
    pub draft_seconds: f64,
    /// Rows of the verification forward and its measured time.
    pub verify_rows: usize,
    pub verify_seconds: f64,
}

/// Chooses each step's draft size; see the module docs.
#[derive(Clone, Debug)]
pub struct DepthController {
    depth: Depth,
    by_source: HashMap<&'static str, Calibration>,
}

/// A model drafter that was not worth running is retried after this many steps, so that it
/// can win back its place when the text changes.
const RETRY_AFTER: usize = 16;

/// Speculating must promise at least this much over plain decoding: timings are noisy, and a
/// wrong bet costs more than a missed one.
const MIN_GAIN: f64 = 1.1;

impl DepthController {
    pub fn new(depth: Depth) -> Self {
        DepthController {
            depth,
            by_source: HashMap::new(),
        }
    }

    pub fn cost(&self) -> Option<&CostModel> {
        match &self.depth {
            Depth::Adaptive(c) => Some(c),
            Depth::Fixed(_) => None,
        }
    }

    /// Most nodes to ask the drafter for. Model-free drafters are asked for everything (the
    /// lookup is free; [`DepthController::plan`] decides); a model drafter is asked for the
    /// depth that maximizes expected tokens per second given its running acceptance `alpha`.
    pub fn budget(
        &mut self,
        source: &'static str,
        runs_a_model: bool,
        alpha: f64,
        max: usize,
    ) -> usize {
        let cost = match &self.depth {
            Depth::Fixed(n) => return (*n).min(max),
            Depth::Adaptive(c) => c,
        };
        if !runs_a_model {
            return max;
        }
        let cal = self.by_source.entry(source).or_default();
        let per_node = cal.draft_seconds_per_node;
        let alpha = (alpha * cal.scale()).clamp(0.0, 0.99);
        let mut best = (MIN_GAIN / cost.seconds(1), 0);
        let mut expected = 1.0;
        let mut p = 1.0;
        for k in 1..=max {
            p *= alpha;
            expected += p;
            let rate = expected / (cost.seconds(k + 1) + per_node * k as f64);
            if rate > best.0 * 1.0001 {
                best = (rate, k);
            }
        }
        if best.1 == 0 {
            cal.skipped += 1;
            if cal.skipped >= RETRY_AFTER {
                cal.skipped = 0;
                return 2.min(max);
            }
        } else {
            cal.skipped = 0;
        }
        best.1
    }

    /// How many of `draft`'s best nodes to verify (by path confidence, as
    /// [`Draft::truncate_to_best`] keeps them), and how many of those the drafter's own
    /// confidences expect to be accepted (uncalibrated: what [`DepthController::record`]
    /// compares the outcome with).
    pub fn plan(&self, draft: &Draft) -> Plan {
        let ranked = ranked_path_confidence(draft);
        let keep = match &self.depth {
            Depth::Fixed(n) => (*n).min(ranked.len()),
            Depth::Adaptive(cost) => {
                let scale = self
                    .by_source
                    .get(draft.source)
                    .map_or(1.0, Calibration::scale);
                let mut best = (MIN_GAIN / cost.seconds(1), 0);
                let mut expected = 1.0;
                for (n, &c) in ranked.iter().enumerate() {
                    expected += (c as f64 * scale).min(1.0);
                    let rate = expected / cost.seconds(n + 2);
                    if rate > best.0 * 1.0001 {
                        best = (rate, n + 1);
                    }
                }
                best.1
            }
        };
        Plan {
            keep,
            expected: ranked[..keep].iter().map(|&c| c as f64).sum(),
        }
    }

    /// Records a verified step.
    pub fn record(&mut self, step: StepRecord) {
        let StepRecord {
            source,
            expected,
            accepted,
            proposed,
            draft_seconds,
            verify_rows,
            verify_seconds,
        } = step;
        let cal = self.by_source.entry(source).or_default();
        if expected > 0.0 {
            cal.accepted = 0.9 * cal.accepted + accepted as f64;
            cal.expected = 0.9 * cal.expected + expected;
        }
        if proposed > 0 && draft_seconds > 0.0 {
            let per = draft_seconds / proposed as f64;
            cal.draft_seconds_per_node = running_average(cal.draft_seconds_per_node, per);
        }
        if let Depth::Adaptive(cost) = &mut self.depth {
            cost.observe(verify_rows, verify_seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_model_interpolates_and_is_monotone() {
        let c = CostModel::from_samples(&[(1, 1.0), (4, 1.6), (16, 4.0), (8, 1.5)]);
        assert_eq!(c.seconds(1), 1.0);
        assert!((c.seconds(2) - 1.2).abs() < 1e-9);
        assert!(c.seconds(8) >= c.seconds(4), "made non-decreasing");
        assert!((c.seconds(12) - 2.75).abs() < 1e-9);
        assert_eq!(CostModel::from_samples(&[]), CostModel::flat());
    }

    fn step(
        source: &'static str,
        expected: f64,
        accepted: usize,
        proposed: usize,
        draft_seconds: f64,
    ) -> StepRecord {
        StepRecord {
            source,
            expected,
            accepted,
            proposed,
            draft_seconds,
            verify_rows: 1,
            verify_seconds: 1.0,
        }
    }

    /// Applies the controller's plan to `draft`; returns its expected accepted nodes.
    fn prune(c: &DepthController, draft: &mut Draft) -> f64 {
        let plan = c.plan(draft);
        draft.truncate_to_best(plan.keep);
        plan.expected
    }

    fn chain(conf: f32, n: usize) -> Draft {
        Draft::chain("test", &vec![1; n], conf)
    }

    #[test]
    fn cheap_verification_keeps_long_drafts_and_expensive_keeps_none() {
        let flat = DepthController::new(Depth::Adaptive(CostModel::linear(0.02)));
        let mut d = chain(0.9, 12);
        prune(&flat, &mut d);
        assert!(
            d.len() >= 8,
            "near-free verification: keep most of a confident draft ({})",
            d.len()
        );
        let mut d = chain(0.3, 12);
        prune(&flat, &mut d);
        assert!(
            (1..=3).contains(&d.len()),
            "an unlikely draft stays short ({})",
            d.len()
        );

        // Cost linear in the rows (a CPU): a node must be near certain to pay for itself.
        let cpu = DepthController::new(Depth::Adaptive(CostModel::linear(1.0)));
        let mut d = chain(0.6, 12);
        prune(&cpu, &mut d);
        assert!(d.is_empty(), "speculation switches off when it cannot pay");
        let fixed = DepthController::new(Depth::Fixed(5));
        let mut d = chain(0.01, 12);
        prune(&fixed, &mut d);
        assert_eq!(d.len(), 5);
    }

    #[test]
    fn calibration_discounts_an_overconfident_drafter() {
        let mut c = DepthController::new(Depth::Adaptive(CostModel::linear(0.3)));
        let mut d = chain(0.9, 10);
        let before = prune(&c, &mut d.clone());
        for _ in 0..40 {
            c.record(step("test", 5.0, 0, 10, 0.0));
        }
        let after = prune(&c, &mut d);
        assert!(after < before / 2.0, "{after} vs {before}");
    }

    #[test]
    fn plans_report_uncalibrated_expectations() {
        // Calibration must compare outcomes with the drafter's own estimate: an estimate that
        // already includes the correction would make the correction converge to its root.
        let mut c = DepthController::new(Depth::Fixed(3));
        for _ in 0..60 {
            c.record(step("test", 4.0, 1, 4, 0.0));
        }
        assert!((c.by_source["test"].scale() - 0.25).abs() < 0.01);
        let plan = c.plan(&chain(0.5, 5));
        assert_eq!(plan.keep, 3);
        assert!((plan.expected - 0.875).abs() < 1e-6, "{}", plan.expected);
    }

    #[test]
    fn model_budget_follows_acceptance_and_retries() {
        let mut c = DepthController::new(Depth::Adaptive(CostModel::linear(0.05)));
        c.record(step("model", 0.0, 0, 4, 0.04)); // drafting costs 1% of a forward per node
        let high = c.budget("model", true, 0.9, 15);
        let low = c.budget("model", true, 0.3, 15);
        assert!(high > low, "{high} vs {low}");
        // Drafting as expensive as verifying and rarely accepted: skip, but retry now and then.
        c.record(step("model", 0.0, 0, 1, 5.0));
        let budgets: Vec<usize> = (0..RETRY_AFTER)
            .map(|_| c.budget("model", true, 0.05, 15))
            .collect();
        assert_eq!(budgets.iter().filter(|&&b| b == 0).count(), RETRY_AFTER - 1);
        assert_eq!(*budgets.last().unwrap(), 2);
        assert_eq!(
            c.budget("ngram", false, 0.0, 15),
            15,
            "lookups are free: the plan decides"
        );
    }
}
