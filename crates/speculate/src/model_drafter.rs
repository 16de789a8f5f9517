//! A small model of the target's family drafts autoregressively on its own KV cache.

use runahead_model::{Batch, LanguageModel, ModelError};

use crate::draft::Draft;
use crate::drafter::{DraftRequest, Drafter, LocalFuture};
use crate::sampling::{Distribution, Sampler, SamplingParams, Scores};

/// Longest block fed to the draft model at once when it catches up with the context.
const CATCH_UP_CHUNK: usize = 256;

/// Drafts with a second model (e.g. Qwen2.5-Coder-0.5B for the 1.5B). The draft model keeps
/// its own cache; before each proposal it is cut back to the longest prefix it shares with
/// the context (so rejected draft tokens never linger) and fed what it has not seen. Check the
/// tokenizers with `Tokenizer::check_draft_compatible` before pairing two models.
pub struct ModelDrafter<M> {
    model: M,
    /// The tokens whose entries are in the draft model's cache, in order.
    cached: Vec<u32>,
    /// The draft's own draws when the target samples (seeded from the target's seed).
    sampler: Option<Sampler>,
    /// Drafting stops after a token the draft model itself gives less than this probability.
    pub min_confidence: f32,
}

impl<M: LanguageModel> ModelDrafter<M> {
    pub fn new(model: M) -> Self {
        ModelDrafter {
            model,
            cached: Vec::new(),
            sampler: None,
            min_confidence: 0.3,
        }
    }

    pub fn model(&self) -> &M {
        &self.model
    }

    /// Tokens in the draft model's cache (for tests of rollback).
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }

    fn sampler(&mut self, params: &SamplingParams) -> Result<&mut Sampler, ModelError> {
        let stale = self.sampler.as_ref().is_none_or(|s| {
            let p = &s.params;
            (p.temperature, p.top_k, p.top_p) != (params.temperature, params.top_k, params.top_p)
        });
        if stale {
            let draft_params = SamplingParams {
                seed: params.seed ^ 0x9e37_79b9_7f4a_7c15,
                ..params.clone()
            };
            let s = Sampler::new(draft_params).map_err(|e| ModelError::Config(e.to_string()))?;
            self.sampler = Some(s);
        }
        Ok(self.sampler.as_mut().expect("set above"))
    }

    /// Brings the cache to `tokens`, reusing the prefix it already holds. With `draft_from`
    /// sampling parameters the last token is always fed again, and the scores of the last block
    /// fed (what drafting with those parameters needs) are returned.
    async fn catch_up(
        &mut self,
        tokens: &[u32],
        draft_from: Option<&SamplingParams>,
    ) -> Result<Option<Scores>, ModelError> {
        let keep_last = draft_from.is_some();
        let shared = self
            .cached
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len().saturating_sub(usize::from(keep_last)));
        self.model.truncate(shared);
        // A sliding-window ring that no longer holds what `shared` needs empties the cache.
        let shared = self.model.cache_len();
        self.cached.truncate(shared);
        let rest = &tokens[shared..];
        let last_chunk = rest.len().div_ceil(CATCH_UP_CHUNK).saturating_sub(1);
        let mut scores = None;
        for (i, chunk) in rest.chunks(CATCH_UP_CHUNK).enumerate() {
            let batch = Batch::causal(chunk, self.model.cache_len());
            match draft_from {
                // Drafting starts from the last token's scores only.
                Some(params) if i == last_chunk => {
                    scores = Some(self.scores(&batch.logits_for_last(1), params).await?);
                }
                // Only the cache entries matter: no logits at all.
                _ => {
                    self.model.forward_argmax(&batch.logits_for_last(0)).await?;
                }
            }
            self.cached.extend_from_slice(chunk);
        }
        Ok(scores)
    }

    /// Runs `batch`, reading back what drafting with `params` needs of it: greedy drafting
    /// only the best token and the row's normalizer (its probability is the draft's
    /// confidence), sampling what [`Scores::forward`] reads for them.
    async fn scores(
        &mut self,
        batch: &Batch,
        params: &SamplingParams,
    ) -> Result<Scores, ModelError> {
        if params.is_greedy() {
            Ok(Scores::Top(self.model.forward_top_k(batch, 1).await?))
        } else {
            Scores::forward(&mut self.model, batch, params).await
        }
    }

    async fn draft(&mut self, request: DraftRequest<'_>) -> Result<Draft, ModelError> {
        let context = request.context;
        let mut draft = Draft::empty("model");
        let capacity = self.model.capacity();
        if context.is_empty() || context.len() >= capacity {
            return Ok(draft);
        }
        let max_nodes = request.max_nodes.min(capacity - context.len());
        // Roll back to the shared prefix (rejected draft tokens never linger) and feed the rest,
        // at least the last token.
        let Some(mut scores) = self.catch_up(context, Some(request.sampling)).await? else {
            return Ok(draft);
        };
        for i in 0..max_nodes {
            let row = scores.n_rows() - 1;
            let (token, confidence, q) = if request.sampling.is_greedy() {
                // No usable logit: nothing to draft from.
                let Some((token, p)) = scores.best(row) else {
                    break;
                };
                (token, p, None)
            } else {
                let q: Distribution = scores
                    .distribution(row, request.sampling)
                    .map_err(|e| ModelError::Config(e.to_string()))?;
                let token = q.pick(self.sampler(request.sampling)?.uniform());
                (token, q.probs[token as usize], Some(q))
            };
            draft.push(token, i.checked_sub(1), confidence.max(1e-3));
            *draft.q.last_mut().expect("just pushed") = q;
            if i + 1 == max_nodes || confidence < self.min_confidence {
                break;
            }
            let start = self.model.cache_len();
            scores = self
                .scores(&Batch::causal(&[token], start), request.sampling)
                .await?;
            self.cached.push(token);
        }
        Ok(draft)
    }
}

impl<M: LanguageModel> Drafter for ModelDrafter<M> {
    fn name(&self) -> &'static str {
        "model"
    }

    fn propose<'a>(
        &'a mut self,
        request: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        Box::pin(self.draft(request))
    }

    fn prefill<'a>(&'a mut self, prompt: &'a [u32]) -> LocalFuture<'a, Result<(), ModelError>> {
        Box::pin(async move {
            if !prompt.is_empty() && prompt.len() < self.model.capacity() {
                self.catch_up(prompt, None).await?;
            }
            Ok(())
        })
    }

    fn runs_a_model(&self) -> bool {
        true
    }
}
