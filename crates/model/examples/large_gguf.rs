//! Writes a seeded random-weight llama model larger than 4 GiB (96 layers of width 2048, FFN
//! 5632, Q8_0: 4.6 GB), past what a wasm32 heap can hold, for scripts/browser-large-model.sh:
//! a page loads it on WebGPU, streaming the weights to the GPU, and generates what the native
//! engine generates.
//!
//! usage: cargo run --release -p runahead-model --example large_gguf -- PATH

use runahead_gguf::GgmlType;
use runahead_model::testing::TinyModel;

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "large.gguf".into());
    let model = TinyModel {
        n_layers: 96,
        n_embd: 2048,
        n_ff: 5632,
        n_heads: 16,
        n_kv_heads: 4,
        context: 2048,
        seed: 7,
        formats: &[GgmlType::Q8_0],
        ..TinyModel::llama()
    };
    let bytes = model.to_gguf();
    std::fs::write(&path, &bytes)?;
    println!("{path}: {} bytes", bytes.len());
    Ok(())
}
