//! The generation loop: prefill, then one token per target forward (plain decoding).

use std::ops::ControlFlow;

use runahead_model::{Batch, LanguageModel, ModelError};
use web_time::Instant;

use crate::drafter::Drafter;
use crate::sampling::{Sampler, SamplingError, SamplingParams};

/// Longest block the prefill sends in one forward (bounds activation memory).
const PREFILL_CHUNK: usize = 256;

/// Longest draft verified in one forward.
pub const MAX_DRAFT: usize = 15;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but the context holds {context}: shorten it or raise the context size")]
    PromptTooLong { prompt: usize, context: usize },
}

/// Where an emitted token came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Sampled from the target's own distribution.
    Target,
    /// Proposed by a drafter and accepted by verification.
    Draft,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model emitted its end-of-sequence or end-of-turn token.
    EndOfText,
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
    /// The token callback asked to stop.
    Cancelled,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndOfText => "end_of_text",
            StopReason::MaxTokens => "max_tokens",
            StopReason::ContextFull => "context_full",
            StopReason::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: SamplingParams,
}

/// Counters and timings of one generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// Forward passes of the target after prefill.
    pub target_forwards: usize,
    pub drafted: usize,
    pub accepted: usize,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
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
}

#[derive(Clone, Debug)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub provenance: Vec<Provenance>,
    pub stop: StopReason,
    pub stats: Stats,
}

/// Generates up to `opts.max_tokens` tokens after `prompt` (the model's cache is reset).
/// `is_end` marks tokens that end the text (they are kept in the output); `on_token` sees each
/// token as it is accepted and may cancel.
///
/// With a drafter, each step feeds the target `[next, d1..dk]` in one forward and keeps the
/// longest verified prefix of the draft plus one token from the target, so the output is
/// exactly what plain decoding gives: greedy equals greedy token for token (the engines are
/// batch-invariant), and sampling draws from the target's distribution (a deterministic draft
/// token `d` is accepted with probability `p(d)`; on rejection the token is drawn from `p` with
/// `d` removed, renormalized).
pub async fn generate<M: LanguageModel>(
    model: &mut M,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_end: impl Fn(u32) -> bool,
    on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    generate_with(model, None, prompt, opts, is_end, on_token).await
}

/// [`generate`] with an optional drafter (speculative decoding).
pub async fn generate_with<M: LanguageModel>(
    model: &mut M,
    mut drafter: Option<&mut dyn Drafter>,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_end: impl Fn(u32) -> bool,
    mut on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    let mut sampler = Sampler::new(opts.sampling.clone())?;
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    let context = model.capacity();
    if prompt.len() >= context {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            context,
        });
    }
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        ..Stats::default()
    };
    let mut out = Generation {
        tokens: Vec::new(),
        provenance: Vec::new(),
        stop: StopReason::MaxTokens,
        stats: Stats::default(),
    };
    if opts.max_tokens == 0 {
        out.stats = stats;
        return Ok(out);
    }

    let start = Instant::now();
    model.truncate(0);
    let mut logits = None;
    for (i, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
        let l = model
            .forward(&Batch::causal(chunk, i * PREFILL_CHUNK))
            .await?;
        logits = Some(l);
    }
    let logits = logits.ok_or(GenerateError::EmptyPrompt)?;
    let mut next = sampler.sample(logits.row(logits.n_rows() - 1))?;
    let mut next_from = Provenance::Target;
    stats.prefill_seconds = start.elapsed().as_secs_f64();

    // Prompt and output so far: what drafters look at.
    let mut history = prompt.to_vec();
    let start = Instant::now();
    'decode: loop {
        // Emit `next` (not yet in the cache) and the accepted draft tokens queued behind it.
        out.tokens.push(next);
        out.provenance.push(next_from);
        history.push(next);
        if on_token(next, next_from).is_break() {
            out.stop = StopReason::Cancelled;
            break;
        }
        if is_end(next) {
            out.stop = StopReason::EndOfText;
            break;
        }
        let remaining = opts.max_tokens - out.tokens.len();
        if remaining == 0 {
            out.stop = StopReason::MaxTokens;
            break;
        }
        let base = model.cache_len();
        if base >= context {
            out.stop = StopReason::ContextFull;
            break;
        }
        // Room for the draft: the output budget, the cache, and the engine's block size.
        let max_draft = (remaining - 1).min(context - base - 1).min(MAX_DRAFT);
        let draft = match drafter.as_deref_mut() {
            Some(d) if max_draft > 0 => d.propose(&history, max_draft),
            _ => Vec::new(),
        };
        let mut block = Vec::with_capacity(draft.len() + 1);
        block.push(next);
        block.extend_from_slice(&draft);
        let batch = Batch::causal(&block, base);
        stats.target_forwards += 1;
        stats.drafted += draft.len();

        // Verify: row i is the target's distribution after block[..=i].
        let (accepted, correction) = if sampler.params.is_greedy() {
            let ids = model.forward_argmax(&batch).await?;
            let a = draft.iter().zip(&ids).take_while(|(d, t)| d == t).count();
            (a, ids[a])
        } else {
            let logits = model.forward(&batch).await?;
            let mut a = 0;
            let mut correction = None;
            for (i, &d) in draft.iter().enumerate() {
                let dist = sampler.distribution(logits.row(i))?;
                if sampler.uniform() < dist.probs[d as usize] as f64 {
                    a += 1;
                } else {
                    correction = Some(dist.without(d).pick(sampler.uniform()));
                    break;
                }
            }
            let correction = match correction {
                Some(t) => t,
                None => sampler.sample(logits.row(a))?,
            };
            (a, correction)
        };
        if let Some(d) = drafter.as_deref_mut() {
            if !draft.is_empty() {
                d.observe(draft.len(), accepted);
            }
        }
        stats.accepted += accepted;
        model.truncate(base + 1 + accepted);
        for &t in &draft[..accepted] {
            out.tokens.push(t);
            out.provenance.push(Provenance::Draft);
            history.push(t);
            if on_token(t, Provenance::Draft).is_break() {
                out.stop = StopReason::Cancelled;
                break 'decode;
            }
            if is_end(t) {
                out.stop = StopReason::EndOfText;
                break 'decode;
            }
        }
        next = correction;
        next_from = Provenance::Target;
    }
    stats.decode_seconds = start.elapsed().as_secs_f64();
    stats.generated_tokens = out.tokens.len();
    out.stats = stats;
    Ok(out)
}
