//! The draft model: a second GGUF that drafts for the target (`draft: "model"`, and inside
//! `auto`). Checked the way the CLI checks one (crates/cli/src/drafting.rs): its tokenizer must
//! be the target's token for token, and its output must cover the vocabulary, since token ids
//! pass between the two models unchanged. Then loaded on the target's engine: the same WebGPU
//! device, or the CPU engine, with the target's KV cache size.

use std::collections::BTreeMap;
use std::sync::Arc;

use runahead_cpu::CpuEngine;
use runahead_gguf::{Gguf, GgufFile};
use runahead_gpu::{GpuContext, GpuModel};
use runahead_model::{LanguageModel, Tokenizer};
use runahead_speculate::{Drafter, ModelDrafter};
use serde::Serialize;

use crate::error::{Code, WebError};
use crate::pacing::{Paced, Turn};
use crate::session::{parameters, tensor_types, unsupported};
use crate::Model;

/// `info().draft`: what the page is told of the draft model.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DraftInfo {
    /// `general.name`, when the file has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub architecture: String,
    pub parameters: u64,
    pub layers: usize,
    pub embedding: usize,
    pub vocab: usize,
    /// KV cache size of the draft model, in tokens (the target's, capped by the draft's
    /// trained context).
    pub context: usize,
    pub tensor_types: BTreeMap<String, usize>,
}

/// Checks that `file` can draft for the target whose tokenizer is `target` (before any weight
/// is loaded) and describes it. A different tokenizer is `draft_mismatch`; a file whose
/// metadata this engine cannot read is `unsupported_model`.
pub fn check(target: &Tokenizer, header: &Gguf) -> Result<DraftInfo, WebError> {
    let meta = &header.metadata;
    let tokenizer = Tokenizer::from_metadata(meta).map_err(unsupported)?;
    target
        .check_draft_compatible(&tokenizer)
        .map_err(|e| WebError::new(Code::DraftMismatch, format!("the draft model: {e}")))?;
    let config = crate::session::page_config(header).map_err(unsupported)?;
    Ok(DraftInfo {
        name: meta.str("general.name").ok().map(str::to_owned),
        architecture: meta
            .str("general.architecture")
            .unwrap_or_default()
            .to_owned(),
        parameters: parameters(header),
        layers: config.n_layers,
        embedding: config.n_embd,
        vocab: config.vocab_size,
        context: 0,
        tensor_types: tensor_types(header),
    })
}

/// Refuses a draft model whose output has fewer rows than the vocabulary (some of the
/// target's tokens could never be drafted, and the draft's rows are read per token id).
fn check_rows(model: &impl LanguageModel, target: &Tokenizer) -> Result<(), WebError> {
    let rows = model.config().vocab_size;
    if rows < target.vocab_size() {
        return Err(WebError::new(
            Code::DraftMismatch,
            format!(
                "the draft model's output has {rows} rows, fewer than the {} tokens of the \
                 vocabulary",
                target.vocab_size()
            ),
        ));
    }
    Ok(())
}

/// A drafter over `model`, paced like the target so the page gets its turns while it drafts.
fn drafter<M: LanguageModel + 'static>(model: M, turn: Turn) -> Box<dyn Drafter> {
    Box::new(ModelDrafter::new(Paced { inner: model, turn }))
}

/// Loads the checked draft `file` onto the engine `target` runs on, with the target's KV cache
/// size; returns the drafter and the draft's cache size.
pub fn load(
    target: &Model,
    tokenizer: &Tokenizer,
    file: GgufFile,
) -> Result<(Box<dyn Drafter>, usize), WebError> {
    let context = target.capacity();
    match target {
        Model::Gpu { ctx, .. } => {
            let model = GpuModel::load(ctx, &file, Some(context))?;
            gpu_drafter(model, ctx, tokenizer)
        }
        Model::Cpu(target) => {
            let options = crate::cpu_options(context, target.inner.threads());
            let engine = CpuEngine::load(Arc::new(file), &options)?;
            check_rows(&engine, tokenizer)?;
            let capacity = engine.capacity();
            Ok((drafter(engine, Turn::Fair), capacity))
        }
    }
}

/// The drafter over a draft model whose weights are on the target's device `ctx`; returns it
/// and the draft's cache size.
pub fn gpu_drafter(
    model: GpuModel,
    ctx: &GpuContext,
    tokenizer: &Tokenizer,
) -> Result<(Box<dyn Drafter>, usize), WebError> {
    ctx.check()?;
    check_rows(&model, tokenizer)?;
    let capacity = model.capacity();
    Ok((drafter(model, Turn::First), capacity))
}

#[cfg(test)]
mod tests {
    use runahead_gguf::Value;
    use runahead_model::testing::TinyModel;

    use super::*;

    fn tokenizer_of(file: &GgufFile) -> Tokenizer {
        Tokenizer::from_metadata(&file.header.metadata).expect("tokenizer")
    }

    fn parse(bytes: Vec<u8>) -> GgufFile {
        GgufFile::from_bytes(bytes).expect("a generated model parses")
    }

    #[test]
    fn a_model_with_the_targets_tokenizer_is_described() {
        let target = parse(TinyModel::llama().to_gguf());
        // Another architecture with the same vocabulary drafts as well.
        let draft = parse(TinyModel::qwen2().to_gguf());
        let info = check(&tokenizer_of(&target), &draft.header).expect("compatible");
        assert_eq!(info.name.as_deref(), Some("tiny-qwen2"));
        assert_eq!(info.architecture, "qwen2");
        assert_eq!(info.layers, 2);
        assert_eq!(info.vocab, tokenizer_of(&target).vocab_size());
        assert_eq!(info.parameters, parameters(&draft.header));
        assert!(info.parameters > 0);
    }

    #[test]
    fn another_tokenizer_is_draft_mismatch() {
        let target = parse(TinyModel::llama().to_gguf());
        let tokenizer = tokenizer_of(&target);
        // Another end-of-text token, and another text for a token.
        let other_eos =
            TinyModel::llama().to_gguf_with_meta(&[("tokenizer.ggml.eos_token_id", Value::U32(2))]);
        let e = check(&tokenizer, &parse(other_eos).header).unwrap_err();
        assert_eq!(e.code, Code::DraftMismatch);
        assert!(e.message.contains("EOS"), "{}", e.message);
        let mut tokens: Vec<String> = target
            .header
            .metadata
            .strings("tokenizer.ggml.tokens")
            .expect("a vocabulary")
            .iter()
            .map(str::to_owned)
            .collect();
        tokens[40] = "something-else".into();
        let other_text = TinyModel::llama().to_gguf_with_meta(&[(
            "tokenizer.ggml.tokens",
            Value::Array(runahead_gguf::Array::String(tokens.iter().collect())),
        )]);
        let e = check(&tokenizer, &parse(other_text).header).unwrap_err();
        assert_eq!(e.code, Code::DraftMismatch);
        assert!(e.message.contains("token 40"), "{}", e.message);
    }

    #[test]
    fn a_draft_on_the_cpu_engine_gets_the_targets_cache_size() {
        let bytes = TinyModel::llama().to_gguf();
        let target_file = Arc::new(parse(bytes.clone()));
        let tokenizer = tokenizer_of(&target_file);
        let engine =
            CpuEngine::load(target_file, &crate::cpu_options(48, 1)).expect("the target loads");
        let target = Model::Cpu(Paced {
            inner: engine,
            turn: Turn::Fair,
        });
        let (drafter, context) = load(&target, &tokenizer, parse(bytes)).expect("the draft loads");
        assert_eq!(context, 48);
        assert_eq!(drafter.name(), "model");
        assert!(drafter.runs_a_model());
    }

    #[test]
    fn unreadable_draft_metadata_is_unsupported_model() {
        let target = parse(TinyModel::llama().to_gguf());
        let no_arch = TinyModel::llama()
            .to_gguf_with_meta(&[("general.architecture", Value::String("mamba".into()))]);
        let e = check(&tokenizer_of(&target), &parse(no_arch).header).unwrap_err();
        assert_eq!(e.code, Code::UnsupportedModel, "{}", e.message);
    }
}
