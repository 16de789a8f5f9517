//! Stop strings through the generation loop ([`generate_text`]): the generation ends at the
//! token that completes the first stop string, the text and the streamed pieces stop before it,
//! and greedy speculative decoding with a stop string equals plain decoding with it, for every
//! drafter.

use std::ops::ControlFlow;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{CpuModel, Tokenizer};
use runahead_speculate::{
    generate_text, AutoDrafter, Depth, Drafter, GenerateOptions, Generation, KvTokens,
    ModelDrafter, NgramDrafter, SamplingParams, StopReason, StopStrings, SuffixDrafter,
};

/// The tiny model answers this with "9" and then "$" over and over.
const PROMPT: &[u32] = &[85, 32, 69, 106, 53, 90, 37, 74, 111, 58];

struct Run {
    generation: Generation,
    pieces: String,
    tokens_streamed: usize,
}

fn run(file: &GgufFile, drafter: Option<&mut dyn Drafter>, stop: &StopStrings) -> Run {
    let tokenizer = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let mut model = CpuModel::load(file, Some(128)).unwrap();
    let opts = GenerateOptions {
        max_tokens: 40,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    };
    let (mut pieces, mut tokens_streamed) = (String::new(), 0);
    let generation = block_on(generate_text(
        &mut model,
        drafter,
        &mut KvTokens::default(),
        PROMPT,
        &opts,
        &tokenizer,
        stop,
        |piece| {
            pieces.push_str(piece.text);
            tokens_streamed += piece.token.is_some() as usize;
            ControlFlow::Continue(())
        },
    ))
    .unwrap();
    Run {
        generation,
        pieces,
        tokens_streamed,
    }
}

#[test]
fn stop_strings_end_the_text_and_every_drafter_agrees() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let tokenizer = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let full = run(&file, None, &StopStrings::default());
    assert_eq!(full.generation.stop, StopReason::MaxTokens);
    assert_eq!(full.generation.text, None);
    // Without stop strings the pieces spell what the tokens decode to.
    let full_text = tokenizer.decode(&full.generation.tokens);
    assert_eq!(full.pieces, full_text);

    // A stop string 20 tokens long, so that it spans tokens and speculation accepts its
    // tokens in drafts (the generation must end inside a step's accepted run).
    let stop_string = "$".repeat(20);
    let at = full_text
        .find(&stop_string)
        .expect("the tiny model's output repeats itself");
    assert!(at > 0, "{full_text:?}");
    let stops = StopStrings::new(vec!["never in the output".into(), stop_string.clone()]).unwrap();

    let plain = run(&file, None, &stops);
    assert_eq!(plain.generation.stop, StopReason::Stop);
    assert_eq!(plain.generation.text.as_deref(), Some(&full_text[..at]));
    assert_eq!(plain.pieces, full_text[..at]);
    // It stopped at the first token whose text completes the stop string.
    let n = plain.generation.tokens.len();
    assert_eq!(plain.generation.tokens, full.generation.tokens[..n]);
    assert!(tokenizer
        .decode(&plain.generation.tokens)
        .contains(&stop_string));
    assert!(!tokenizer
        .decode(&plain.generation.tokens[..n - 1])
        .contains(&stop_string));
    assert_eq!(plain.tokens_streamed, n);

    let drafters: Vec<(&str, Box<dyn Drafter>)> = vec![
        ("ngram", Box::new(NgramDrafter::default())),
        ("suffix", Box::new(SuffixDrafter::default())),
        (
            "model",
            Box::new(ModelDrafter::new(CpuModel::load(&file, None).unwrap())),
        ),
        (
            "auto",
            Box::new(AutoDrafter::new(
                SuffixDrafter::default(),
                Some(Box::new(ModelDrafter::new(
                    CpuModel::load(&file, None).unwrap(),
                ))),
            )),
        ),
    ];
    for (name, mut drafter) in drafters {
        let spec = run(&file, Some(drafter.as_mut()), &stops);
        assert_eq!(spec.generation.tokens, plain.generation.tokens, "{name}");
        assert_eq!(spec.generation.text, plain.generation.text, "{name}");
        assert_eq!(spec.pieces, plain.pieces, "{name}");
        assert_eq!(spec.generation.stop, StopReason::Stop, "{name}");
        assert!(spec.generation.stats.drafted > 0, "{name} never drafted");
    }
}
