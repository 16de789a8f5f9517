//! The exact-f32 CPU reference against an independent exact-f32 implementation in numpy
//! (scripts/fixtures/numpy_reference.py, gguf-py dequantization): same math, so the logits
//! must agree to within float rounding of different summation orders.

mod common;

use common::{fixture, ids, open_model, SMOLLM2};
use pollster::block_on;
use runahead_model::{Batch, CpuModel, LanguageModel};

/// Both sides are f32 with different reduction orders over 30 layers.
const TOL: f32 = 0.02;

#[test]
fn smollm2_matches_the_numpy_reference() {
    let file = open_model(SMOLLM2.0);
    let mut m = CpuModel::load(&file, Some(1024)).unwrap();
    let fx = fixture(SMOLLM2.1, "numpy_reference.json");
    assert_eq!(fx["kv_f16"], true, "the engine keeps K/V at f16 precision");
    let mut worst = 0f32;
    for case in fx["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let tokens = ids(&case["tokens"]);
        let mut input = prompt.clone();
        input.extend_from_slice(&tokens[..tokens.len() - 1]);
        m.truncate(0);
        let logits = block_on(m.forward(&Batch::causal(&input, 0))).unwrap();
        let positions = ids(&case["positions"]);
        for (pos, expected) in positions.iter().zip(case["logits"].as_array().unwrap()) {
            let row = logits.row(prompt.len() - 1 + *pos as usize);
            for e in expected.as_array().unwrap() {
                let (id, want) = (
                    e[0].as_u64().unwrap() as usize,
                    e[1].as_f64().unwrap() as f32,
                );
                let d = (row[id] - want).abs();
                worst = worst.max(d);
                assert!(
                    d <= TOL,
                    "position {pos}, token {id}: {} vs numpy {want}",
                    row[id]
                );
            }
        }
    }
    eprintln!("largest difference from numpy: {worst}");
}
