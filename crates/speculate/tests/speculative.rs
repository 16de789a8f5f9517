//! Speculative decoding returns exactly what plain decoding returns.

use std::ops::ControlFlow;
use std::path::PathBuf;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{CpuModel, Tokenizer};
use runahead_speculate::{
    generate, generate_with, GenerateOptions, NgramDrafter, Provenance, SamplingParams,
};

fn opts(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams::greedy(),
        ..GenerateOptions::default()
    }
}

fn run(m: &mut CpuModel, prompt: &[u32], n: usize, draft: bool) -> runahead_speculate::Generation {
    let mut drafter = NgramDrafter::default();
    let d: Option<&mut dyn runahead_speculate::Drafter> =
        if draft { Some(&mut drafter) } else { None };
    block_on(generate_with(
        m,
        d,
        prompt,
        &opts(n),
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

#[test]
fn greedy_ngram_equals_plain_on_generated_models() {
    for spec in [TinyModel::llama(), TinyModel::qwen2()] {
        let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
        let mut m = CpuModel::load(&file, None).unwrap();
        // Repetitive prompts so the drafter has something to propose.
        for seed in 0..6u32 {
            let prompt: Vec<u32> = (0..24).map(|i| 3 + (i * 7 + seed) % 11).collect();
            let plain = block_on(generate(
                &mut m,
                &prompt,
                &opts(24),
                |_| false,
                |_, _| ControlFlow::Continue(()),
            ))
            .unwrap();
            let spec_out = run(&mut m, &prompt, 24, true);
            assert_eq!(spec_out.tokens, plain.tokens, "prompt {seed}");
            assert!(spec_out.stats.target_forwards <= plain.stats.target_forwards);
        }
    }
}

#[test]
fn greedy_ngram_equals_plain_on_smollm2() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}\nrun scripts/fetch-models.sh"));
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let mut m = CpuModel::load(&file, Some(512)).unwrap();
    let prompts = [
        "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
        "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return",
        "List: apple, banana, cherry. Again: apple, banana,",
        "Once upon a time",
    ];
    let (mut drafted, mut accepted, mut forwards, mut plain_forwards) = (0, 0, 0, 0);
    for p in prompts {
        let ids = tok.encode(p).unwrap();
        let plain = run(&mut m, &ids, 32, false);
        let spec = run(&mut m, &ids, 32, true);
        assert_eq!(spec.tokens, plain.tokens, "{p:?}");
        assert_eq!(spec.provenance.len(), spec.tokens.len());
        let from_draft = spec
            .provenance
            .iter()
            .filter(|&&p| p == Provenance::Draft)
            .count();
        assert_eq!(from_draft, spec.stats.accepted);
        drafted += spec.stats.drafted;
        accepted += spec.stats.accepted;
        forwards += spec.stats.target_forwards;
        plain_forwards += plain.stats.target_forwards;
    }
    eprintln!("drafted {drafted}, accepted {accepted}, target forwards {forwards} vs {plain_forwards} plain");
    assert!(
        accepted > 0 && forwards < plain_forwards,
        "repetitive prompts must save target forwards"
    );
}
