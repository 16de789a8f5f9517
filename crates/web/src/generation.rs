//! The one place that uses the decoding crate (`runahead-speculate`): it keeps the engine's
//! drafters, picks one by name, chooses the verification depth and runs the generation loop,
//! turning tokens into UTF-8-safe text pieces as they are verified. When that crate's drafter
//! interface changes, this file is what adapts.

use std::ops::ControlFlow;

use runahead_model::{LanguageModel, Tokenizer};
use runahead_speculate::{
    calibrate, decode_history, encode_history, generate_text_constrained, generation_json,
    AutoDrafter, Constraint, Depth, Drafter, GenerateOptions, HistoryError, KvTokens, NgramDrafter,
    Piece, SamplingParams, StopStrings, SuffixDrafter,
};
use serde_json::Value;

use crate::error::{Code, WebError};
use crate::options::{self, DepthOption, DEFAULT_HISTORY_TOKENS};

/// Drafter names `generate` accepts (`model` only once a draft model is loaded).
pub const DRAFTERS: &[&str] = &["none", "ngram", "suffix", "model", "auto"];

/// An engine's drafters, kept across generations so that what they learn carries over from one
/// `generate` to the next: the suffix drafter's global index of earlier outputs (a page that
/// asks about the same document again drafts from its earlier answers), the n-gram drafter's
/// acceptance per match length, and auto's running estimates. Also what adaptive depth learned:
/// the target's verification cost (calibrated once) and how far each drafter can be trusted.
/// And which tokens the model's KV cache holds, so a follow-up prompt that starts with the last
/// conversation computes only what is new.
///
/// There is one suffix drafter: `draft: "suffix"` is the one `auto` holds, so one index of
/// earlier outputs serves both (and is what a page persists). Likewise the draft model, when
/// one is loaded: `draft: "model"` drafts with the one `auto` holds, so one KV cache of the
/// draft model serves both and keeps what it shares with the next prompt.
pub struct Drafters {
    ngram: NgramDrafter,
    auto: AutoDrafter,
    /// Adaptive depth's state: calibrated by the first generation that speculates with
    /// `depth: "auto"`, refined by each one after.
    adaptive: Option<Depth>,
    /// The tokens the model's cache holds after the last generation.
    kv: KvTokens,
}

impl Default for Drafters {
    fn default() -> Self {
        Drafters::new(DEFAULT_HISTORY_TOKENS)
    }
}

impl Drafters {
    /// Drafters whose suffix indices keep up to `history_tokens` tokens of earlier outputs.
    pub fn new(history_tokens: usize) -> Self {
        Drafters {
            ngram: NgramDrafter::default(),
            auto: AutoDrafter::new(SuffixDrafter::new(history_tokens), None),
            adaptive: None,
            kv: KvTokens::default(),
        }
    }

    /// Every generation's output reaches the suffix index, whichever drafter ran (the suffix
    /// drafter, alone or inside auto, indexes its own generations when they finish), so what a
    /// page persists and what the suffix drafter finds next time is every earlier answer.
    fn remember(&mut self, used: &str, output: &[u32]) {
        if !matches!(used, "suffix" | "auto") {
            self.auto.suffix_mut().add_history(output);
        }
    }

    /// The earlier outputs as a record for the model whose tokenizer has `fingerprint`.
    pub fn export_history(&self, fingerprint: u64) -> Vec<u8> {
        encode_history(fingerprint, self.auto.suffix().history())
    }

    /// Adds the outputs of a record [`Drafters::export_history`] wrote (for this tokenizer)
    /// to the suffix index; returns how many. Nothing is added from a record that fails.
    pub fn import_history(
        &mut self,
        record: &[u8],
        fingerprint: u64,
        vocab: usize,
    ) -> Result<usize, HistoryError> {
        let sequences = decode_history(record, fingerprint, vocab)?;
        let suffix = self.auto.suffix_mut();
        for seq in &sequences {
            suffix.add_history(seq);
        }
        Ok(sequences.len())
    }

    /// Forgets every earlier output.
    pub fn clear_history(&mut self) {
        self.auto.suffix_mut().clear_history();
    }

    /// Gives the drafters a draft model (`draft: "model"`, and `auto` weighs it against the
    /// suffix lookup), replacing any earlier one.
    pub fn set_draft_model(&mut self, model: Box<dyn Drafter>) {
        self.auto.set_model(Some(model));
    }

    /// Refuses a drafter that is not there: an unknown name, or `model` without a draft
    /// model (checked before the model is touched).
    fn check_available(&self, name: &str) -> Result<(), WebError> {
        check_drafter(name)?;
        if name == "model" && !self.auto.has_model() {
            return Err(WebError::new(
                Code::InvalidOption,
                "draft: 'model' needs a draft model: load one with the target \
                 (Runahead.load(target, { draft: source }))",
            ));
        }
        Ok(())
    }

    /// The drafter called `name`; `None` is plain decoding.
    fn get(&mut self, name: &str) -> Result<Option<&mut dyn Drafter>, WebError> {
        self.check_available(name)?;
        Ok(match name {
            "ngram" => Some(&mut self.ngram),
            "suffix" => Some(self.auto.suffix_mut()),
            "model" => self.auto.model_mut().map(|m| m as &mut dyn Drafter),
            "auto" => Some(&mut self.auto),
            _ => None,
        })
    }

    /// The depth policy `opts` asks for; `"auto"` calibrates `model` the first time.
    async fn depth<M: LanguageModel>(
        &mut self,
        opts: &options::GenerateOptions,
        model: &mut M,
    ) -> Result<Depth, WebError> {
        match &opts.depth {
            _ if opts.draft == "none" => Ok(Depth::default()),
            DepthOption::Fixed(n) => Ok(Depth::Fixed(*n)),
            DepthOption::Named(_) => {
                if let Some(depth) = &self.adaptive {
                    return Ok(depth.clone());
                }
                let depth = Depth::adaptive(calibrate(model, 3).await?);
                Ok(self.adaptive.insert(depth).clone())
            }
        }
    }
}

fn check_drafter(name: &str) -> Result<(), WebError> {
    if DRAFTERS.contains(&name) {
        return Ok(());
    }
    Err(WebError::new(
        Code::InvalidOption,
        format!(
            "draft: unknown drafter '{name}' (available: {})",
            DRAFTERS.join(", ")
        ),
    ))
}

/// Checks what can be checked before the model is touched.
pub fn validate(opts: &options::GenerateOptions) -> Result<(), WebError> {
    sampling(opts).validate()?;
    opts.logit_options()?;
    check_drafter(&opts.draft)?;
    stop_strings(opts)?;
    match &opts.depth {
        DepthOption::Fixed(n) if *n >= 1 => Ok(()),
        DepthOption::Named(name) if name == "auto" => Ok(()),
        other => Err(WebError::new(
            Code::InvalidOption,
            format!("depth: expected \"auto\" or a number of draft tokens >= 1, got {other}"),
        )),
    }
}

fn stop_strings(opts: &options::GenerateOptions) -> Result<StopStrings, WebError> {
    Ok(StopStrings::new(opts.stop.clone())?)
}

fn sampling(opts: &options::GenerateOptions) -> SamplingParams {
    SamplingParams {
        temperature: opts.temperature,
        top_k: opts.top_k,
        top_p: opts.top_p,
        seed: opts.seed,
    }
}

/// Generates after `prompt` and returns what `runahead generate --json` prints: `{tokens, text,
/// stats, provenance}`, with `stats.backend` set to `backend`. `on_piece(text, token,
/// from_draft)` sees each verified token with the text it releases (end tokens, bytes of an
/// unfinished character and text that could start a stop string give ""; the token is `None`
/// for a last piece of held-back text, see [`runahead_speculate::Piece`]), and stops the
/// generation by returning `Break`.
#[cfg(test)]
pub async fn run<M: LanguageModel>(
    model: &mut M,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &options::GenerateOptions,
    drafters: &mut Drafters,
    backend: &str,
    mut on_piece: impl FnMut(&str, Option<u32>, bool) -> ControlFlow<()>,
) -> Result<Value, WebError> {
    let unconstrained = None::<&mut dyn Constraint>;
    run_constrained(
        model,
        tokenizer,
        prompt,
        opts,
        unconstrained,
        drafters,
        backend,
        |piece| {
            let from_draft = piece.provenance != runahead_speculate::Provenance::Target;
            on_piece(piece.text, piece.token, from_draft)
        },
    )
    .await
}

/// [`run`] under a constraint (the `grammar` option compiled by the session): every token is
/// picked under its mask, and the tokens it forces are free drafts when a drafter runs
/// (provenance `forced`). `on_piece` sees each [`Piece`] whole: its provenance and, with the
/// `logprobs` option, its log-probability.
#[allow(clippy::too_many_arguments)]
pub async fn run_constrained<M: LanguageModel>(
    model: &mut M,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &options::GenerateOptions,
    constraint: Option<&mut dyn Constraint>,
    drafters: &mut Drafters,
    backend: &str,
    on_piece: impl FnMut(Piece<'_>) -> ControlFlow<()>,
) -> Result<Value, WebError> {
    validate(opts)?;
    drafters.check_available(&opts.draft)?;
    let stop = stop_strings(opts)?;
    let generate_opts = GenerateOptions {
        max_tokens: opts.max_tokens,
        sampling: sampling(opts),
        depth: drafters.depth(opts, model).await?,
        logits: opts.logit_options()?,
        ..GenerateOptions::default()
    };
    // Out while the generation runs: one that fails leaves no record to trust.
    let mut kv = std::mem::take(&mut drafters.kv);
    let drafter = drafters.get(&opts.draft)?;
    let mut result = generate_text_constrained(
        model,
        drafter,
        &mut kv,
        prompt,
        &generate_opts,
        constraint,
        tokenizer,
        &stop,
        on_piece,
    )
    .await?;
    drafters.kv = kv;
    drafters.remember(&opts.draft, &result.tokens);
    // What this generation learned of the device's cost (and its timing behind a long
    // context, done once) and of the drafters serves the next one.
    if matches!(result.depth, Depth::Adaptive(_)) {
        drafters.adaptive = Some(std::mem::take(&mut result.depth));
    }
    Ok(generation_json(&result, tokenizer, backend, &opts.draft))
}

#[cfg(test)]
mod draft_model_tests;

#[cfg(test)]
mod tests;
