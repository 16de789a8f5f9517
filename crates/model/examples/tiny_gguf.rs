//! Writes the seeded random-weight models of each architecture (`runahead_model::testing`)
//! to a folder, for scripts/fixtures/make_arch_fixtures.sh to run llama.cpp on.
//!
//! usage: cargo run -p runahead-model --example tiny_gguf -- DIR

use runahead_model::testing::TinyModel;

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    std::fs::create_dir_all(&dir)?;
    for (name, model) in [
        ("llama3", TinyModel::llama3()),
        ("qwen3", TinyModel::qwen3()),
        ("gemma3", TinyModel::gemma3()),
        ("phi3", TinyModel::phi3()),
    ] {
        let path = format!("{dir}/tiny-{name}.gguf");
        std::fs::write(&path, model.to_gguf())?;
        println!("{path}");
    }
    Ok(())
}
