//! Soak: long generations on the CPU reference. Thousands of greedy tokens with every drafter
//! equal plain decoding token for token, with a cache that grows to as many entries: the retrieval
//! drafters have thousands of drafts accepted (a tiny random model's greedy text soon
//! repeats), the unrelated draft model has tens of thousands rejected (one rollback per step).
//! A generation cancelled at every position of its first steps leaves the model and drafter
//! ready for the next, which equals a fresh run.

use std::ops::ControlFlow;
use std::sync::OnceLock;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{CpuModel, LanguageModel};
use runahead_speculate::{
    generate_with, AutoDrafter, Depth, Drafter, GenerateOptions, Generation, ModelDrafter,
    NgramDrafter, SamplingParams, StopReason, SuffixDrafter,
};

/// Tokens per generation: 2,000 by default (CI), `RUNAHEAD_SOAK_TOKENS=10000` for the long soak
/// (docs/testing.md; attention makes its cost grow with the square of the length).
fn soak_tokens() -> usize {
    std::env::var("RUNAHEAD_SOAK_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// One layer keeps long generations affordable; width 256 so every block format fits.
fn spec(seed: u64) -> TinyModel {
    TinyModel {
        n_layers: 1,
        context: soak_tokens() + 64,
        seed,
        ..TinyModel::llama()
    }
}

fn load(spec: &TinyModel) -> CpuModel {
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    CpuModel::load(&file, None).unwrap()
}

/// A prompt that repeats itself (drafters find matches) followed by random tokens.
fn prompt(vocab: usize) -> Vec<u32> {
    let mut rng = TestRng::new(3);
    (0..24u32)
        .map(|j| 3 + (j * 7) % 11)
        .chain((0..16).map(|_| 2 + (rng.next_u64() % (vocab as u64 - 2)) as u32))
        .collect()
}

fn run(
    m: &mut CpuModel,
    d: Option<&mut dyn Drafter>,
    prompt: &[u32],
    max_tokens: usize,
    depth: usize,
    mut cancel_after: Option<usize>,
) -> Generation {
    let opts = GenerateOptions {
        max_tokens,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(depth),
        ..GenerateOptions::default()
    };
    let on_token = |_, _| match cancel_after.as_mut() {
        Some(0) => ControlFlow::Break(()),
        Some(n) => {
            *n -= 1;
            ControlFlow::Continue(())
        }
        None => ControlFlow::Continue(()),
    };
    block_on(generate_with(m, d, prompt, &opts, |_| false, on_token)).unwrap()
}

/// What a soak run must have exercised besides equality.
enum Expect {
    /// More drafted tokens accepted than a tenth of the generation.
    Accepted,
    /// More drafted tokens rejected than a tenth of the generation: a cache rollback at nearly
    /// every step.
    Rejected,
}

/// Plain greedy decoding, then the same with `drafter` verifying up to `depth` tokens a step:
/// identical token for token.
fn soak(name: &str, mut drafter: Box<dyn Drafter>, depth: usize, expect: Expect) {
    let mut m = load(&spec(1));
    let p = prompt(m.config().vocab_size);
    // Plain decoding once for every test of this binary.
    static PLAIN: OnceLock<Generation> = OnceLock::new();
    let plain = PLAIN.get_or_init(|| run(&mut load(&spec(1)), None, &p, soak_tokens(), 0, None));
    assert_eq!(plain.tokens.len(), soak_tokens());
    let spec_run = run(
        &mut m,
        Some(drafter.as_mut()),
        &p,
        soak_tokens(),
        depth,
        None,
    );
    let first_diff = plain
        .tokens
        .iter()
        .zip(&spec_run.tokens)
        .position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "{name}: first difference");
    assert_eq!(spec_run.tokens.len(), soak_tokens(), "{name}");
    let s = &spec_run.stats;
    let exercised = match expect {
        Expect::Accepted => s.accepted,
        Expect::Rejected => s.drafted - s.accepted,
    };
    assert!(
        exercised > soak_tokens() / 10,
        "{name}: {} drafted, {} accepted",
        s.drafted,
        s.accepted
    );
}

#[test]
fn long_generations_with_the_ngram_drafter_equal_plain() {
    soak(
        "ngram",
        Box::new(NgramDrafter::default()),
        6,
        Expect::Accepted,
    );
}

#[test]
fn long_generations_with_the_suffix_drafter_equal_plain() {
    // A small global index, so requests are evicted while it runs.
    soak(
        "suffix",
        Box::new(SuffixDrafter::new(512)),
        6,
        Expect::Accepted,
    );
}

#[test]
fn long_generations_with_a_draft_model_equal_plain() {
    // An unrelated model of the same vocabulary: its drafts are mostly rejected.
    let draft = ModelDrafter::new(load(&spec(77)));
    soak("model", Box::new(draft), 2, Expect::Rejected);
}

#[test]
fn long_generations_with_the_auto_drafter_equal_plain() {
    let draft = ModelDrafter::new(load(&spec(77)));
    soak(
        "auto",
        Box::new(AutoDrafter::new(
            SuffixDrafter::default(),
            Some(Box::new(draft)),
        )),
        6,
        Expect::Accepted,
    );
}

/// A generation cancelled after k tokens, for every k in the first steps (inside accepted
/// drafts too), stops there; the next generation on the same model and drafter equals plain.
#[test]
fn cancel_at_every_position_then_generate_again() {
    let mut m = load(&spec(1));
    let p = prompt(m.config().vocab_size);
    let plain = run(&mut m, None, &p, 48, 0, None);
    let mut drafter = SuffixDrafter::default();
    for k in 0..32 {
        let cancelled = run(&mut m, Some(&mut drafter), &p, 48, 6, Some(k));
        assert_eq!(cancelled.stop, StopReason::Cancelled, "k = {k}");
        assert_eq!(cancelled.tokens, plain.tokens[..=k], "k = {k}");
        let again = run(&mut m, Some(&mut drafter), &p, 48, 6, None);
        assert_eq!(again.tokens, plain.tokens, "after a cancel at {k}");
    }
}
