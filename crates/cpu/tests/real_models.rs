//! The engine on the real models in `models/` (scripts/fetch-models.sh) against the f32
//! reference: teacher-forced logits of a prompt, their argmax, and block invariance.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_model::{top_k_of, Batch, CpuModel, LanguageModel, Tokenizer};

fn open_model(file: &str) -> Arc<GgufFile> {
    let dir = std::env::var_os("RUNAHEAD_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    let path = dir.join(file);
    Arc::new(GgufFile::open(&path).unwrap_or_else(|e| {
        panic!("{e}\nThis test needs {file}: run scripts/fetch-models.sh all (or smollm2 / qwen-draft)")
    }))
}

const TEXT: &str = "The quick brown fox jumps over the lazy dog. Speculative decoding drafts a few tokens and verifies them in one forward pass, so";

struct Agreement {
    worst: f32,
    rms_diff: f32,
    clear_rows: usize,
    rows: usize,
}

/// Compares the engine with the reference on `TEXT`; asserts the argmax wherever the
/// reference's top-2 margin exceeds `margin`.
fn compare(name: &str, file: &Arc<GgufFile>, margin: f32) -> Agreement {
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let prompt = tok.encode(TEXT).unwrap();
    let t0 = Instant::now();
    let mut reference = CpuModel::load(file, Some(256)).unwrap();
    let want = block_on(reference.forward(&Batch::causal(&prompt, 0))).unwrap();
    drop(reference);
    let t1 = Instant::now();
    let mut engine = CpuEngine::load(
        file.clone(),
        &CpuOptions {
            context: Some(256),
            ..CpuOptions::default()
        },
    )
    .unwrap();
    let got = block_on(engine.forward(&Batch::causal(&prompt, 0))).unwrap();
    eprintln!(
        "{name}: {} tokens, reference {:.2} s, engine {:.2} s",
        prompt.len(),
        (t1 - t0).as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
    let mut a = Agreement {
        worst: 0.0,
        rms_diff: 0.0,
        clear_rows: 0,
        rows: prompt.len(),
    };
    let mut sq = 0f64;
    for (g, w) in got.data.iter().zip(&want.data) {
        a.worst = a.worst.max((g - w).abs());
        sq += ((g - w) as f64).powi(2);
    }
    a.rms_diff = (sq / got.data.len() as f64).sqrt() as f32;
    for row in 0..prompt.len() {
        let top = top_k_of(want.row(row), 2);
        if top[0].1 - top[1].1 > margin {
            a.clear_rows += 1;
            assert_eq!(got.argmax(row), top[0].0, "{name}: argmax of row {row}");
        }
    }
    eprintln!(
        "{name}: largest logit difference {}, rms {}, argmax equal on all {} of {} rows with a margin above {margin}",
        a.worst, a.rms_diff, a.clear_rows, a.rows
    );
    a
}

#[test]
fn smollm2_follows_the_reference() {
    let file = open_model("SmolLM2-135M-Instruct.Q4_1.gguf");
    // Measured: largest 1.64, rms 0.25 (SmolLM2 is sensitive to 8-bit activations; llama.cpp
    // sits as far from the reference, see llama_cpp_fixtures.rs).
    let a = compare("SmolLM2", &file, 1.0);
    let ok = a.worst < 2.5 && a.rms_diff < 0.35;
    assert!(ok, "SmolLM2: largest {} rms {}", a.worst, a.rms_diff);
}

#[test]
fn qwen_05b_follows_the_reference() {
    let file = open_model("Qwen2.5-Coder-0.5B-Instruct.gguf");
    // Measured: largest 0.62, rms 0.077.
    let a = compare("Qwen2.5-Coder-0.5B", &file, 0.5);
    let ok = a.worst < 1.2 && a.rms_diff < 0.15;
    assert!(ok, "Qwen: largest {} rms {}", a.worst, a.rms_diff);
}
