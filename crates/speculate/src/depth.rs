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

use runahead_model::{LanguageModel, ModelError};

use crate::cost::{calibrate_far, CostCurve, CostModel};
use crate::draft::{ranked_path_confidence, Draft};

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
    Adaptive(Box<Adaptive>),
}

impl Depth {
    /// Adaptive depth over `cost`, with nothing learned yet of the drafters.
    pub fn adaptive(cost: CostModel) -> Self {
        Depth::Adaptive(Box::new(Adaptive {
            cost,
            drafters: HashMap::new(),
        }))
    }
}

/// What adaptive depth knows: the target's verification cost on this device, and how far each
/// drafter's confidences can be trusted. A generation returns it refined
/// ([`crate::Generation::depth`]) so that the next one starts from there, not from scratch.
#[derive(Clone, Debug, PartialEq)]
pub struct Adaptive {
    pub cost: CostModel,
    drafters: HashMap<&'static str, Calibration>,
}

impl Default for Depth {
    fn default() -> Self {
        Depth::Fixed(8)
    }
}

/// Running agreement between a drafter's confidences and what was accepted.
#[derive(Clone, Debug, PartialEq)]
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
    /// Accepted over expected. Allowed down to a tenth: a drafter whose confident drafts keep
    /// failing (a lookup matching boilerplate that the target does not repeat) must lose its
    /// place, not be trusted at a quarter of its word.
    fn scale(&self) -> f64 {
        (self.accepted / self.expected).clamp(0.1, 4.0)
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
    /// Cache entries in front of the verified block.
    pub context: usize,
}

/// Chooses each step's draft size; see the module docs.
#[derive(Clone, Debug)]
pub struct DepthController {
    depth: Depth,
    /// The cost at the current context ([`DepthController::at_context`]; flat when fixed).
    curve: CostCurve,
    by_source: HashMap<&'static str, Calibration>,
}

/// A model drafter that was not worth running is retried after this many steps, so that it
/// can win back its place when the text changes.
const RETRY_AFTER: usize = 16;

/// Timed forwards per block size behind a long context.
const FAR_REPEATS: usize = 3;

/// Speculating must promise at least this much over plain decoding: timings are noisy, and a
/// wrong bet costs more than a missed one.
const MIN_GAIN: f64 = 1.1;

impl DepthController {
    pub fn new(depth: Depth) -> Self {
        let (curve, by_source) = match &depth {
            Depth::Adaptive(a) => (a.cost.at(0), a.drafters.clone()),
            Depth::Fixed(_) => (CostCurve::flat(), HashMap::new()),
        };
        DepthController {
            depth,
            curve,
            by_source,
        }
    }

    /// Completes a cost model calibrated behind a short context the first time the cache is
    /// long (see [`CostModel::wants_far`]); returns the seconds that took (0 when nothing was
    /// timed).
    pub async fn refine<M: LanguageModel>(&mut self, model: &mut M) -> Result<f64, ModelError> {
        match &mut self.depth {
            Depth::Adaptive(a) if a.cost.wants_far(model.cache_len()) => {
                calibrate_far(model, &mut a.cost, FAR_REPEATS).await
            }
            _ => Ok(0.0),
        }
    }

    /// The depth policy with what this controller learned (for the next generation).
    pub fn into_depth(self) -> Depth {
        match self.depth {
            Depth::Adaptive(mut a) => {
                a.drafters = self.by_source;
                Depth::Adaptive(a)
            }
            fixed => fixed,
        }
    }

    /// Prices the next step's verification behind `context` cached entries (attention makes
    /// the extra rows dearer as the context grows).
    pub fn at_context(&mut self, context: usize) {
        if let Depth::Adaptive(a) = &self.depth {
            self.curve = a.cost.at(context);
        }
    }

    /// The verification cost at the current context, when depth is adaptive.
    pub fn cost(&self) -> Option<&CostCurve> {
        match self.depth {
            Depth::Adaptive(_) => Some(&self.curve),
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
            Depth::Adaptive(_) => &self.curve,
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
            Depth::Adaptive(_) => {
                let cost = &self.curve;
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
            context,
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
        if let Depth::Adaptive(a) = &mut self.depth {
            a.cost.observe(verify_rows, context, verify_seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            context: 0,
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
        let flat = DepthController::new(Depth::adaptive(CostModel::linear(0.02)));
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
        let cpu = DepthController::new(Depth::adaptive(CostModel::linear(1.0)));
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
        let mut c = DepthController::new(Depth::adaptive(CostModel::linear(0.3)));
        let mut d = chain(0.9, 10);
        let before = prune(&c, &mut d.clone());
        for _ in 0..40 {
            c.record(step("test", 5.0, 0, 10, 0.0));
        }
        let after = prune(&c, &mut d);
        assert!(after < before / 2.0, "{after} vs {before}");
    }

    #[test]
    fn what_a_generation_learned_carries_over() {
        let mut c = DepthController::new(Depth::adaptive(CostModel::linear(0.3)));
        let d = chain(0.9, 10);
        let fresh = prune(&c, &mut d.clone());
        for _ in 0..40 {
            c.record(step("test", 5.0, 0, 10, 0.0));
        }
        let next = DepthController::new(c.into_depth());
        assert!(prune(&next, &mut d.clone()) < fresh / 2.0);
        assert_eq!(
            DepthController::new(Depth::Fixed(4)).into_depth(),
            Depth::Fixed(4)
        );
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
        let mut c = DepthController::new(Depth::adaptive(CostModel::linear(0.05)));
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
