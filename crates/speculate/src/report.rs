//! A finished generation as one JSON object: what `runahead generate --json` prints and what
//! the browser's `generate` resolves to. One function, so the two cannot drift apart.

use runahead_model::Tokenizer;
use serde_json::{json, Value};

use crate::{Generation, Provenance, TokenLogprob};

/// `{tokens, text, stats, provenance}`, and `logprobs` when the generation reported them. `text` decodes the tokens without end tokens (or is
/// the text before a stop string); `stats`
/// carries the counters, timings, rates and per-drafter figures of the run, with `backend` and
/// `draft` as the caller names them.
pub fn generation_json(
    generation: &Generation,
    tokenizer: &Tokenizer,
    backend: &str,
    draft: &str,
) -> Value {
    let s = &generation.stats;
    let text_tokens: Vec<u32> = generation
        .tokens
        .iter()
        .copied()
        .filter(|&t| !tokenizer.is_end(t))
        .collect();
    let forwards_per_token = match s.tokens_per_forward() {
        r if r > 0.0 => 1.0 / r,
        _ => 0.0,
    };
    let drafters: Vec<Value> = s
        .drafters
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "steps": d.steps,
                "drafted": d.drafted,
                "accepted": d.accepted,
                "draft_seconds": d.draft_seconds,
            })
        })
        .collect();
    let provenance: Vec<&str> = generation
        .provenance
        .iter()
        .map(|p| match p {
            Provenance::Draft => "draft",
            Provenance::Target => "target",
            Provenance::Forced => "forced",
        })
        .collect();
    let mut out = json!({
        "tokens": generation.tokens,
        "text": generation.text.clone().unwrap_or_else(|| tokenizer.decode(&text_tokens)),
        "stats": {
            "prompt_tokens": s.prompt_tokens,
            "cached_tokens": s.cached_tokens,
            "generated_tokens": s.generated_tokens,
            "target_forwards": s.target_forwards,
            "drafted": s.drafted,
            "accepted": s.accepted,
            "prefill_seconds": s.prefill_seconds,
            "decode_seconds": s.decode_seconds,
            "calibration_seconds": s.calibration_seconds,
            "masks": s.masks,
            "mask_seconds": s.mask_seconds,
            "tokens_per_second": s.tokens_per_second(),
            "backend": backend,
            "draft": draft,
            "stop_reason": generation.stop.as_str(),
            "acceptance_rate": s.acceptance_rate(),
            "mean_accepted_length": s.mean_accepted_length(),
            "target_forwards_per_token": forwards_per_token,
            "drafters": drafters,
        },
        "provenance": provenance,
    });
    if !generation.logprobs.is_empty() {
        out["logprobs"] = logprobs_json(generation, tokenizer);
    }
    out
}

/// `[{token, text, bytes, logprob, top_logprobs: [...]}]`, one per token ([`logprob_json`]).
fn logprobs_json(generation: &Generation, tokenizer: &Tokenizer) -> Value {
    generation
        .logprobs
        .iter()
        .map(|lp| logprob_json(lp, tokenizer))
        .collect()
}

/// One token's entry of a report's `logprobs`: `{token, text, bytes, logprob, top_logprobs:
/// [{token, text, bytes, logprob}]}` (`token` the id, `text` its text, `bytes` its UTF-8 bytes).
pub fn logprob_json(lp: &TokenLogprob, tokenizer: &Tokenizer) -> Value {
    let entry = |token: u32, logprob: f32| {
        let bytes = tokenizer.token_bytes(token);
        json!({
            "token": token,
            "text": String::from_utf8_lossy(bytes),
            "bytes": bytes,
            "logprob": logprob,
        })
    };
    let mut e = entry(lp.token, lp.logprob);
    let top: Vec<Value> = lp.top.iter().map(|&(t, l)| entry(t, l)).collect();
    e["top_logprobs"] = Value::from(top);
    e
}
