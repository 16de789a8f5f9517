//! The one place that uses the decoding crate (`runahead-speculate`): it picks a drafter by
//! name and runs the generation loop, turning tokens into UTF-8-safe text pieces as they are
//! verified. When that crate's drafter interface changes, this file is what adapts.

use std::ops::ControlFlow;

use runahead_model::{LanguageModel, Tokenizer};
use runahead_speculate::SamplingParams;
use runahead_speculate::{
    generate_with, AutoDrafter, Drafter, GenerateOptions, NgramDrafter, Provenance, SuffixDrafter,
};
use serde_json::{json, Value};

use crate::error::{Code, WebError};
use crate::options;

/// Drafter names `generate` accepts.
pub const DRAFTERS: &[&str] = &["none", "ngram", "suffix", "auto"];

/// The drafter called `name`; `None` is plain decoding.
fn drafter(name: &str) -> Result<Option<Box<dyn Drafter>>, WebError> {
    match name {
        "none" => Ok(None),
        "ngram" => Ok(Some(Box::new(NgramDrafter::default()))),
        "suffix" => Ok(Some(Box::new(SuffixDrafter::default()))),
        "auto" => Ok(Some(Box::new(AutoDrafter::new(
            SuffixDrafter::default(),
            None,
        )))),
        other => Err(WebError::new(
            Code::InvalidOption,
            format!(
                "draft: unknown drafter '{other}' (available: {})",
                DRAFTERS.join(", ")
            ),
        )),
    }
}

/// Checks what can be checked before the model is touched.
pub fn validate(opts: &options::GenerateOptions) -> Result<(), WebError> {
    sampling(opts).validate()?;
    drafter(&opts.draft)?;
    Ok(())
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
/// stats}`, with `stats.backend` set to `backend`. `on_piece(text, token, from_draft)` sees each
/// verified token with the text it completes (end tokens and bytes of an unfinished character
/// give ""), and stops the generation by returning `Break`.
pub async fn run<M: LanguageModel>(
    model: &mut M,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &options::GenerateOptions,
    backend: &str,
    mut on_piece: impl FnMut(&str, u32, bool) -> ControlFlow<()>,
) -> Result<Value, WebError> {
    validate(opts)?;
    let mut boxed = drafter(&opts.draft)?;
    let drafter = boxed.as_deref_mut();
    let generate_opts = GenerateOptions {
        max_tokens: opts.max_tokens,
        sampling: sampling(opts),
        ..GenerateOptions::default()
    };
    let mut decoder = tokenizer.decoder();
    let result = generate_with(
        model,
        drafter,
        prompt,
        &generate_opts,
        |t| tokenizer.is_end(t),
        |t, from| {
            let piece = if tokenizer.is_end(t) {
                String::new()
            } else {
                decoder.push(t)
            };
            on_piece(&piece, t, from == Provenance::Draft)
        },
    )
    .await?;
    let text_tokens: Vec<u32> = result
        .tokens
        .iter()
        .copied()
        .filter(|&t| !tokenizer.is_end(t))
        .collect();
    let s = &result.stats;
    Ok(json!({
        "tokens": result.tokens,
        "text": tokenizer.decode(&text_tokens),
        "stats": {
            "prompt_tokens": s.prompt_tokens,
            "generated_tokens": s.generated_tokens,
            "target_forwards": s.target_forwards,
            "drafted": s.drafted,
            "accepted": s.accepted,
            "prefill_seconds": s.prefill_seconds,
            "decode_seconds": s.decode_seconds,
            "tokens_per_second": s.tokens_per_second(),
            "backend": backend,
            "draft": opts.draft,
            "stop_reason": result.stop.as_str(),
        }
    }))
}

#[cfg(test)]
mod tests {
    use runahead_gguf::GgufFile;
    use runahead_model::testing::TinyModel;
    use runahead_model::CpuModel;

    use super::*;

    #[derive(Debug)]
    struct Run {
        out: Value,
        pieces: String,
        from_draft: usize,
    }

    fn tiny_file() -> GgufFile {
        GgufFile::from_bytes(TinyModel::llama().to_gguf()).expect("tiny GGUF")
    }

    fn tiny_tokenizer() -> Tokenizer {
        Tokenizer::from_metadata(&tiny_file().header.metadata).expect("tokenizer")
    }

    fn tokens(out: &Value) -> Vec<u32> {
        serde_json::from_value(out["tokens"].clone()).expect("token ids")
    }

    fn generate(draft: &str, stop_after: Option<usize>) -> Result<Run, WebError> {
        let file = tiny_file();
        let tokenizer = tiny_tokenizer();
        let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
        let opts = options::GenerateOptions {
            max_tokens: 24,
            draft: draft.into(),
            ..Default::default()
        };
        let prompt = [5, 77, 120, 3, 260, 5, 77, 120];
        let (mut pieces, mut from_draft, mut seen) = (String::new(), 0, 0);
        let on_piece = |text: &str, _: u32, draft: bool| {
            pieces.push_str(text);
            from_draft += draft as usize;
            seen += 1;
            match stop_after {
                Some(n) if seen >= n => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        };
        let out = pollster::block_on(run(&mut model, &tokenizer, &prompt, &opts, "cpu", on_piece))?;
        Ok(Run {
            out,
            pieces,
            from_draft,
        })
    }

    #[test]
    fn ngram_output_equals_plain_and_pieces_spell_the_text() {
        let plain = generate("none", None).expect("plain");
        let ngram = generate("ngram", None).expect("ngram");
        assert_eq!(ngram.out["tokens"], plain.out["tokens"]);
        assert_eq!(plain.out["stats"]["stop_reason"], "max_tokens");
        assert_eq!(ngram.pieces, plain.pieces);
        // The pieces are what a streaming decoder gives for the tokens (end tokens as "").
        let tokenizer = tiny_tokenizer();
        let mut decoder = tokenizer.decoder();
        let streamed: String = tokens(&plain.out)
            .into_iter()
            .map(|t| match tokenizer.is_end(t) {
                true => String::new(),
                false => decoder.push(t),
            })
            .collect();
        assert_eq!(plain.pieces, streamed);
        assert!(
            ngram.out["stats"]["drafted"].as_u64() > Some(0),
            "{}",
            ngram.out
        );
        // Tokens flagged as drafted are exactly the accepted draft tokens.
        assert_eq!(
            Some(ngram.from_draft as u64),
            ngram.out["stats"]["accepted"].as_u64()
        );
        assert_eq!(plain.from_draft, 0);
    }

    #[test]
    fn break_from_the_callback_cancels() {
        let run = generate("none", Some(3)).expect("cancelled run");
        assert_eq!(run.out["stats"]["stop_reason"], "cancelled");
        assert_eq!(tokens(&run.out).len(), 3);
    }

    #[test]
    fn unknown_drafters_are_refused_with_the_list() {
        let e = generate("model:draft.gguf", None).unwrap_err();
        assert_eq!(e.code, Code::InvalidOption);
        assert!(e.message.contains("none, ngram"), "{}", e.message);
    }
}
