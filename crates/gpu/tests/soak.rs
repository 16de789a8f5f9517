//! Soak on the GPU engine: long greedy generations with every drafter equal plain decoding
//! token for token, the cache growing to thousands of entries through many rollbacks and
//! compactions. CI runs 1,000 tokens per retrieval drafter and 300 with draft models: lavapipe
//! leaks several MB of host memory per multi-token forward (tests/memory.rs), so a 10,000-token
//! soak there would need tens of GB. On a real GPU, `RUNAHEAD_SOAK_TOKENS=10000` runs the long
//! soak with every drafter (docs/testing.md; the CPU reference runs it in CI:
//! crates/speculate/tests/soak.rs).

mod common;

use std::ops::ControlFlow;
use std::sync::OnceLock;

use common::{ctx, tiny_ctx};
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::kernels::KernelShape;
use runahead_gpu::{GpuContext, GpuModel};
use runahead_model::testing::TinyModel;
use runahead_model::LanguageModel;
use runahead_speculate::{
    generate_with, AutoDrafter, Depth, Drafter, GenerateOptions, Generation, ModelDrafter,
    NgramDrafter, SamplingParams, SuffixDrafter,
};

fn soak_tokens() -> usize {
    std::env::var("RUNAHEAD_SOAK_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// A real GPU runs the kernels it gets in use (split over workgroups: an invocation per
/// (token, head) walking 10,000 cache entries alone would be the slowest part); an emulated one
/// the quick-to-compile emulated kernels.
fn soak_ctx() -> GpuContext {
    if real_gpu() {
        ctx()
    } else {
        tiny_ctx()
    }
}

fn real_gpu() -> bool {
    ctx().shape == KernelShape::GPU
}

/// One layer keeps thousands of tokens of attention affordable on an emulated GPU.
fn load(seed: u64) -> GpuModel {
    let spec = TinyModel {
        n_layers: 1,
        context: soak_tokens() + 64,
        seed,
        ..TinyModel::llama()
    };
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    GpuModel::load(&soak_ctx(), &file, Some(spec.context)).unwrap()
}

fn prompt() -> Vec<u32> {
    (0..24u32)
        .map(|j| 3 + (j * 7) % 11)
        .chain(100..116)
        .collect()
}

fn run(m: &mut GpuModel, d: Option<&mut dyn Drafter>, depth: usize, tokens: usize) -> Generation {
    let opts = GenerateOptions {
        max_tokens: tokens,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(depth),
        ..GenerateOptions::default()
    };
    let on_token = |_, _| ControlFlow::Continue(());
    block_on(generate_with(m, d, &prompt(), &opts, |_| false, on_token)).unwrap()
}

/// `tokens` (at most [`soak_tokens`]) with `drafter`, equal to the start of plain decoding.
fn soak(name: &str, mut drafter: Box<dyn Drafter>, depth: usize, tokens: usize) -> Generation {
    static PLAIN: OnceLock<Vec<u32>> = OnceLock::new();
    let plain = PLAIN.get_or_init(|| run(&mut load(1), None, 0, soak_tokens()).tokens);
    let mut m = load(1);
    let g = run(&mut m, Some(drafter.as_mut()), depth, tokens);
    let first_diff = plain.iter().zip(&g.tokens).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "{name}: first difference");
    assert_eq!(g.tokens.len(), tokens, "{name}");
    assert!(m.cache_len() >= tokens - 1, "{name}: {}", m.cache_len());
    g
}

#[test]
fn long_generations_with_retrieval_drafters_equal_plain_on_the_gpu() {
    for (name, drafter) in [
        (
            "ngram",
            Box::new(NgramDrafter::default()) as Box<dyn Drafter>,
        ),
        ("suffix", Box::new(SuffixDrafter::new(512))),
    ] {
        let g = soak(name, drafter, 6, soak_tokens());
        assert!(
            g.stats.accepted > soak_tokens() / 4,
            "{name}: {:?}",
            g.stats
        );
    }
}

#[test]
fn long_generations_with_draft_models_equal_plain_on_the_gpu() {
    // An unrelated draft model: nearly every draft rejected, a rollback every step.
    // Fewer on an emulated GPU, whose driver leaks memory per forward (see the top).
    let tokens = if real_gpu() {
        soak_tokens()
    } else {
        (soak_tokens() * 3 / 10).max(1)
    };
    let g = soak("model", Box::new(ModelDrafter::new(load(77))), 2, tokens);
    let rejected = g.stats.drafted - g.stats.accepted;
    assert!(rejected > tokens / 2, "model: {:?}", g.stats);
    let auto = AutoDrafter::new(
        SuffixDrafter::default(),
        Some(Box::new(ModelDrafter::new(load(77)))),
    );
    soak("auto", Box::new(auto), 6, tokens);
}
