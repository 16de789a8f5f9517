//! Greedy speculative decoding on this engine returns exactly what greedy plain decoding
//! returns, for every drafter (draft models on this engine too), tree and chain verification.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;

use common::random_trees::RandomTrees;
use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions, Isa};
use runahead_gguf::GgufFile;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::LanguageModel;
use runahead_speculate::{
    generate_with, AutoDrafter, CostModel, Depth, Drafter, GenerateOptions, Generation,
    ModelDrafter, NgramDrafter, SamplingParams, SuffixDrafter,
};

fn opts(max_tokens: usize, depth: Depth) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams::greedy(),
        depth,
        ..GenerateOptions::default()
    }
}

fn run<M: LanguageModel>(
    m: &mut M,
    d: Option<&mut dyn Drafter>,
    prompt: &[u32],
    o: &GenerateOptions,
) -> Generation {
    let done = block_on(generate_with(
        m,
        d,
        prompt,
        o,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ));
    done.unwrap()
}

/// Half repetitive (drafters find matches), half random.
fn prompts(vocab: usize) -> Vec<Vec<u32>> {
    let mut rng = TestRng::new(9);
    (0..8u32)
        .map(|i| {
            if i % 2 == 0 {
                (0..24).map(|j| 3 + (j * 7 + i) % 11).collect()
            } else {
                (0..5 + i as usize)
                    .map(|_| 2 + (rng.next_u64() % (vocab as u64 - 2)) as u32)
                    .collect()
            }
        })
        .collect()
}

#[test]
fn every_drafter_equals_plain_greedy() {
    // The kernels this machine runs (AVX-512 VNNI, AVX2, NEON or the portable ones).
    let options = CpuOptions {
        threads: Some(2),
        isa: Some(Isa::best()),
        ..CpuOptions::default()
    };
    // llama, qwen2, and the plans with more steps: rope_freqs, qwen3's norms and head dim,
    // phi3's fused projections and LongRoPE, gemma3's sliding window (8: the prompts and their
    // continuations run past it) and the rest of its plan.
    for spec in [
        TinyModel::llama(),
        TinyModel::qwen2(),
        TinyModel::llama3(),
        TinyModel::qwen3(),
        TinyModel::phi3(),
        TinyModel::gemma3(),
    ] {
        let file = Arc::new(GgufFile::from_bytes(spec.to_gguf()).unwrap());
        let other = Arc::new(
            GgufFile::from_bytes(
                TinyModel {
                    seed: 77,
                    ..spec.clone()
                }
                .to_gguf(),
            )
            .unwrap(),
        );
        let engine = |f: &Arc<GgufFile>| CpuEngine::load(f.clone(), &options).unwrap();
        let mut m = engine(&file);
        let vocab = m.config().vocab_size;
        let mut drafters: Vec<Box<dyn Drafter>> = vec![
            Box::new(NgramDrafter::default()),
            Box::new(SuffixDrafter::new(256)),
            Box::new(ModelDrafter::new(engine(&file))),
            Box::new(ModelDrafter::new(engine(&other))),
            Box::new(AutoDrafter::new(
                SuffixDrafter::default(),
                Some(Box::new(ModelDrafter::new(engine(&other)))),
            )),
            Box::new(RandomTrees(TestRng::new(5), vocab)),
        ];
        let depths = [Depth::Fixed(8), Depth::adaptive(CostModel::linear(0.05))];
        let (mut accepted, mut drafted) = (0, 0);
        for (i, prompt) in prompts(vocab).iter().enumerate() {
            let plain = run(&mut m, None, prompt, &opts(20, Depth::default()));
            for (k, d) in drafters.iter_mut().enumerate() {
                let depth = depths[(i + k) % 2].clone();
                let out = run(&mut m, Some(d.as_mut()), prompt, &opts(20, depth));
                assert_eq!(
                    out.tokens,
                    plain.tokens,
                    "{:?} drafter {} prompt {i}",
                    spec.arch,
                    d.name()
                );
                accepted += out.stats.accepted;
                drafted += out.stats.drafted;
            }
        }
        eprintln!("{:?}: accepted {accepted} of {drafted} drafted", spec.arch);
        assert!(
            accepted > 0,
            "some drafts must be accepted for the test to mean anything"
        );
    }
}
