//! Greedy speculative decoding returns exactly what greedy plain decoding returns, for every
//! drafter and depth policy, and rejected drafts leave nothing behind in any KV cache.

use std::ops::ControlFlow;
use std::path::PathBuf;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{Batch, CpuModel, LanguageModel, ModelError, Tokenizer};
use runahead_speculate::{
    calibrate, generate, generate_cached, generate_with, ready, AutoDrafter, CostModel, Depth,
    Draft, DraftRequest, Drafter, GenerateError, GenerateOptions, Generation, KvTokens,
    LocalFuture, ModelDrafter, NgramDrafter, Provenance, SamplingError, SamplingParams,
    SuffixDrafter,
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
    block_on(generate_with(
        m,
        d,
        prompt,
        o,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

/// Proposes random trees (wrong almost always): every step verifies a tree, rejects most of
/// it and compacts the cache, so a stale or misplaced KV entry would change the output.
struct RandomTrees(TestRng, usize);

impl Drafter for RandomTrees {
    fn name(&self) -> &'static str {
        "random"
    }
    fn propose<'a>(
        &'a mut self,
        r: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        let mut d = Draft::empty("random");
        let last = *r.context.last().unwrap();
        for i in 0..r.max_nodes.min(7) {
            let parent = if i == 0 {
                None
            } else {
                Some((self.0.next_u64() % i as u64) as usize)
            }
            .filter(|_| !self.0.next_u64().is_multiple_of(3));
            // Sometimes the last token (often what a tiny model repeats), else random.
            let t = if self.0.next_u64().is_multiple_of(2) {
                last
            } else {
                (self.0.next_u64() % self.1 as u64) as u32
            };
            d.push(t, parent, 0.5);
        }
        ready(Ok(d))
    }
}

/// 32 prompts: half repetitive (drafters find matches), half random.
fn prompts(vocab: usize) -> Vec<Vec<u32>> {
    let mut rng = TestRng::new(9);
    (0..32u32)
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

fn tiny(spec: &TinyModel) -> GgufFile {
    GgufFile::from_bytes(spec.to_gguf()).unwrap()
}

#[test]
fn every_drafter_equals_plain_greedy_on_generated_models() {
    for spec in [TinyModel::llama(), TinyModel::qwen2()] {
        let file = tiny(&spec);
        let mut m = CpuModel::load(&file, None).unwrap();
        let vocab = m.config().vocab_size;
        // Draft models: the target itself (everything accepted) and an unrelated model of the
        // same vocabulary (mostly rejected).
        let other = tiny(&TinyModel {
            seed: 77,
            ..spec.clone()
        });
        let mut drafters: Vec<Box<dyn Drafter>> = vec![
            Box::new(NgramDrafter::default()),
            Box::new(SuffixDrafter::new(256)), // small global index: eviction happens
            Box::new(ModelDrafter::new(CpuModel::load(&file, None).unwrap())),
            Box::new(ModelDrafter::new(CpuModel::load(&other, None).unwrap())),
            Box::new(AutoDrafter::new(
                SuffixDrafter::default(),
                Some(Box::new(ModelDrafter::new(
                    CpuModel::load(&other, None).unwrap(),
                ))),
            )),
            Box::new(RandomTrees(TestRng::new(5), vocab)),
        ];
        let depths = [Depth::Fixed(8), Depth::adaptive(CostModel::linear(0.05))];
        let (mut accepted, mut drafted) = (0, 0);
        for (i, prompt) in prompts(vocab).iter().enumerate() {
            let plain = run(&mut m, None, prompt, &opts(20, Depth::default()));
            for (k, d) in drafters.iter_mut().enumerate() {
                let depth = depths[(i + k) % 2].clone();
                let spec_out = run(&mut m, Some(d.as_mut()), prompt, &opts(20, depth));
                assert_eq!(
                    spec_out.tokens,
                    plain.tokens,
                    "{:?} drafter {} prompt {i}",
                    spec.arch,
                    d.name()
                );
                let from_draft = spec_out
                    .provenance
                    .iter()
                    .filter(|&&p| p == Provenance::Draft)
                    .count();
                assert_eq!(from_draft, spec_out.stats.accepted);
                assert!(spec_out.stats.target_forwards <= plain.stats.target_forwards);
                accepted += spec_out.stats.accepted;
                drafted += spec_out.stats.drafted;
            }
        }
        eprintln!("{:?}: accepted {accepted} of {drafted} drafted", spec.arch);
        assert!(accepted > 0);
    }
}

/// A model whose logits are all NaN (corrupt weights) is a typed error in every decoding mode,
/// never token 0 read back as the argmax.
#[test]
fn a_model_with_nan_logits_is_an_error_not_tokens() {
    let file =
        GgufFile::from_bytes(TinyModel::llama().to_gguf_with_nan("output_norm.weight")).unwrap();
    let mut m = CpuModel::load(&file, None).unwrap();
    let prompt = [5, 6, 7];
    let sampled = GenerateOptions {
        sampling: SamplingParams {
            temperature: 0.8,
            top_k: 20,
            ..SamplingParams::greedy()
        },
        ..opts(4, Depth::Fixed(3))
    };
    let mut suffix = SuffixDrafter::default();
    for (o, drafter) in [
        (opts(4, Depth::Fixed(0)), None),
        (
            opts(4, Depth::Fixed(3)),
            Some(&mut suffix as &mut dyn Drafter),
        ),
        (sampled, None),
    ] {
        let got = block_on(generate_with(
            &mut m,
            drafter,
            &prompt,
            &o,
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ));
        let err = got.expect_err("NaN logits must not decode");
        assert!(
            matches!(
                err,
                GenerateError::Model(ModelError::NoUsableLogit { .. })
                    | GenerateError::Sampling(SamplingError::NoFiniteLogit)
            ),
            "{err}"
        );
    }
    let err = block_on(m.forward_argmax(&Batch::causal(&[1, 2], 0))).unwrap_err();
    assert!(matches!(err, ModelError::NoUsableLogit { row: 0 }), "{err}");
}

#[test]
fn draft_model_rolls_back_to_the_shared_prefix() {
    let draft_file = tiny(&TinyModel {
        seed: 31,
        ..TinyModel::llama()
    });
    let mut d = ModelDrafter::new(CpuModel::load(&draft_file, None).unwrap());
    let greedy = SamplingParams::greedy();
    let propose = |d: &mut ModelDrafter<CpuModel>, ctx: &[u32]| {
        block_on(d.propose(DraftRequest {
            context: ctx,
            max_nodes: 5,
            sampling: &greedy,
            cost: None,
        }))
        .unwrap()
        .tokens
    };
    let mut ctx: Vec<u32> = vec![5, 9, 12, 40, 41];
    let first = propose(&mut d, &ctx);
    assert!(!first.is_empty());
    // The target accepted one draft token, then picked something else.
    ctx.push(first[0]);
    ctx.push((first.get(1).copied().unwrap_or(0) + 1) % 200 + 2);
    let second = propose(&mut d, &ctx);
    let mut fresh = ModelDrafter::new(CpuModel::load(&draft_file, None).unwrap());
    assert_eq!(
        second,
        propose(&mut fresh, &ctx),
        "a rolled-back draft model drafts like a fresh one"
    );
    assert!(ctx.starts_with(&d.cached()[..ctx.len() - 1]));
    // A different request: everything is recomputed.
    let other = vec![7, 7, 8];
    let third = propose(&mut d, &other);
    assert_eq!(third, propose(&mut fresh, &other));

    // Prefilling a new prompt leaves it in the cache (its shared prefix reused), and drafting
    // after it equals drafting from scratch.
    let prompt = [7, 7, 9, 30, 31];
    block_on(d.prefill(&prompt)).unwrap();
    assert_eq!(d.cached(), &prompt);
    assert_eq!(d.model().cache_len(), prompt.len());
    let mut next = prompt.to_vec();
    next.push(44);
    let mut fresh = ModelDrafter::new(CpuModel::load(&draft_file, None).unwrap());
    assert_eq!(propose(&mut d, &next), propose(&mut fresh, &next));
}

#[test]
fn calibration_leaves_the_cache_as_it_was() {
    for context in [512, 40, 12] {
        let file = tiny(&TinyModel {
            context,
            ..TinyModel::llama()
        });
        let mut m = CpuModel::load(&file, None).unwrap();
        block_on(m.forward(&runahead_model::Batch::causal(&[3, 4, 5], 0))).unwrap();
        let cost = block_on(calibrate(&mut m, 1)).unwrap();
        assert_eq!(m.cache_len(), 0, "context {context}");
        let curve = cost.at(context);
        assert!(
            (1..=16).all(|r| curve.seconds(r).is_finite() && curve.seconds(r) > 0.0),
            "context {context}: {curve:?}"
        );
        assert_eq!(cost.wants_far(300), context == 512, "context {context}");

        // A prompt long enough for the second timing, behind it: the output is plain
        // decoding's, and the returned cost model has both contexts.
        let prompt: Vec<u32> = (0..(context * 3 / 5) as u32)
            .map(|i| i * 7 % 200 + 2)
            .collect();
        let mut suffix = SuffixDrafter::new(1 << 12);
        let o = opts(context / 5, Depth::adaptive(cost));
        let spec = run(&mut m, Some(&mut suffix), &prompt, &o);
        let mut fresh = CpuModel::load(&file, None).unwrap();
        let plain = run(
            &mut fresh,
            None,
            &prompt,
            &opts(context / 5, Depth::default()),
        );
        assert_eq!(spec.tokens, plain.tokens, "context {context}");
        let Depth::Adaptive(after) = spec.depth else {
            panic!("an adaptive generation returns its adaptive state");
        };
        assert!(!after.cost.wants_far(300), "context {context}: timed once");
        assert_eq!(spec.stats.calibration_seconds > 0.0, context == 512);
    }
}

/// Records what the generation loop tells a drafter, and proposes nothing.
#[derive(Default)]
struct Recorder {
    prefilled: Option<Vec<u32>>,
    /// Context length at each proposal, and whether the prompt had been prefilled by then.
    proposals: Vec<(usize, bool)>,
}

impl Drafter for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn prefill<'a>(&'a mut self, prompt: &'a [u32]) -> LocalFuture<'a, Result<(), ModelError>> {
        self.prefilled = Some(prompt.to_vec());
        ready(Ok(()))
    }
    fn propose<'a>(
        &'a mut self,
        r: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        self.proposals
            .push((r.context.len(), self.prefilled.is_some()));
        ready(Ok(Draft::empty("recorder")))
    }
}

#[test]
fn drafters_read_the_prompt_during_prefill() {
    let file = tiny(&TinyModel::llama());
    let mut m = CpuModel::load(&file, None).unwrap();
    let prompt = [5, 9, 12, 40];
    let mut r = Recorder::default();
    run(&mut m, Some(&mut r), &prompt, &opts(4, Depth::Fixed(3)));
    assert_eq!(r.prefilled.as_deref(), Some(&prompt[..]));
    assert_eq!(r.proposals.first(), Some(&(prompt.len() + 1, true)));
}

fn smollm2() -> GgufFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}\nrun scripts/fetch-models.sh"))
}

#[test]
fn drafters_equal_plain_greedy_on_smollm2() {
    let file = smollm2();
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let mut m = CpuModel::load(&file, Some(512)).unwrap();
    let prompts = [
        "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
        "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return",
        "List: apple, banana, cherry. Again: apple, banana,",
        "Once upon a time",
        "Rewrite with x renamed to value:\nx = 3\ny = x * 2\nprint(x, y)\n\nRewritten:\nvalue = 3\n",
        "Q: What is the capital of France?\nA:",
    ];
    // Self-drafting (the target as its own draft model) accepts nearly everything: it checks
    // the draft model's plumbing on a real model cheaply.
    let mut drafters: Vec<Box<dyn Drafter>> = vec![
        Box::new(NgramDrafter::default()),
        Box::new(SuffixDrafter::default()),
        Box::new(AutoDrafter::new(SuffixDrafter::default(), None)),
        Box::new(ModelDrafter::new(CpuModel::load(&file, Some(512)).unwrap())),
    ];
    let (mut forwards, mut plain_forwards) = (0, 0);
    for p in prompts {
        let ids = tok.encode(p).unwrap();
        let plain = block_on(generate(
            &mut m,
            &ids,
            &opts(24, Depth::default()),
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ))
        .unwrap();
        for d in drafters.iter_mut() {
            let s = run(&mut m, Some(d.as_mut()), &ids, &opts(24, Depth::Fixed(8)));
            assert_eq!(s.tokens, plain.tokens, "{} on {p:?}", d.name());
            if d.name() != "model" {
                forwards += s.stats.target_forwards;
                plain_forwards += plain.stats.target_forwards;
            } else {
                assert!(
                    s.stats.acceptance_rate() > 0.9,
                    "self-drafting accepts: {:?}",
                    s.stats
                );
            }
        }
    }
    eprintln!("model-free drafters: {forwards} target forwards vs {plain_forwards} plain");
    assert!(
        forwards < plain_forwards,
        "repetitive prompts must save target forwards"
    );
}

/// A follow-up turn prefills only what is new: the cache keeps the first turn's prompt and
/// output, the second prompt (the first, its answer, new text) reuses all of it, and the tokens
/// equal a generation that computes everything; a prompt that shares only a prefix reuses just
/// that prefix. With every drafter, whose own state (a draft model's cache) must follow.
#[test]
fn a_follow_up_turn_prefills_only_what_is_new() {
    let file = tiny(&TinyModel::llama());
    let drafters: Vec<(&str, Option<Box<dyn Drafter>>)> = vec![
        ("plain", None),
        ("suffix", Some(Box::new(SuffixDrafter::default()))),
        (
            "model",
            Some(Box::new(ModelDrafter::new(
                CpuModel::load(&file, None).unwrap(),
            ))),
        ),
    ];
    for (name, mut drafter) in drafters {
        let mut m = CpuModel::load(&file, None).unwrap();
        let mut reference = CpuModel::load(&file, None).unwrap();
        let mut cached = KvTokens::default();
        let o = opts(12, Depth::Fixed(4));
        let turn =
            |m: &mut CpuModel, c: &mut KvTokens, d: &mut Option<Box<dyn Drafter>>, p: &[u32]| {
                block_on(generate_cached(
                    m,
                    d.as_deref_mut(),
                    c,
                    p,
                    &o,
                    |_| false,
                    |_, _| ControlFlow::Continue(()),
                ))
                .unwrap()
            };
        let first: Vec<u32> = (0..20).map(|j| 3 + (j * 7) % 11).collect();
        let g1 = turn(&mut m, &mut cached, &mut drafter, &first);
        assert_eq!(g1.stats.cached_tokens, 0, "{name}");

        let mut second = first.clone();
        second.extend(&g1.tokens);
        second.extend([40, 41, 42, 43, 44]);
        let g2 = turn(&mut m, &mut cached, &mut drafter, &second);
        // Everything but the first answer's last token, which was emitted, never fed back.
        assert_eq!(
            g2.stats.cached_tokens,
            first.len() + g1.tokens.len() - 1,
            "{name}"
        );
        assert_eq!(
            g2.tokens,
            run(&mut reference, None, &second, &o).tokens,
            "{name}"
        );

        let third: Vec<u32> = first[..10].iter().copied().chain([90, 91, 92]).collect();
        let g3 = turn(&mut m, &mut cached, &mut drafter, &third);
        assert_eq!(g3.stats.cached_tokens, 10, "{name}");
        assert_eq!(
            g3.tokens,
            run(&mut reference, None, &third, &o).tokens,
            "{name}"
        );

        // The same prompt again: all but its last token is reused.
        let g4 = turn(&mut m, &mut cached, &mut drafter, &third);
        assert_eq!(g4.stats.cached_tokens, third.len() - 1, "{name}");
        assert_eq!(g4.tokens, g3.tokens, "{name}");
    }
}
