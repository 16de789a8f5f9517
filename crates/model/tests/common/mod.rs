//! Shared helpers for tests over the real models in `models/` (fetched by
//! `scripts/fetch-models.sh`) and the llama.cpp fixtures in `tests/fixtures/`.

#![allow(dead_code)]

use std::path::PathBuf;

use runahead_gguf::GgufFile;
use serde_json::Value;

pub const SMOLLM2: (&str, &str) = ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m");
pub const QWEN_05B: (&str, &str) = ("Qwen2.5-Coder-0.5B-Instruct.gguf", "qwen2.5-coder-0.5b");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Opens a model from `models/`, or fails with the command that fetches it.
pub fn open_model(file: &str) -> GgufFile {
    let dir = std::env::var_os("RUNAHEAD_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models"));
    let path = dir.join(file);
    GgufFile::open(&path).unwrap_or_else(|e| {
        panic!("{e}\nThis test needs {file}: run scripts/fetch-models.sh all (or smollm2 / qwen-draft)")
    })
}

pub fn fixture(model_id: &str, name: &str) -> Value {
    let path = repo_root().join("tests/fixtures").join(model_id).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}
