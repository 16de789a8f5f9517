//! The engine against llama.cpp's teacher-forced logits (tests/fixtures/*/greedy.json, made by
//! scripts/fixtures/make_fixtures.py), with the bounds the f32 reference meets there
//! (crates/model/tests/greedy_fixtures.rs). llama.cpp quantizes activations to 8 bits inside
//! its products too; measured on SmolLM2's first 3 cases, the rms difference of the top-8
//! logits is 0.24 engine-llama.cpp, 0.23 reference-llama.cpp, 0.23 engine-reference.

use std::path::PathBuf;
use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_model::{Batch, LanguageModel};
use serde_json::Value;

/// Top-2 margin of llama.cpp above which the argmax must agree.
const MARGIN: f32 = 0.5;
/// Largest allowed difference of one of llama.cpp's top-8 logits.
const LOGIT_TOL: f32 = 1.5;
/// Cases per model (of 13): the test budget is seconds.
const CASES: usize = 4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ids(v: &Value) -> Vec<u32> {
    let items = v.as_array().expect("an array of ids");
    items
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

fn check(file: &str, fixture: &str, n_cases: usize, (margin, logit_tol): (f32, f32)) {
    let dir = std::env::var_os("RUNAHEAD_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models"));
    let f = GgufFile::open(dir.join(file))
        .unwrap_or_else(|e| panic!("{e}: this test needs {file}, run scripts/fetch-models.sh"));
    let path = root()
        .join("tests/fixtures")
        .join(fixture)
        .join("greedy.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let fx: Value = serde_json::from_str(&text).unwrap();
    let options = CpuOptions {
        context: Some(1024),
        ..Default::default()
    };
    let mut engine = CpuEngine::load(Arc::new(f), &options).unwrap();
    let mut worst = 0f32;
    let cases = fx["cases"].as_array().unwrap();
    for (c, case) in cases.iter().enumerate().take(n_cases) {
        let prompt = ids(&case["prompt_ids"]);
        let tokens = ids(&case["tokens"]);
        let mut input = prompt.clone();
        input.extend_from_slice(&tokens[..tokens.len() - 1]);
        engine.truncate(0);
        let logits = block_on(engine.forward(&Batch::causal(&input, 0))).unwrap();
        for (i, top) in case["top"].as_array().unwrap().iter().enumerate() {
            let row = logits.row(prompt.len() - 1 + i);
            let top: Vec<(usize, f32)> = top
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e[0].as_u64().unwrap() as usize,
                        e[1].as_f64().unwrap() as f32,
                    )
                })
                .collect();
            for &(id, want) in &top {
                let d = (row[id] - want).abs();
                worst = worst.max(d);
                assert!(
                    d <= logit_tol,
                    "case {c} position {i}: logit of {id} is {} vs llama.cpp {want}",
                    row[id]
                );
            }
            if top[0].1 - top[1].1 >= margin {
                let ours = runahead_model::argmax(row) as usize;
                assert_eq!(ours, top[0].0, "case {c} position {i}: argmax");
            }
        }
    }
    eprintln!(
        "{file}: {} of {} cases, largest top-8 logit difference from llama.cpp {worst}",
        n_cases.min(cases.len()),
        cases.len()
    );
}

#[test]
fn smollm2_sits_near_llama_cpp() {
    check(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "smollm2-135m",
        CASES,
        (MARGIN, LOGIT_TOL),
    );
}

#[test]
fn qwen_05b_sits_near_llama_cpp() {
    check(
        "Qwen2.5-Coder-0.5B-Instruct.gguf",
        "qwen2.5-coder-0.5b",
        CASES,
        (MARGIN, LOGIT_TOL),
    );
}

/// Gemma's logits run about twice as large as SmolLM2's and Qwen's (its top logits 30 to 40),
/// and the differences from llama.cpp's with them: measured over all 13 cases, the largest
/// top-8 logit difference is 1.63 (the f32 reference's 1.79,
/// crates/model/tests/gemma_fixture.rs, whose argmax differs from llama.cpp's at a margin of
/// 0.52).
const GEMMA_MARGIN: f32 = 0.75;
const GEMMA_LOGIT_TOL: f32 = 2.0;

/// Gemma-3-270M (sliding-window layers of 512 slots, none reached by these prompts of 60-odd
/// positions: the window is checked on generated models, tests/engine.rs), every case.
#[test]
fn gemma3_270m_sits_near_llama_cpp() {
    check(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma-3-270m",
        usize::MAX,
        (GEMMA_MARGIN, GEMMA_LOGIT_TOL),
    );
}
