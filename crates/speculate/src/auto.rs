//! `auto`: per step, the suffix-tree lookup or the draft model, whichever promises more tokens
//! per second.

use runahead_model::ModelError;
use web_time::Instant;

use crate::cost::CostCurve;
use crate::depth::running_average;
use crate::draft::Draft;
use crate::drafter::{ready, DraftRequest, Drafter, LocalFuture};
use crate::suffix::SuffixDrafter;

/// The draft model's acceptance assumed before any of its drafts was judged.
const MODEL_ALPHA_PRIOR: f64 = 0.7;

/// Combines the free suffix lookup with an optional draft model. The lookup always runs; its
/// tree's expected accepted length (from its path probabilities) is weighed against the draft
/// model's, estimated from the model's running acceptance and its measured drafting time, both
/// over the target's measured verification cost. Input-grounded text (long matches) goes to the
/// lookup; open text, where lookups find little, goes to the model.
pub struct AutoDrafter {
    suffix: SuffixDrafter,
    model: Option<Box<dyn Drafter>>,
    /// Running acceptance of the model's drafted tokens.
    model_alpha: f64,
    /// Seconds per token the model takes to draft (running average).
    model_seconds_per_token: f64,
}

impl AutoDrafter {
    /// The suffix drafter it holds: a front end can draft with it alone, and read or restore
    /// its history of earlier outputs.
    pub fn suffix(&self) -> &SuffixDrafter {
        &self.suffix
    }

    /// See [`AutoDrafter::suffix`].
    pub fn suffix_mut(&mut self) -> &mut SuffixDrafter {
        &mut self.suffix
    }

    /// The draft model it holds, if any: a front end can draft with it alone (one model, one
    /// KV cache, whichever drafter runs it).
    pub fn model_mut(&mut self) -> Option<&mut (dyn Drafter + 'static)> {
        self.model.as_deref_mut()
    }

    /// Whether it holds a draft model.
    pub fn has_model(&self) -> bool {
        self.model.is_some()
    }

    /// Gives it a draft model (or takes it away); what it learned of the previous one's
    /// acceptance and speed starts over.
    pub fn set_model(&mut self, model: Option<Box<dyn Drafter>>) {
        self.model = model;
        self.model_alpha = MODEL_ALPHA_PRIOR;
        self.model_seconds_per_token = 0.0;
    }

    pub fn new(suffix: SuffixDrafter, model: Option<Box<dyn Drafter>>) -> Self {
        AutoDrafter {
            suffix,
            model,
            model_alpha: MODEL_ALPHA_PRIOR,
            model_seconds_per_token: 0.0,
        }
    }

    /// Expected tokens per unit of cost of the model drafting `k` tokens, and the best `k`.
    fn model_rate(&self, cost: &CostCurve, max: usize) -> (f64, usize) {
        let (mut expected, mut p) = (1.0, 1.0);
        let mut best = (0.0, 1);
        for k in 1..=max {
            p *= self.model_alpha;
            expected += p;
            let rate = expected / (cost.seconds(k + 1) + self.model_seconds_per_token * k as f64);
            if rate > best.0 {
                best = (rate, k);
            }
        }
        best
    }

    async fn choose(&mut self, request: DraftRequest<'_>) -> Result<Draft, ModelError> {
        let lookup = self.suffix.draft(request.context, request.max_nodes);
        let flat = CostCurve::flat();
        let cost = request.cost.unwrap_or(&flat);
        let expected: f32 = lookup.path_confidence().iter().sum();
        let lookup_rate = (1.0 + expected as f64) / cost.seconds(lookup.len() + 1);
        let (model_rate, k) = self.model_rate(cost, request.max_nodes);
        let Some(model) = self.model.as_mut() else {
            return Ok(lookup);
        };
        if !lookup.is_empty() && lookup_rate >= model_rate {
            return Ok(lookup);
        }
        let start = Instant::now();
        let draft = model
            .propose(DraftRequest {
                max_nodes: k,
                ..request
            })
            .await?;
        if !draft.is_empty() {
            let per = start.elapsed().as_secs_f64() / draft.len() as f64;
            self.model_seconds_per_token = running_average(self.model_seconds_per_token, per);
        }
        Ok(draft)
    }
}

impl Drafter for AutoDrafter {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn propose<'a>(
        &'a mut self,
        request: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        Box::pin(self.choose(request))
    }

    fn prefill<'a>(&'a mut self, prompt: &'a [u32]) -> LocalFuture<'a, Result<(), ModelError>> {
        match self.model.as_mut() {
            Some(m) => m.prefill(prompt),
            None => ready(Ok(())),
        }
    }

    fn observe(&mut self, draft: &Draft, path: &[usize]) {
        if draft.source == "model" {
            let judged = path.len() + usize::from(path.len() < draft.len());
            let rate = path.len() as f64 / judged.max(1) as f64;
            self.model_alpha = (0.8 * self.model_alpha + 0.2 * rate).clamp(0.02, 0.98);
            if let Some(m) = self.model.as_mut() {
                m.observe(draft, path);
            }
        } else {
            self.suffix.observe(draft, path);
        }
    }

    fn finish(&mut self, prompt_len: usize, context: &[u32]) {
        self.suffix.finish(prompt_len, context);
        if let Some(m) = self.model.as_mut() {
            m.finish(prompt_len, context);
        }
    }
}
