//! Generation as text: [`generate_cached`] with the tokens decoded as they are verified and
//! stop strings applied, so every front end (the CLI, the browser) streams the same pieces and
//! stops at the same token.

use std::ops::ControlFlow;

use runahead_model::{LanguageModel, Tokenizer};

use crate::constraint::Constraint;
use crate::drafter::Drafter;
use crate::error::GenerateError;
use crate::generate::{
    generate_reporting, GenerateOptions, Generation, KvTokens, Provenance, StopReason,
};
use crate::logits::TokenLogprob;
use crate::stop::{StopMatcher, StopStrings};

/// One piece of streamed text.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    /// Text this token releases: "" for end tokens, bytes of an unfinished character and text
    /// held back because it could start a stop string (released with a later token).
    pub text: &'a str,
    /// The verified token; `None` for the one last piece that releases held-back text after
    /// the last token (a generation that ended for the context or a cancel mid stop string).
    pub token: Option<u32>,
    pub provenance: Provenance,
    /// The token's log-probability when the options ask for them (the entry
    /// [`Generation::logprobs`] holds for it); `None` otherwise and for held-back text.
    pub logprob: Option<&'a TokenLogprob>,
}

/// [`generate_cached`] that decodes as it goes and ends at the first of `stop` the text
/// contains ([`StopReason::Stop`]; the token that completed it is the last of `tokens`). With
/// stop strings, [`Generation::text`] is the text before the stop string: exactly what the
/// pieces spelled. `on_piece` may cancel by returning `Break`.
#[allow(clippy::too_many_arguments)]
pub async fn generate_text<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    drafter: Option<&mut D>,
    cached: &mut KvTokens,
    prompt: &[u32],
    opts: &GenerateOptions,
    tokenizer: &Tokenizer,
    stop: &StopStrings,
    on_piece: impl FnMut(Piece<'_>) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    let unconstrained = None::<&mut dyn Constraint>;
    generate_text_constrained(
        model,
        drafter,
        cached,
        prompt,
        opts,
        unconstrained,
        tokenizer,
        stop,
        on_piece,
    )
    .await
}

/// [`generate_text`] under a constraint ([`crate::generate_constrained`]).
#[allow(clippy::too_many_arguments)]
pub async fn generate_text_constrained<M: LanguageModel, D: Drafter + ?Sized>(
    model: &mut M,
    drafter: Option<&mut D>,
    cached: &mut KvTokens,
    prompt: &[u32],
    opts: &GenerateOptions,
    constraint: Option<&mut dyn Constraint>,
    tokenizer: &Tokenizer,
    stop: &StopStrings,
    mut on_piece: impl FnMut(Piece<'_>) -> ControlFlow<()>,
) -> Result<Generation, GenerateError> {
    let mut decoder = tokenizer.decoder();
    let mut matcher = StopMatcher::new(stop);
    let (mut stopped, mut cancelled, mut seen) = (false, false, 0);
    let mut generation = generate_reporting(
        model,
        drafter,
        cached,
        prompt,
        opts,
        constraint,
        |t| tokenizer.is_end(t),
        |token, provenance, logprob| {
            seen += 1;
            let end = tokenizer.is_end(token);
            let piece = if end {
                String::new()
            } else {
                decoder.push(token)
            };
            let mut released = matcher.push(&piece);
            stopped = released.stopped;
            // The loop ends after this token: nothing may stay held back.
            if !stopped && (end || seen == opts.max_tokens) {
                released.text.push_str(&matcher.flush());
            }
            let flow = on_piece(Piece {
                text: &released.text,
                token: Some(token),
                provenance,
                logprob,
            });
            cancelled = flow.is_break();
            if stopped {
                ControlFlow::Break(())
            } else {
                flow
            }
        },
    )
    .await?;
    if stopped {
        generation.stop = StopReason::Stop;
    } else {
        let rest = matcher.flush();
        if !rest.is_empty() && !cancelled {
            let _ = on_piece(Piece {
                text: &rest,
                token: None,
                provenance: Provenance::Target,
                logprob: None,
            });
        }
    }
    if !stop.is_empty() {
        generation.text = Some(matcher.into_text());
    }
    Ok(generation)
}
