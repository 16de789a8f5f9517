//! The CPU reference against llama.cpp's greedy continuations (tests/fixtures/*/greedy.json,
//! made by scripts/fixtures/make_fixtures.py).
//!
//! llama.cpp's CPU backend quantizes activations to 8 bits inside quantized matrix products
//! and keeps its KV cache in f16; runahead's reference does f32 math. Their logits therefore
//! differ by a small amount, and where llama.cpp's top two logits are closer than that, either
//! engine may pick either token. So:
//! - teacher-forced (llama.cpp's tokens fed back), every position whose llama.cpp top-2 margin
//!   is at least `MARGIN` must have the same argmax, and the logits of llama.cpp's top 8 tokens
//!   must be within `LOGIT_TOL` of llama.cpp's;
//! - free-running greedy output must equal llama.cpp's up to the first position whose margin
//!   is below `MARGIN` (after a near-tie the texts may legitimately part).

mod common;

use common::{fixture, ids, open_model, QWEN_05B, SMOLLM2};
use pollster::block_on;
use runahead_model::{Batch, CpuModel, LanguageModel, Tokenizer};

/// Top-2 logit margin below which the engines may disagree on the argmax.
const MARGIN: f32 = 0.5;
/// Largest allowed difference of a top-8 logit between runahead and llama.cpp.
const LOGIT_TOL: f32 = 1.5;

struct Case {
    prompt: String,
    prompt_ids: Vec<u32>,
    tokens: Vec<u32>,
    /// Per generated position: llama.cpp's top logits, best first.
    top: Vec<Vec<(u32, f32)>>,
}

fn cases(model_id: &str) -> Vec<Case> {
    let fx = fixture(model_id, "greedy.json");
    fx["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            prompt: c["prompt"].as_str().unwrap().to_owned(),
            prompt_ids: ids(&c["prompt_ids"]),
            tokens: ids(&c["tokens"]),
            top: c["top"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pos| {
                    pos.as_array()
                        .unwrap()
                        .iter()
                        .map(|e| (e[0].as_u64().unwrap() as u32, e[1].as_f64().unwrap() as f32))
                        .collect()
                })
                .collect(),
        })
        .collect()
}

fn margin(top: &[(u32, f32)]) -> f32 {
    top[0].1 - top[1].1
}

fn check(model: (&str, &str)) {
    let (min_margin, logit_tol) = (MARGIN, LOGIT_TOL);
    let file = open_model(model.0);
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let mut m = CpuModel::load(&file, Some(1024)).unwrap();
    let cases = cases(model.1);
    assert!(cases.len() >= 8);
    let mut report = Vec::new();
    let mut worst_logit = 0f32;
    let mut exact = 0;
    let mut failures: Vec<String> = Vec::new();
    for case in &cases {
        assert_eq!(
            tok.encode(&case.prompt).unwrap(),
            case.prompt_ids,
            "prompt tokens of {:?}",
            case.prompt
        );
        let n = case.tokens.len();
        assert!(n >= 48);

        // Teacher-forced: one block with the prompt and llama.cpp's tokens.
        m.truncate(0);
        let mut input = case.prompt_ids.clone();
        input.extend_from_slice(&case.tokens[..n - 1]);
        let logits = block_on(m.forward(&Batch::causal(&input, 0))).unwrap();
        let p = case.prompt_ids.len();
        for i in 0..n {
            let row = logits.row(p - 1 + i);
            let top = &case.top[i];
            assert_eq!(
                top[0].0, case.tokens[i],
                "fixture top-1 is the generated token"
            );
            for &(id, l) in top {
                let d = (row[id as usize] - l).abs();
                worst_logit = worst_logit.max(d);
                if d > logit_tol {
                    let ours = row[id as usize];
                    failures.push(format!(
                        "{:?} position {i}: logit of {id} is {ours} vs llama.cpp {l}",
                        case.prompt
                    ));
                }
            }
            let ours = logits.argmax(p - 1 + i);
            if margin(top) >= min_margin && ours != case.tokens[i] {
                failures.push(format!(
                    "{:?} position {i}: argmax {ours} vs llama.cpp {} (margin {})",
                    case.prompt,
                    case.tokens[i],
                    margin(top)
                ));
            }
        }

        // Free-running greedy, up to the first near-tie (past it the texts may part, so
        // generating further would check nothing).
        let must_match = case
            .top
            .iter()
            .position(|t| margin(t) < min_margin)
            .unwrap_or(n);
        m.truncate(0);
        let l = block_on(m.forward(&Batch::causal(&case.prompt_ids, 0))).unwrap();
        let mut next = l.argmax(l.n_rows() - 1);
        let mut ours = Vec::new();
        while ours.len() < must_match {
            ours.push(next);
            if ours.len() == must_match {
                break;
            }
            let pos = m.cache_len();
            next = block_on(m.forward_argmax(&Batch::causal(&[next], pos))).unwrap()[0];
        }
        if ours[..] != case.tokens[..must_match] {
            failures.push(format!(
                "{:?}: greedy text differs before the first near-tie at {must_match}",
                case.prompt
            ));
        }
        exact += (must_match == n && ours[..] == case.tokens[..]) as usize;
        report.push(format!(
            "first near-tie at {must_match:>2}/{n}: {:?}",
            case.prompt.chars().take(40).collect::<String>()
        ));
    }
    eprintln!("{}: {exact}/{} continuations identical, largest top-8 logit difference {worst_logit:.4}\n{}", model.1, cases.len(), report.join("\n"));
    assert!(
        failures.is_empty(),
        "{} mismatches with llama.cpp:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_reproduces_llama_cpp() {
    check(SMOLLM2);
}

#[test]
fn qwen2_0_5b_reproduces_llama_cpp() {
    check(QWEN_05B);
}
