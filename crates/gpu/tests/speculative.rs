//! Speculative decoding on the GPU backend: greedy output equals plain greedy output token for
//! token for every drafter (chains and trees, the draft model on the GPU too), which needs the
//! GPU engine's batch invariance, tree masks and KV compaction to be exact.

mod common;

use std::ops::ControlFlow;

use common::{gpu_shape_ctx, tiny_ctx};
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::GpuContext;
use runahead_gpu::GpuModel;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{argmax_rows, Batch, LanguageModel, Logits, ModelConfig, TopLogits};
use runahead_speculate::{
    generate_cached, generate_with, AutoDrafter, CostModel, Depth, Drafter, GenerateOptions,
    Generation, KvTokens, ModelDrafter, NgramDrafter, SamplingParams, SuffixDrafter,
};

fn run(m: &mut GpuModel, d: Option<&mut dyn Drafter>, prompt: &[u32], depth: Depth) -> Generation {
    let opts = GenerateOptions {
        max_tokens: 8,
        sampling: SamplingParams::greedy(),
        depth,
        ..GenerateOptions::default()
    };
    block_on(generate_with(
        m,
        d,
        prompt,
        &opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

/// A target on the GPU with its drafters.
struct Setup {
    target: GpuModel,
    drafters: Vec<Box<dyn Drafter>>,
}

fn setup(ctx: &GpuContext, spec: TinyModel) -> Setup {
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let other = GgufFile::from_bytes(
        TinyModel {
            seed: 77,
            ..spec.clone()
        }
        .to_gguf(),
    )
    .unwrap();
    Setup {
        target: GpuModel::load(ctx, &file, None).unwrap(),
        drafters: vec![
            Box::new(NgramDrafter::default()),
            Box::new(SuffixDrafter::new(256)),
            Box::new(ModelDrafter::new(GpuModel::load(ctx, &file, None).unwrap())),
            Box::new(AutoDrafter::new(
                SuffixDrafter::default(),
                Some(Box::new(ModelDrafter::new(
                    GpuModel::load(ctx, &other, None).unwrap(),
                ))),
            )),
        ],
    }
}

/// 16 prompts on the kernels emulated GPUs get (the CI's lavapipe runs them fastest).
#[test]
fn every_drafter_equals_plain_greedy_on_the_gpu() {
    every_drafter_equals_plain_greedy(&tiny_ctx(), 16);
}

/// 8 prompts on the kernels real GPUs get (split-K matmul, split-KV attention).
#[test]
fn every_drafter_equals_plain_greedy_with_the_gpu_kernels() {
    every_drafter_equals_plain_greedy(&gpu_shape_ctx(), 8);
}

/// `n` prompts, alternating between a llama and a qwen2 model, each run plain and with every
/// drafter (fixed and adaptive depth alternating), so every drafter sees all `n`.
fn every_drafter_equals_plain_greedy(ctx: &GpuContext, n: u32) {
    let mut rng = TestRng::new(4);
    let mut setups = [
        setup(ctx, TinyModel::llama()),
        setup(ctx, TinyModel::qwen2()),
    ];
    let mut accepted = [0usize; 4];
    for i in 0..n {
        let Setup { target, drafters } = &mut setups[i as usize % 2];
        let vocab = target.config().vocab_size as u64;
        let prompt: Vec<u32> = if i % 4 < 2 {
            (0..20).map(|j| 3 + (j * 5 + i) % 13).collect()
        } else {
            (0..4 + i as u64)
                .map(|_| 2 + (rng.next_u64() % (vocab - 2)) as u32)
                .collect()
        };
        let plain = run(target, None, &prompt, Depth::default());
        for (k, d) in drafters.iter_mut().enumerate() {
            let depth = if (i as usize / 4 + k / 2).is_multiple_of(2) {
                Depth::Fixed(8)
            } else {
                Depth::adaptive(CostModel::linear(0.05))
            };
            let s = run(target, Some(d.as_mut()), &prompt, depth);
            assert_eq!(
                s.tokens,
                plain.tokens,
                "{} prompt {i} ({} kernels)",
                d.name(),
                ctx.shape.name()
            );
            accepted[k] += s.stats.accepted;
        }
    }
    // Every drafter had drafts accepted: the equality above was not trivially plain decoding.
    assert!(
        accepted.iter().all(|&a| a > 0),
        "accepted per drafter: {accepted:?}"
    );
}

/// A GPU model that reads whole rows back: `forward_top_k` falls back to selecting from the
/// logits on the CPU, which is what the device selection must equal.
struct WholeRows(GpuModel);

impl LanguageModel for WholeRows {
    fn config(&self) -> &ModelConfig {
        self.0.config()
    }
    fn cache_len(&self) -> usize {
        self.0.cache_len()
    }
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    async fn forward(&mut self, batch: &Batch) -> runahead_model::Result<Logits> {
        self.0.forward(batch).await
    }
    async fn forward_argmax(&mut self, batch: &Batch) -> runahead_model::Result<Vec<u32>> {
        argmax_rows(&self.0.forward(batch).await?)
    }
    async fn forward_top_k(
        &mut self,
        batch: &Batch,
        k: usize,
    ) -> runahead_model::Result<TopLogits> {
        Ok(TopLogits::of(&self.0.forward(batch).await?, k))
    }
    fn truncate_floor(&self) -> usize {
        self.0.truncate_floor()
    }

    fn truncate(&mut self, len: usize) {
        self.0.truncate(len)
    }
    fn compact(&mut self, base: usize, keep: &[usize]) -> runahead_model::Result<()> {
        self.0.compact(base, keep)
    }
}

fn sample<M: LanguageModel>(
    m: &mut M,
    d: Option<&mut dyn Drafter>,
    prompt: &[u32],
    opts: &GenerateOptions,
) -> Generation {
    block_on(generate_with(
        m,
        d,
        prompt,
        opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

/// Sampling with top-k reads back only each row's top logits on the GPU (prefill,
/// verification and the draft model's steps) and draws the same tokens as sampling from whole
/// rows, plainly and with drafters.
#[test]
fn top_k_sampling_on_the_device_equals_sampling_from_whole_rows() {
    let ctx = tiny_ctx();
    let spec = TinyModel::llama();
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let load = || GpuModel::load(&ctx, &file, None).unwrap();
    let opts = GenerateOptions {
        max_tokens: 12,
        sampling: SamplingParams {
            temperature: 0.9,
            top_k: 20,
            top_p: 0.95,
            seed: 5,
        },
        depth: Depth::Fixed(4),
        ..GenerateOptions::default()
    };
    let prompts: [&[u32]; 3] = [
        &[5, 77, 120, 3, 260],
        &[9, 9, 9, 9, 9, 9, 9, 9],
        &[200, 2, 41],
    ];
    let (mut device, mut whole) = (load(), WholeRows(load()));
    let mut drafted = 0;
    for prompt in prompts {
        let a = sample(&mut device, None, prompt, &opts);
        let b = sample(&mut whole, None, prompt, &opts);
        assert_eq!(a.tokens, b.tokens, "plain {prompt:?}");
        // With a suffix drafter and a draft model (its own top-k readback against whole rows).
        let mut d_device: [Box<dyn Drafter>; 2] = [
            Box::new(SuffixDrafter::new(64)),
            Box::new(ModelDrafter::new(load())),
        ];
        let mut d_whole: [Box<dyn Drafter>; 2] = [
            Box::new(SuffixDrafter::new(64)),
            Box::new(ModelDrafter::new(WholeRows(load()))),
        ];
        for (x, y) in d_device.iter_mut().zip(&mut d_whole) {
            let a = sample(&mut device, Some(x.as_mut()), prompt, &opts);
            let b = sample(&mut whole, Some(y.as_mut()), prompt, &opts);
            assert_eq!(a.tokens, b.tokens, "{} {prompt:?}", x.name());
            drafted += a.stats.drafted;
        }
    }
    assert!(drafted > 0, "the drafters never drafted");
}

/// A follow-up turn on the GPU engine prefills only what is new and gives the tokens of a
/// generation that computes everything (the engine is batch-invariant, so an entry does not
/// depend on the block it was computed in).
#[test]
fn a_follow_up_turn_reuses_the_cache_on_the_gpu() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut m = GpuModel::load(&tiny_ctx(), &file, None).unwrap();
    let mut cached = KvTokens::default();
    let mut drafter = SuffixDrafter::default();
    let opts = GenerateOptions {
        max_tokens: 10,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(4),
        ..GenerateOptions::default()
    };
    let first: Vec<u32> = (0..20).map(|j| 3 + (j * 5) % 13).collect();
    let g1 = block_on(generate_cached(
        &mut m,
        Some(&mut drafter),
        &mut cached,
        &first,
        &opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap();
    let second: Vec<u32> = first
        .iter()
        .chain(&g1.tokens)
        .chain(&[50, 51, 52])
        .copied()
        .collect();
    let g2 = block_on(generate_cached(
        &mut m,
        Some(&mut drafter),
        &mut cached,
        &second,
        &opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap();
    assert_eq!(g2.stats.cached_tokens, first.len() + g1.tokens.len() - 1);
    let mut fresh = GpuModel::load(&tiny_ctx(), &file, None).unwrap();
    let want = run(&mut fresh, None, &second, Depth::default());
    assert_eq!(g2.tokens[..8], want.tokens[..]);
}
