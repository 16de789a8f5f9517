//! One speculative step's parts besides verification: asking the drafter for a draft worth
//! verifying, keeping the accepted path in the cache, and telling the drafter and adaptive
//! depth how the draft fared.

use runahead_model::LanguageModel;
use web_time::Instant;

use crate::depth::{DepthController, StepRecord};
use crate::draft::Draft;
use crate::drafter::{observe_unverified, DraftRequest, Drafter};
use crate::error::GenerateError;
use crate::sampling::SamplingParams;
use crate::stats::Stats;
use crate::verify::Verdict;

/// One step's draft, trimmed to what is worth verifying.
pub(super) struct Proposal {
    pub(super) draft: Draft,
    /// Nodes the drafter proposed (before trimming).
    proposed: usize,
    /// Expected accepted nodes of the trimmed draft.
    expected: f64,
    /// The untrimmed draft when trimming removed everything, to judge it afterwards.
    shadow: Option<Draft>,
    draft_seconds: f64,
}

impl Proposal {
    pub(super) fn none() -> Self {
        Proposal {
            draft: Draft::empty("none"),
            proposed: 0,
            expected: 0.0,
            shadow: None,
            draft_seconds: 0.0,
        }
    }
}

/// Asks the drafter for a draft within the step's room and trims it.
pub(super) async fn propose<D: Drafter + ?Sized>(
    drafter: &mut D,
    depth: &mut DepthController,
    history: &[u32],
    room: usize,
    sampling: &SamplingParams,
    stats: &mut Stats,
) -> Result<Proposal, GenerateError> {
    let alpha = drafter_alpha(stats, drafter.name());
    let budget = depth.budget(drafter.name(), drafter.runs_a_model(), alpha, room);
    if budget == 0 {
        return Ok(Proposal::none());
    }
    let start = Instant::now();
    let mut draft = drafter
        .propose(DraftRequest {
            context: history,
            max_nodes: budget,
            sampling,
            cost: depth.cost(),
        })
        .await?;
    let seconds = start.elapsed().as_secs_f64();
    stats.drafter(draft.source).draft_seconds += seconds;
    draft.truncate_to_best(room);
    let proposed = draft.len();
    let plan = depth.plan(&draft);
    let shadow = if plan.keep == 0 && !draft.is_empty() {
        let empty = Draft::empty(draft.source);
        Some(std::mem::replace(&mut draft, empty))
    } else {
        draft.truncate_to_best(plan.keep);
        None
    };
    Ok(Proposal {
        draft,
        proposed,
        expected: plan.expected,
        shadow,
        draft_seconds: seconds,
    })
}

/// Running acceptance rate of a drafter in this generation (optimistic before any data).
fn drafter_alpha(stats: &Stats, name: &str) -> f64 {
    stats
        .drafters
        .iter()
        .find(|d| d.name == name && d.drafted > 0)
        .map_or(0.7, |d| {
            (d.accepted as f64 + 1.0) / (d.drafted as f64 + 1.0)
        })
}

/// Keeps the root and the accepted path in the KV cache: a truncation when the path is the
/// block's leading chain, a compaction when it runs through a tree.
pub(super) fn keep_path<M: LanguageModel>(
    model: &mut M,
    base: usize,
    draft: &Draft,
    path: &[usize],
) -> Result<(), GenerateError> {
    if path.iter().enumerate().all(|(i, &node)| node == i) {
        model.truncate(base + 1 + path.len());
        return Ok(());
    }
    let keep: Vec<usize> = std::iter::once(0)
        .chain(path.iter().map(|&node| node + 1))
        .collect();
    debug_assert!(keep.windows(2).all(|w| w[0] < w[1]) && keep.len() <= draft.len() + 1);
    model.compact(base, &keep)?;
    Ok(())
}

/// Tells the drafter and adaptive depth how the step's draft fared against `verdict`
/// (`timing`: the verification's seconds and the context it ran behind), counts it in `stats`,
/// and gives the verified draft back.
pub(super) fn learn_from_step<D: Drafter + ?Sized>(
    d: &mut D,
    step: Proposal,
    verdict: &Verdict,
    (verify_seconds, base): (f64, usize),
    stats: &mut Stats,
    depth: &mut DepthController,
) -> Draft {
    let Proposal {
        draft,
        proposed,
        expected,
        shadow,
        draft_seconds,
    } = step;
    let (expected, accepted) = if !draft.is_empty() {
        d.observe(&draft, &verdict.path);
        let s = stats.drafter(draft.source);
        s.steps += 1;
        s.drafted += draft.len();
        s.accepted += verdict.path.len();
        stats.drafted += draft.len();
        stats.accepted += verdict.path.len();
        (expected, verdict.path.len())
    } else if let Some(shadow) = shadow {
        // Not verified, but its first tokens can still be judged.
        observe_unverified(d, shadow, verdict.next)
    } else {
        (0.0, 0)
    };
    depth.record(StepRecord {
        source: draft.source,
        expected,
        accepted,
        proposed,
        draft_seconds,
        verify_rows: draft.len() + 1,
        verify_seconds,
        context: base,
    });
    draft
}
