//! The draft model in the generation loop, natively on the reference CPU model (in the page the
//! same drafter runs over a paced engine): a model drafting for itself has every drafted token
//! accepted and gives the plain tokens, `auto` drafts with it, its KV cache keeps what a
//! follow-up prompt shares with the last conversation, and `draft: "model"` without one is
//! refused.

use std::cell::Cell;
use std::ops::ControlFlow;
use std::rc::Rc;

use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, Logits, ModelConfig, Result, TopLogits};
use runahead_speculate::ModelDrafter;
use serde_json::Value;

use super::{run, Drafters};
use crate::error::Code;
use crate::options::{DepthOption, GenerateOptions};

/// A model that counts the tokens it is fed.
struct Counting<M> {
    inner: M,
    fed: Rc<Cell<usize>>,
}

impl<M: LanguageModel> Counting<M> {
    fn count(&self, batch: &Batch) {
        self.fed.set(self.fed.get() + batch.tokens.len());
    }
}

impl<M: LanguageModel> LanguageModel for Counting<M> {
    fn config(&self) -> &ModelConfig {
        self.inner.config()
    }

    fn cache_len(&self) -> usize {
        self.inner.cache_len()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    async fn forward(&mut self, batch: &Batch) -> Result<Logits> {
        self.count(batch);
        self.inner.forward(batch).await
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        self.count(batch);
        self.inner.forward_argmax(batch).await
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        self.count(batch);
        self.inner.forward_top_k(batch, k).await
    }

    fn truncate_floor(&self) -> usize {
        self.inner.truncate_floor()
    }

    fn truncate(&mut self, len: usize) {
        self.inner.truncate(len)
    }

    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        self.inner.compact(base, keep)
    }
}

const PROMPT: [u32; 8] = [5, 77, 120, 3, 260, 5, 77, 120];

fn tiny_file() -> GgufFile {
    GgufFile::from_bytes(TinyModel::llama().to_gguf()).expect("tiny GGUF")
}

fn tiny_model() -> CpuModel {
    CpuModel::load(&tiny_file(), Some(64)).expect("tiny model")
}

/// Drafters holding the tiny model as their draft model (the target's own weights), and the
/// count of tokens it is fed.
pub(super) fn drafters_with_draft_model() -> (Drafters, Rc<Cell<usize>>) {
    let fed = Rc::new(Cell::new(0));
    let mut drafters = Drafters::default();
    drafters.set_draft_model(Box::new(ModelDrafter::new(Counting {
        inner: tiny_model(),
        fed: fed.clone(),
    })));
    (drafters, fed)
}

fn generate(
    target: &mut CpuModel,
    drafters: &mut Drafters,
    prompt: &[u32],
    draft: &str,
) -> std::result::Result<Value, crate::error::WebError> {
    let file = tiny_file();
    let tokenizer =
        runahead_model::Tokenizer::from_metadata(&file.header.metadata).expect("tokenizer");
    // A fixed depth: "auto" decides from timings, which would make the counts below vary.
    let opts = GenerateOptions {
        max_tokens: 16,
        draft: draft.into(),
        depth: DepthOption::Fixed(4),
        ..Default::default()
    };
    let go = |_: &str, _: Option<u32>, _: bool| ControlFlow::Continue(());
    pollster::block_on(run(target, &tokenizer, prompt, &opts, drafters, "cpu", go))
}

fn stat(out: &Value, key: &str) -> u64 {
    out["stats"][key].as_u64().expect("a count")
}

fn drafter_names(out: &Value) -> Vec<String> {
    out["stats"]["drafters"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| d["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn a_model_drafting_for_itself_has_every_draft_accepted() {
    let plain =
        generate(&mut tiny_model(), &mut Drafters::default(), &PROMPT, "none").expect("plain");
    let (mut drafters, fed) = drafters_with_draft_model();
    let out = generate(&mut tiny_model(), &mut drafters, &PROMPT, "model").expect("model");
    assert_eq!(out["tokens"], plain["tokens"]);
    assert_eq!(out["stats"]["draft"], "model");
    assert!(stat(&out, "drafted") > 0, "{}", out["stats"]);
    // The same weights predict the target's next token exactly.
    assert_eq!(
        stat(&out, "accepted"),
        stat(&out, "drafted"),
        "{}",
        out["stats"]
    );
    assert!(stat(&out, "target_forwards") < stat(&plain, "target_forwards"));
    assert_eq!(drafter_names(&out), ["model"]);
    assert!(fed.get() >= PROMPT.len(), "the draft model read the prompt");
}

#[test]
fn auto_drafts_with_the_draft_model_when_the_lookup_has_nothing() {
    let plain =
        generate(&mut tiny_model(), &mut Drafters::default(), &PROMPT, "none").expect("plain");
    let (mut drafters, fed) = drafters_with_draft_model();
    let out = generate(&mut tiny_model(), &mut drafters, &PROMPT, "auto").expect("auto");
    assert_eq!(out["tokens"], plain["tokens"]);
    assert!(
        drafter_names(&out).iter().any(|n| n == "model"),
        "{}",
        out["stats"]
    );
    assert!(fed.get() > 0);
    // Without a draft model, auto is the lookup alone.
    let lookup = generate(&mut tiny_model(), &mut Drafters::default(), &PROMPT, "auto")
        .expect("auto without a draft model");
    assert_eq!(lookup["tokens"], plain["tokens"]);
    assert!(!drafter_names(&lookup).iter().any(|n| n == "model"));
}

/// A follow-up turn (the conversation again, with the answer and something new) reuses the
/// target's cache and the draft model's: the draft model reads only what it has not seen.
#[test]
fn the_draft_models_cache_is_reused_by_the_next_turn() {
    let (mut drafters, fed) = drafters_with_draft_model();
    let mut target = tiny_model();
    let one = generate(&mut target, &mut drafters, &PROMPT, "model").expect("first turn");
    let answer: Vec<u32> = serde_json::from_value(one["tokens"].clone()).expect("ids");
    let second: Vec<u32> = PROMPT
        .iter()
        .chain(&answer)
        .chain(&[9, 10])
        .copied()
        .collect();
    let before = fed.get();
    let two = generate(&mut target, &mut drafters, &second, "model").expect("second turn");
    let fed_two = fed.get() - before;

    let (mut fresh_drafters, fresh_fed) = drafters_with_draft_model();
    let fresh = generate(&mut tiny_model(), &mut fresh_drafters, &second, "model").expect("fresh");
    assert_eq!(two["tokens"], fresh["tokens"]);
    assert_eq!(stat(&fresh, "cached_tokens"), 0);
    let reused = stat(&two, "cached_tokens") as usize;
    assert_eq!(reused, PROMPT.len() + answer.len() - 1, "{}", two["stats"]);
    // The draft model skipped the shared prefix too, all but what it had not seen yet (the
    // first turn's last token, which no draft followed): everything else it read is the same.
    assert!(
        fresh_fed.get() - fed_two + 1 >= reused,
        "fresh {} vs follow-up {}",
        fresh_fed.get(),
        fed_two
    );
    assert_eq!(stat(&two, "accepted"), stat(&two, "drafted"));
}

#[test]
fn model_without_a_draft_model_is_invalid_option() {
    let e = generate(
        &mut tiny_model(),
        &mut Drafters::default(),
        &PROMPT,
        "model",
    )
    .unwrap_err();
    assert_eq!(e.code, Code::InvalidOption);
    assert!(e.message.contains("needs a draft model"), "{}", e.message);
}
