//! The generation loop: prefill, then one token per target forward (plain decoding).

use std::ops::ControlFlow;

use runahead_model::{Batch, LanguageModel, ModelError};
use web_time::Instant;

use crate::sampling::{Sampler, SamplingError, SamplingParams};

/// Longest block the prefill sends in one forward (bounds activation memory).
const PREFILL_CHUNK: usize = 256;

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

/// Generates up to `opts.max_tokens` tokens after `prompt` (the model's cache must be empty or
/// hold a prefix the caller manages). `is_end` marks tokens that end the text (they are kept
/// in the output); `on_token` sees each token as it is accepted and may cancel.
pub async fn generate<M: LanguageModel>(
    model: &mut M,
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
    stats.prefill_seconds = start.elapsed().as_secs_f64();

    let start = Instant::now();
    loop {
        out.tokens.push(next);
        out.provenance.push(Provenance::Target);
        if on_token(next, Provenance::Target).is_break() {
            out.stop = StopReason::Cancelled;
            break;
        }
        if is_end(next) {
            out.stop = StopReason::EndOfText;
            break;
        }
        if out.tokens.len() >= opts.max_tokens {
            out.stop = StopReason::MaxTokens;
            break;
        }
        let pos = model.cache_len();
        if pos >= context {
            out.stop = StopReason::ContextFull;
            break;
        }
        let batch = Batch::causal(&[next], pos);
        stats.target_forwards += 1;
        next = if sampler.params.is_greedy() {
            model.forward_argmax(&batch).await?[0]
        } else {
            let logits = model.forward(&batch).await?;
            sampler.sample(logits.row(0))?
        };
    }
    stats.decode_seconds = start.elapsed().as_secs_f64();
    stats.generated_tokens = out.tokens.len();
    out.stats = stats;
    Ok(out)
}
