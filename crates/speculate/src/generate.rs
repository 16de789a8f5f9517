//! The generation loop: prefill, then one token per target forward (plain decoding).

use std::ops::ControlFlow;

use runahead_model::{Batch, LanguageModel};
use web_time::Instant;

use crate::constrained::{pick_after_prefill, Guide};
use crate::constraint::Constraint;
use crate::depth::{Depth, DepthController};
use crate::draft::Draft;
use crate::drafter::Drafter;
use crate::error::GenerateError;
use crate::limits::{MAX_DRAFT, PREFILL_CHUNK};
use crate::logits::{LogitOptions, TokenLogprob};
use crate::sampling::{Sampler, SamplingParams, Scores};
use crate::stats::Stats;
use crate::verify::{verify, Rejection};

mod step;

use step::{keep_path, learn_from_step, propose, Proposal};

/// Where an emitted token came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Sampled from the target's own distribution.
    Target,
    /// Proposed by a drafter and accepted by verification.
    Draft,
    /// The only continuation the grammar allowed, proposed as a draft at no cost and
    /// accepted by verification ([`generate_constrained`]).
    Forced,
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
    /// The text contains a stop string ([`crate::generate_text`]).
    Stop,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndOfText => "end_of_text",
            StopReason::MaxTokens => "max_tokens",
            StopReason::ContextFull => "context_full",
            StopReason::Cancelled => "cancelled",
            StopReason::Stop => "stop",
        }
    }
}

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    /// How many draft nodes each step verifies (ignored without a drafter).
    pub depth: Depth,
    /// Penalties, logit bias and log-probabilities ([`LogitOptions`]; the default does none).
    pub logits: LogitOptions,
    /// Always [`Rejection::Residual`]; the statistical tests swap in a broken rule to show
    /// that they would catch one.
    #[doc(hidden)]
    pub rejection: Rejection,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 128,
            sampling: SamplingParams::default(),
            depth: Depth::default(),
            logits: LogitOptions::default(),
            rejection: Rejection::Residual,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub provenance: Vec<Provenance>,
    pub stop: StopReason,
    pub stats: Stats,
    /// The text, when stop strings cut it ([`crate::generate_text`]); otherwise the tokens
    /// without end tokens decode to it.
    pub text: Option<String>,
    /// The depth policy after this generation, to pass to the next: an adaptive one with its
    /// cost model refined by this generation's forwards (and timed behind a long context if it
    /// reached one) and its drafters' calibration.
    pub depth: Depth,
    /// One per token when [`LogitOptions::logprobs`] asked for them (else empty): the
    /// log-softmax of the row the token was picked from, after the bias, the penalties and a
    /// constraint's mask, at the sampling temperature (1 when greedy), before top-k and top-p.
    pub logprobs: Vec<TokenLogprob>,
}

/// Generates up to `opts.max_tokens` tokens after `prompt` (the model's cache is reset).
/// `is_end` marks tokens that end the text (they are kept in the output); `on_token` sees each
/// token as it is accepted and may cancel.
///
/// With a drafter ([`generate_with`]), each step feeds the target `[next, draft...]` (a chain
/// or a tree) in one forward and keeps the accepted path plus one token from the target, so
/// the output is exactly what plain decoding gives: greedy equals greedy token for token (the
/// engines are batch-invariant), and sampling draws from the target's distribution (see
/// [`crate::walk_sampling`]).
pub async fn generate<M: LanguageModel>(
    model: &mut M,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_end: impl Fn(u32) -> bool,
    on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    generate_with(
        model,
        None::<&mut dyn Drafter>,
        prompt,
        opts,
        is_end,
        on_token,
    )
    .await
}

/// [`generate`] with an optional drafter (speculative decoding). At the end the drafter is
/// told the whole sequence ([`Drafter::finish`]), so drafters that learn across requests can.
pub async fn generate_with<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    drafter: Option<&mut D>,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_end: impl Fn(u32) -> bool,
    on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    let mut fresh = KvTokens::default();
    generate_cached(model, drafter, &mut fresh, prompt, opts, is_end, on_token).await
}

/// The tokens whose entries a model's KV cache holds, in slot order, as the last generation
/// left them: what the next generation on the same model can keep instead of computing again.
///
/// Invariant: only [`generate_cached`] on the one model it describes changes it; anything else
/// that runs that model (another generation without this record, a test's forward) must
/// [`KvTokens::clear`] it, or the next generation would reuse entries of other tokens.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvTokens(Vec<u32>);

impl KvTokens {
    pub fn tokens(&self) -> &[u32] {
        &self.0
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// How many leading tokens of `prompt` the cache already holds, leaving at least the last
    /// one to compute (its logits pick the first new token): none where that is shorter than
    /// the engine truncates to exactly ([`LanguageModel::truncate_floor`]).
    fn reusable(&self, prompt: &[u32], model: &impl LanguageModel) -> usize {
        let common = self
            .0
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let common = common
            .min(model.cache_len())
            .min(prompt.len().saturating_sub(1));
        if common < model.truncate_floor() {
            0
        } else {
            common
        }
    }
}

/// [`generate_with`] that keeps what the model's cache already holds: the longest common
/// prefix of `cached` and `prompt` is not computed again (a chat's follow-up turn prefills only
/// its new messages), and `cached` is left describing the cache for the next call. The output
/// is what a fresh generation gives: the engines are batch-invariant, so an entry does not
/// depend on the block it was computed in.
pub async fn generate_cached<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    drafter: Option<&mut D>,
    cached: &mut KvTokens,
    prompt: &[u32],
    opts: &GenerateOptions,
    is_end: impl Fn(u32) -> bool,
    on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    let unconstrained = None::<&mut dyn Constraint>;
    generate_constrained(
        model,
        drafter,
        cached,
        prompt,
        opts,
        unconstrained,
        is_end,
        on_token,
    )
    .await
}

/// [`generate_cached`] under a constraint (a grammar, a JSON schema): every token picked or
/// verified is picked from the target's distribution with the tokens the constraint forbids
/// removed (greedy: the best allowed token), so the output is what plain constrained decoding
/// gives. Drafts are checked against the constraint before the verification forward (a
/// forbidden token ends its branch), and with a drafter the tokens the constraint forces are
/// proposed as the step's draft ([`Provenance::Forced`]). The constraint sees the generated
/// tokens only (not the prompt).
#[allow(clippy::too_many_arguments)]
pub async fn generate_constrained<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    drafter: Option<&mut D>,
    cached: &mut KvTokens,
    prompt: &[u32],
    opts: &GenerateOptions,
    constraint: Option<&mut dyn Constraint>,
    is_end: impl Fn(u32) -> bool,
    mut on_token: impl FnMut(u32, Provenance) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    generate_reporting(
        model,
        drafter,
        cached,
        prompt,
        opts,
        constraint,
        is_end,
        |token, provenance, _| on_token(token, provenance),
    )
    .await
}

/// [`generate_constrained`] whose `on_token` also sees the token's log-probability when
/// [`LogitOptions::logprobs`] asks for them (the entry [`Generation::logprobs`] ends up
/// holding for it), so a stream can carry each token's with the token.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn generate_reporting<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    mut drafter: Option<&mut D>,
    cached: &mut KvTokens,
    prompt: &[u32],
    opts: &GenerateOptions,
    constraint: Option<&mut dyn Constraint>,
    is_end: impl Fn(u32) -> bool,
    mut on_token: impl FnMut(u32, Provenance, Option<&TokenLogprob>) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    opts.logits.validate(model.config().vocab_size)?;
    // The loop processes whole logit rows when a constraint or the logit options need them.
    let mut guide = match constraint {
        None if !opts.logits.is_active() => None,
        c => Some(Guide::new(c, opts.logits.clone())),
    };
    let mut sampler = Sampler::new(opts.sampling.clone())?;
    let context = check_prompt(prompt, model.capacity())?;
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        ..Stats::default()
    };
    let mut out = Generation {
        tokens: Vec::new(),
        provenance: Vec::new(),
        stop: StopReason::MaxTokens,
        stats: Stats::default(),
        text: None,
        depth: Depth::default(),
        logprobs: Vec::new(),
    };
    if opts.max_tokens == 0 {
        out.stats = stats;
        out.depth = opts.depth.clone();
        return Ok(out);
    }

    let start = Instant::now();
    // Taken out until the end: a generation that fails leaves no record, so the next one
    // computes everything instead of trusting a cache this one left half-written.
    let previous = std::mem::take(cached);
    let reused = previous.reusable(prompt, model);
    stats.cached_tokens = reused;
    let mut next = prefill(model, prompt, reused, &mut sampler, guide.as_mut()).await?;
    if let Some(d) = drafter.as_deref_mut() {
        d.prefill(prompt).await?;
    }
    stats.prefill_seconds = start.elapsed().as_secs_f64();

    // Prompt and output so far: what drafters look at.
    let mut history = prompt.to_vec();
    let mut depth = DepthController::new(opts.depth.clone());
    let start = Instant::now();
    // The guide records a token's log-probability when it picks or verifies it, before the
    // token is emitted: entry i is the i-th emitted token's.
    let mut emit = |t: u32,
                    from: Provenance,
                    guide: &Option<Guide<'_>>,
                    out: &mut Generation,
                    history: &mut Vec<u32>| {
        let logprob = guide
            .as_ref()
            .and_then(|g| g.logprobs.get(out.tokens.len()));
        out.tokens.push(t);
        out.provenance.push(from);
        history.push(t);
        if on_token(t, from, logprob).is_break() {
            Some(StopReason::Cancelled)
        } else if is_end(t) {
            Some(StopReason::EndOfText)
        } else {
            None
        }
    };
    'decode: loop {
        // Emit `next` (not yet in the cache) and the accepted draft tokens queued behind it.
        if let Some(stop) = emit(next, Provenance::Target, &guide, &mut out, &mut history) {
            out.stop = stop;
            break;
        }
        if let Some(g) = guide.as_mut() {
            g.commit(next)?;
        }
        let base = model.cache_len();
        let room = match room_for_draft(opts.max_tokens - out.tokens.len(), base, context) {
            Ok(room) => room,
            Err(stop) => {
                out.stop = stop;
                break;
            }
        };
        if drafter.is_some() {
            stats.calibration_seconds += depth.refine(model).await?;
        }
        depth.at_context(base);
        // With a drafter, what the constraint forces is the step's draft (nothing to ask for).
        let forced = match guide.as_mut() {
            Some(g) if drafter.is_some() && g.has_constraint() => g.forced(room),
            _ => Vec::new(),
        };
        let mut step = match drafter.as_deref_mut() {
            _ if !forced.is_empty() => {
                let mut p = Proposal::none();
                p.draft = Draft::chain(FORCED, &forced, 1.0);
                p
            }
            Some(d) if room > 0 => {
                propose(d, &mut depth, &history, room, &sampler.params, &mut stats).await?
            }
            _ => Proposal::none(),
        };

        let verify_start = Instant::now();
        let verdict = match guide.as_mut() {
            Some(g) => {
                g.check_draft(&mut step.draft, !sampler.params.is_greedy())?;
                g.verify(model, next, &step.draft, &mut sampler, opts.rejection)
                    .await?
            }
            None => verify(model, next, &step.draft, &mut sampler, opts.rejection).await?,
        };
        let verify_seconds = verify_start.elapsed().as_secs_f64();
        stats.target_forwards += 1;
        keep_path(model, base, &step.draft, &verdict.path)?;
        let draft = match drafter.as_deref_mut() {
            _ if step.draft.source == FORCED => {
                let s = stats.drafter(FORCED);
                s.steps += 1;
                s.drafted += step.draft.len();
                s.accepted += verdict.path.len();
                stats.drafted += step.draft.len();
                stats.accepted += verdict.path.len();
                step.draft
            }
            Some(d) => {
                let timing = (verify_seconds, base);
                learn_from_step(d, step, &verdict, timing, &mut stats, &mut depth)
            }
            None => step.draft,
        };

        let from = if draft.source == FORCED {
            Provenance::Forced
        } else {
            Provenance::Draft
        };
        for &node in &verdict.path {
            let t = draft.tokens[node];
            if let Some(stop) = emit(t, from, &guide, &mut out, &mut history) {
                out.stop = stop;
                break 'decode;
            }
        }
        next = verdict.next;
    }
    if let Some(d) = drafter {
        d.finish(prompt.len(), &history);
    }
    *cached = keep_emitted(model, history);
    stats.decode_seconds = start.elapsed().as_secs_f64() - stats.calibration_seconds;
    stats.generated_tokens = out.tokens.len();
    if let Some(g) = guide {
        (stats.masks, stats.mask_seconds) = (g.masks, g.mask_seconds);
        // Picked but not emitted (a cancel or the end mid-step) is dropped.
        out.logprobs = g.logprobs;
        out.logprobs.truncate(out.tokens.len());
    }
    out.stats = stats;
    out.depth = depth.into_depth();
    Ok(out)
}

/// The draft source of the tokens a constraint forces ([`Provenance::Forced`]).
const FORCED: &str = "grammar";

/// Checks that `prompt` is not empty and leaves room in a cache of `context` entries for at
/// least one new token; `context` again.
fn check_prompt(prompt: &[u32], context: usize) -> Result<usize, GenerateError> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if prompt.len() >= context {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            context,
        });
    }
    Ok(context)
}

/// Room for the next step's draft behind `base` cached entries, with `remaining` tokens left
/// to emit: the output budget, the cache, and the engine's block size; or why the generation
/// stops before the step.
fn room_for_draft(remaining: usize, base: usize, context: usize) -> Result<usize, StopReason> {
    if remaining == 0 {
        return Err(StopReason::MaxTokens);
    }
    if base >= context {
        return Err(StopReason::ContextFull);
    }
    Ok((remaining - 1).min(context - base - 1).min(MAX_DRAFT))
}

/// Computes the cache entries of `prompt` past its first `reused` tokens (which the cache
/// holds), in blocks of at most [`PREFILL_CHUNK`], and picks the first new token from the
/// prompt's last row.
async fn prefill<M: LanguageModel>(
    model: &mut M,
    prompt: &[u32],
    reused: usize,
    sampler: &mut Sampler,
    guide: Option<&mut Guide<'_>>,
) -> Result<u32, GenerateError> {
    model.truncate(reused);
    let chunks: Vec<&[u32]> = prompt[reused..].chunks(PREFILL_CHUNK).collect();
    let (last, before) = chunks.split_last().ok_or(GenerateError::EmptyPrompt)?;
    for (i, chunk) in before.iter().enumerate() {
        // Only the cache entries matter: no logits at all.
        let batch = Batch::causal(chunk, reused + i * PREFILL_CHUNK).logits_for_last(0);
        model.forward_argmax(&batch).await?;
    }
    // The next token comes from the prompt's last row only.
    let batch = Batch::causal(last, reused + before.len() * PREFILL_CHUNK).logits_for_last(1);
    if let Some(g) = guide {
        return pick_after_prefill(g, model, &batch, sampler).await;
    }
    let scores = Scores::forward(model, &batch, &sampler.params).await?;
    Ok(sampler.pick(&scores, scores.n_rows() - 1)?)
}

/// The record of what the model's cache holds once a generation ends. The cache holds the
/// emitted tokens but the last (never fed back), and may hold verified draft tokens after a
/// cancel that were never emitted: what matches `history` is kept, the rest truncated.
fn keep_emitted<M: LanguageModel>(model: &mut M, mut history: Vec<u32>) -> KvTokens {
    let kept = model.cache_len().min(history.len());
    model.truncate(kept);
    history.truncate(kept);
    KvTokens(history)
}
