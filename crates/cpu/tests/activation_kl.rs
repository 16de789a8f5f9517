//! The cost of the engine's 8-bit activations, measured on a real model: over 2,040 positions
//! of English text (the repository's docs, 8 chunks of 512 tokens, each chunk's second half
//! scored, as llama-perplexity's KL-divergence mode scores them), the top-1 agreement of the
//! engine's next-token distribution with the f32 reference's and their mean KL divergence
//! KL(reference || engine). With `KL_BASE` set, the reference's log-probabilities are written
//! there in llama-perplexity's `--kl-divergence-base` format, so that
//! `llama-perplexity -m MODEL --kl-divergence-base $KL_BASE --kl-divergence` gives the same
//! figures for llama.cpp's CPU backend against the same reference.
//!
//! `#[ignore]`d (minutes of the reference): `KL_MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
//! KL_BASE=/tmp/base.bin cargo test -p runahead-cpu --test activation_kl -- --ignored --nocapture`;
//! `KL_SKIP_CHUNKS=8` scores the next 4,096 tokens of the text instead.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_model::{Batch, CpuModel, LanguageModel, Tokenizer};

const N_CTX: usize = 512;
const N_CHUNK: usize = 8;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Log-softmax of `row` in f64.
fn log_probs(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let lse = max + sum.ln();
    row.iter().map(|&v| v as f64 - lse).collect()
}

/// One row as llama-perplexity stores it (`log_softmax` of tools/perplexity/perplexity.cpp):
/// the scale and the smallest log-probability as two f32, two u16 of padding, then each
/// log-probability quantized to 16 bits over the 16 units below the largest logit.
fn base_row(row: &[f32], out: &mut Vec<u8>) {
    let nv = 2 * row.len().div_ceil(2) + 4;
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = row
        .iter()
        .copied()
        .fold(f32::INFINITY, f32::min)
        .max(max - 16.0);
    let sum_exp: f64 = row.iter().map(|&v| f64::from((v - max).exp())).sum();
    let log_sum_exp = sum_exp.ln() as f32;
    let min_log_prob = min - max - log_sum_exp;
    let scale = (max - min) / 65535.0;
    let mut q = vec![0u16; nv];
    q[0..2].copy_from_slice(&[scale.to_bits() as u16, (scale.to_bits() >> 16) as u16]);
    let m = min_log_prob.to_bits();
    q[2..4].copy_from_slice(&[m as u16, (m >> 16) as u16]);
    if scale != 0.0 {
        let inv = 1.0 / scale;
        for (d, &v) in q[4..].iter_mut().zip(row) {
            *d = if v > min {
                (inv * (v - min)).round_ties_even() as u16
            } else {
                0
            };
        }
    }
    out.extend(q.iter().flat_map(|v| v.to_le_bytes()));
}

#[test]
#[ignore = "a measurement: minutes of the f32 reference on a real model (KL_MODEL)"]
fn activation_kl_against_the_reference() {
    let name = std::env::var("KL_MODEL").unwrap_or("SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let path = root().join("models").join(&name);
    let file =
        Arc::new(GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let mut text = String::new();
    for doc in [
        "design.md",
        "cpu-engine.md",
        "gpu-engine.md",
        "speculative.md",
        "browser.md",
    ] {
        text += &std::fs::read_to_string(root().join("docs").join(doc)).unwrap();
    }
    let bos = tok.encode("").unwrap(); // [BOS] when the model adds one
                                       // `KL_SKIP_CHUNKS=N` scores the text from its (N * 512)-th token: another sample of positions.
    let skip = std::env::var("KL_SKIP_CHUNKS").map_or(0, |s| s.parse::<usize>().unwrap());
    let tokens = tok.encode(&text).unwrap()[bos.len() + skip * N_CTX..].to_vec();
    assert!(
        tokens.len() >= N_CTX * N_CHUNK,
        "{} tokens of text",
        tokens.len()
    );
    let options = CpuOptions {
        context: Some(N_CTX),
        ..Default::default()
    };
    let mut engine = CpuEngine::load(file.clone(), &options).unwrap();
    let mut reference = CpuModel::load(&file, Some(N_CTX)).unwrap();
    let vocab = engine.config().vocab_size;
    let mut base = Vec::new();
    base.extend_from_slice(b"_logits_");
    for v in [N_CTX, vocab, N_CHUNK] {
        base.extend_from_slice(&(v as i32).to_le_bytes());
    }
    for &t in &tokens[..N_CTX * N_CHUNK] {
        base.extend_from_slice(&(t as i32).to_le_bytes());
    }
    let (mut same, mut kl_sum, mut count) = (0usize, 0f64, 0usize);
    for c in 0..N_CHUNK {
        let mut chunk = tokens[c * N_CTX..(c + 1) * N_CTX].to_vec();
        if let Some(&b) = bos.first() {
            chunk[0] = b;
        }
        engine.truncate(0);
        reference.truncate(0);
        let ours = block_on(engine.forward(&Batch::causal(&chunk, 0))).unwrap();
        let exact = block_on(reference.forward(&Batch::causal(&chunk, 0))).unwrap();
        for row in N_CTX / 2..N_CTX - 1 {
            let (p, q) = (log_probs(exact.row(row)), log_probs(ours.row(row)));
            kl_sum += p
                .iter()
                .zip(&q)
                .map(|(a, b)| a.exp() * (a - b))
                .sum::<f64>();
            same += usize::from(exact.argmax(row) == ours.argmax(row));
            count += 1;
            base_row(exact.row(row), &mut base);
        }
        eprintln!(
            "chunk {c}: top-1 {same}/{count}, mean KL {:.6}",
            kl_sum / count as f64
        );
    }
    println!(
        "{name}: engine vs f32 reference over {count} positions: top-1 agreement {:.2}%, mean KL {:.6}",
        100.0 * same as f64 / count as f64,
        kl_sum / count as f64
    );
    if let Some(out) = std::env::var_os("KL_BASE") {
        std::fs::File::create(&out)
            .and_then(|mut f| f.write_all(&base))
            .unwrap();
    }
}
