//! Each architecture's f32 reference against llama.cpp's logits on the same random-weight
//! model (tests/fixtures/arch/*.json, made by scripts/fixtures/make_arch_fixtures.sh): the
//! model is written again here from its seed, its sha256 checked against the fixture's.
//!
//! Teacher-forced (the prompt and llama.cpp's greedy tokens fed in one causal block), every
//! logit of every position (23 positions x 266 tokens) must be within `LOGIT_TOL` of
//! llama.cpp's, their rms difference within `RMS_TOL`, and the argmax equal wherever
//! llama.cpp's top-2 margin is at least `MARGIN`. llama.cpp quantizes activations to 8 bits
//! inside quantized products (and computes GELU through an f16 table); the reference computes
//! in f32. The logits spread with a standard deviation of about 14; measured: max 0.47 / rms
//! 0.074 (llama3), 0.26 / 0.053 (gemma3), 0.22 / 0.024 (phi3), 0.12 / 0.021 (qwen3). Without
//! `rope_freqs.weight`, or without gemma3's window, the logits part by whole units.

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::{sha256_hex, TinyModel};
use runahead_model::{argmax, Batch, CpuModel, LanguageModel};
use serde_json::Value;

/// Largest allowed difference of any logit from llama.cpp's.
pub const LOGIT_TOL: f32 = 0.75;
/// Largest allowed rms difference over all logits.
pub const RMS_TOL: f64 = 0.1;
/// Top-2 margin of llama.cpp above which the argmax must agree.
pub const MARGIN: f32 = 0.05;

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/arch")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check(name: &str, model: TinyModel) {
    let fx = fixture(name);
    let bytes = model.to_gguf();
    assert_eq!(
        sha256_hex(&bytes),
        fx["sha256"].as_str().unwrap(),
        "{name}: the generated model is not the one the fixture was made on: rerun scripts/fixtures/make_arch_fixtures.sh"
    );
    let file = GgufFile::from_bytes(bytes).unwrap();
    let n_ctx = fx["n_ctx"].as_u64().unwrap() as usize;
    let mut reference = CpuModel::load(&file, Some(n_ctx)).unwrap();
    let (prompt, tokens) = (ids(&fx["prompt"]), ids(&fx["tokens"]));
    let mut input = prompt.clone();
    input.extend_from_slice(&tokens[..tokens.len() - 1]);
    let logits = block_on(reference.forward(&Batch::causal(&input, 0))).unwrap();
    let expected = fx["logits"].as_array().unwrap();
    assert_eq!(expected.len(), input.len());
    let (mut worst, mut sum_sq, mut count) = (0f32, 0f64, 0usize);
    for (i, row) in expected.iter().enumerate() {
        let want: Vec<f32> = row
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let got = logits.row(i);
        for (a, b) in got.iter().zip(&want) {
            worst = worst.max((a - b).abs());
            sum_sq += f64::from((a - b) * (a - b));
            count += 1;
        }
        let mut sorted = want.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        if sorted[0] - sorted[1] >= MARGIN {
            assert_eq!(
                argmax(got),
                argmax(&want),
                "{name}: argmax differs at row {i}"
            );
        }
    }
    let rms = (sum_sq / count as f64).sqrt();
    println!("{name}: max |reference - llama.cpp| = {worst:.4}, rms {rms:.4} over {count} logits");
    assert!(
        worst <= LOGIT_TOL,
        "{name}: logits differ by {worst} (tolerance {LOGIT_TOL})"
    );
    assert!(
        rms <= RMS_TOL,
        "{name}: rms difference {rms} (tolerance {RMS_TOL})"
    );
}

#[test]
fn llama_with_rope_freqs_matches_llama_cpp() {
    check("llama3", TinyModel::llama3());
}

#[test]
fn qwen3_matches_llama_cpp() {
    check("qwen3", TinyModel::qwen3());
}

#[test]
fn gemma3_matches_llama_cpp() {
    check("gemma3", TinyModel::gemma3());
}

#[test]
fn phi3_matches_llama_cpp() {
    check("phi3", TinyModel::phi3());
}

/// What an engine does not run is refused by name, never skipped: the steps a llama-style
/// engine lacks, a tensor no plan reads, a RoPE scaling type not implemented, an unknown
/// architecture.
#[test]
fn what_is_not_implemented_is_refused_by_name() {
    use runahead_gguf::Value;
    use runahead_model::{ModelConfig, ModelError, Plan, Step};

    let open = |bytes: Vec<u8>| GgufFile::from_bytes(bytes).unwrap();
    // An engine that runs llama-style layers only (ModelConfig::from_file) names the step.
    for (model, step) in [
        (TinyModel::llama3(), "rope_freqs"),
        (TinyModel::qwen3(), "attention.key_length"),
        (TinyModel::gemma3(), "attention.key_length"),
        (TinyModel::phi3(), "fused attn_qkv"),
    ] {
        let file = open(model.to_gguf());
        match ModelConfig::from_file(&file) {
            Err(e @ ModelError::NotImplemented { .. }) => {
                assert!(e.to_string().contains(step), "{e}")
            }
            other => panic!("{}: {other:?}", model.arch_name()),
        }
        let plan = Plan::from_header(&file.header).unwrap();
        plan.require("the reference", Step::ALL).unwrap();
        plan.check_header(&file.header).unwrap();
    }
    let gemma = Plan::from_header(&open(TinyModel::gemma3().to_gguf()).header).unwrap();
    assert_eq!(
        gemma.steps(),
        [
            Step::HeadDim,
            Step::QkNorm,
            Step::PostNorms,
            Step::GeluTanh,
            Step::EmbeddingScale,
            Step::SlidingWindow,
            Step::LayerRope,
            Step::LogitSoftcap
        ]
    );
    let windows: Vec<_> = gemma.layers.iter().map(|l| l.attention.window).collect();
    assert_eq!(windows, [Some(8), None]);

    // A tensor that no plan reads, in a layer or at the top.
    for extra in ["blk.1.attn_sinks.weight", "rope_freqs.weight"] {
        let mut w = runahead_gguf::GgufWriter::new();
        let file = open(TinyModel::qwen3().to_gguf());
        for (k, v) in file.header.metadata.iter() {
            w.meta(k, v.clone());
        }
        for t in &file.header.tensors {
            let bytes = file.tensor_bytes(t).to_vec();
            w.tensor(&t.name, &t.shape, t.ty, bytes);
        }
        w.tensor_f32(extra, &[64], &[1.0; 64]);
        let file = open(w.to_bytes());
        match CpuModel::load(&file, Some(16)).err() {
            Some(ModelError::UnknownTensor { name, .. }) => assert_eq!(name, extra),
            other => panic!("{extra}: {other:?}"),
        }
    }

    // RoPE scaling types other than none and linear.
    let yarn = TinyModel::llama()
        .to_gguf_with_meta(&[("llama.rope.scaling.type", Value::String("yarn".into()))]);
    match CpuModel::load(&open(yarn), Some(16)).err() {
        Some(ModelError::UnsupportedKey { key, value, .. }) => {
            assert_eq!(
                (key.as_str(), value.as_str()),
                ("llama.rope.scaling.type", "yarn")
            )
        }
        other => panic!("yarn: {other:?}"),
    }
    let other = TinyModel::llama()
        .to_gguf_with_meta(&[("general.architecture", Value::String("mamba".into()))]);
    assert!(matches!(
        CpuModel::load(&open(other), Some(16)).err(),
        Some(ModelError::UnsupportedArchitecture(a)) if a == "mamba"
    ));
}
