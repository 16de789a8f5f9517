//! Token ids must equal llama.cpp's for the committed fixture strings (see
//! scripts/fixtures/make_fixtures.py), and decoding must give the text back.

mod common;

use common::{fixture, ids, open_model, QWEN_05B, SMOLLM2};
use runahead_model::Tokenizer;

fn check(model: (&str, &str)) {
    let file = open_model(model.0);
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let fx = fixture(model.1, "tokenizer.json");
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 40, "fixture set has {} strings", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        let got = tok.encode(text).unwrap();
        if got != expected {
            failures.push(format!(
                "{text:?}\n  llama.cpp {expected:?}\n  runahead  {got:?}"
            ));
            continue;
        }
        // Round trip (control tokens render as their text, as llama.cpp's special=true does).
        assert_eq!(tok.decode(&got), text, "decode of {text:?}");
        if let Some(d) = case.get("detokenized").and_then(|d| d.as_str()) {
            assert_eq!(
                tok.decode(&got),
                d,
                "llama.cpp detokenized {text:?} differently"
            );
        }
        // Streaming decode gives the same text, one token at a time.
        let mut dec = tok.decoder();
        let mut streamed: String = got.iter().map(|&t| dec.push(t)).collect();
        streamed.push_str(&dec.finish());
        assert_eq!(streamed, text, "streaming decode of {text:?}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} strings differ from llama.cpp:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_matches_llama_cpp() {
    check(SMOLLM2);
}

#[test]
fn qwen2_matches_llama_cpp() {
    check(QWEN_05B);
}

#[test]
fn streaming_decode_holds_back_partial_characters() {
    let file = open_model(SMOLLM2.0);
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    // An emoji is split over several byte tokens; no piece may be invalid UTF-8.
    let ids = tok.encode("a 🧠 b").unwrap();
    let mut dec = tok.decoder();
    let pieces: Vec<String> = ids.iter().map(|&t| dec.push(t)).collect();
    assert!(pieces.iter().all(|p| !p.contains('\u{fffd}')), "{pieces:?}");
    assert_eq!(pieces.concat() + &dec.finish(), "a 🧠 b");
}
