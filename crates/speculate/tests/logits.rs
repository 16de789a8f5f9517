//! Penalties, logit bias and log-probabilities through the generation loop: greedy
//! speculative decoding with them gives plain decoding's tokens and log-probabilities, because
//! each verified row is processed with the counts of the path that leads to it. Each streamed
//! piece carries its token's log-probability, the one the result holds for it.

use std::ops::ControlFlow;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{CpuModel, Tokenizer};
use runahead_speculate::{
    generate_text, generate_with, Depth, Drafter, GenerateError, GenerateOptions, Generation,
    KvTokens, LogitError, LogitOptions, NgramDrafter, SamplingParams, StopStrings, SuffixDrafter,
    TokenLogprob,
};

const PROMPT: [u32; 8] = [5, 77, 120, 3, 260, 5, 77, 120];

fn file() -> GgufFile {
    GgufFile::from_bytes(TinyModel::llama().to_gguf()).expect("tiny GGUF")
}

fn run(
    file: &GgufFile,
    drafter: Option<&mut dyn Drafter>,
    logits: &LogitOptions,
    sampling: SamplingParams,
) -> Result<Generation, GenerateError> {
    let mut model = CpuModel::load(file, Some(96)).expect("tiny model");
    let opts = GenerateOptions {
        max_tokens: 40,
        sampling,
        depth: Depth::Fixed(6),
        logits: logits.clone(),
        ..GenerateOptions::default()
    };
    block_on(generate_with(
        &mut model,
        drafter,
        &PROMPT,
        &opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
}

fn every_drafter(
    file: &GgufFile,
    logits: &LogitOptions,
    sampling: &SamplingParams,
) -> Vec<Generation> {
    let mut ngram = NgramDrafter::default();
    let mut suffix = SuffixDrafter::new(1 << 12);
    let drafters: [Option<&mut dyn Drafter>; 3] = [None, Some(&mut ngram), Some(&mut suffix)];
    drafters
        .into_iter()
        .map(|d| run(file, d, logits, sampling.clone()).expect("generates"))
        .collect()
}

fn penalized() -> LogitOptions {
    LogitOptions {
        frequency_penalty: 0.8,
        presence_penalty: 0.5,
        logit_bias: vec![(36, 2.0), (7, -100.0)],
        logprobs: Some(4),
    }
}

#[test]
fn greedy_with_penalties_and_bias_speculative_equals_plain() {
    let file = file();
    let greedy = SamplingParams::greedy();
    let runs = every_drafter(&file, &penalized(), &greedy);
    let plain = &runs[0];
    // The options change the output (so the comparison below can fail).
    let unpenalized = run(&file, None, &LogitOptions::default(), greedy.clone()).expect("plain");
    assert_ne!(plain.tokens, unpenalized.tokens);
    assert!(!plain.tokens.contains(&7), "a banned token was generated");
    let drafted: usize = runs[1..].iter().map(|g| g.stats.accepted).sum();
    assert!(
        drafted > 0,
        "no draft token was accepted: the test shows nothing"
    );
    for g in &runs[1..] {
        assert_eq!(g.tokens, plain.tokens);
        assert_eq!(g.logprobs.len(), g.tokens.len());
        for (a, b) in g.logprobs.iter().zip(&plain.logprobs) {
            assert_eq!(a.token, b.token);
            assert!((a.logprob - b.logprob).abs() < 1e-5, "{a:?} vs {b:?}");
            assert_eq!(
                a.top.iter().map(|t| t.0).collect::<Vec<_>>(),
                b.top.iter().map(|t| t.0).collect::<Vec<_>>()
            );
        }
    }
    // Greedy picks the most likely processed token: its log-probability is the top one.
    for lp in &plain.logprobs {
        assert_eq!(lp.top.len(), 4);
        assert_eq!(lp.top[0], (lp.token, lp.logprob));
        assert!(lp.top.windows(2).all(|w| w[0].1 >= w[1].1));
    }
}

#[test]
fn logprobs_alone_leave_the_tokens_unchanged() {
    let file = file();
    let only = LogitOptions {
        logprobs: Some(0),
        ..LogitOptions::default()
    };
    for sampling in [
        SamplingParams::greedy(),
        SamplingParams {
            temperature: 0.8,
            seed: 5,
            ..SamplingParams::greedy()
        },
    ] {
        let without = run(&file, None, &LogitOptions::default(), sampling.clone()).expect("plain");
        let with = run(&file, None, &only, sampling).expect("with logprobs");
        assert_eq!(with.tokens, without.tokens);
        assert!(without.logprobs.is_empty());
        assert_eq!(with.logprobs.len(), with.tokens.len());
        assert!(with
            .logprobs
            .iter()
            .all(|lp| lp.top.is_empty() && lp.logprob <= 0.0 && lp.logprob.is_finite()));
    }
}

#[test]
fn out_of_range_options_are_refused() {
    let file = file();
    let bad = LogitOptions {
        presence_penalty: 3.0,
        ..LogitOptions::default()
    };
    let e = run(&file, None, &bad, SamplingParams::greedy()).unwrap_err();
    assert!(matches!(
        e,
        GenerateError::Logits(LogitError::Penalty("presence_penalty", _))
    ));
}

#[test]
fn each_streamed_piece_carries_its_tokens_logprob() {
    let file = file();
    let tokenizer = Tokenizer::from_metadata(&file.header.metadata).expect("tokenizer");
    let opts = GenerateOptions {
        max_tokens: 40,
        depth: Depth::Fixed(6),
        logits: penalized(),
        ..GenerateOptions::default()
    };
    let mut ngram = NgramDrafter::default();
    let drafters: [Option<&mut dyn Drafter>; 2] = [None, Some(&mut ngram)];
    let mut streams = Vec::new();
    for drafter in drafters {
        let mut model = CpuModel::load(&file, Some(96)).expect("tiny model");
        let mut streamed: Vec<Option<TokenLogprob>> = Vec::new();
        let g = block_on(generate_text(
            &mut model,
            drafter,
            &mut KvTokens::default(),
            &PROMPT,
            &opts,
            &tokenizer,
            &StopStrings::default(),
            |piece| {
                if piece.token.is_some() {
                    streamed.push(piece.logprob.cloned());
                }
                ControlFlow::Continue(())
            },
        ))
        .expect("generates");
        let streamed: Vec<TokenLogprob> = streamed
            .into_iter()
            .map(|l| l.expect("a logprob"))
            .collect();
        assert_eq!(streamed, g.logprobs);
        assert_eq!(streamed.len(), g.tokens.len());
        streams.push((g.stats.accepted, streamed));
    }
    assert!(
        streams[1].0 > 0,
        "no draft token was accepted: the test shows nothing"
    );
    for (a, b) in streams[1].1.iter().zip(&streams[0].1) {
        assert_eq!(a.token, b.token);
        assert!((a.logprob - b.logprob).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}
