//! Generated models with doctored metadata: every hyper-parameter that is zero, inconsistent
//! or absurd, and a tokenizer larger than the embedding table, is refused at load with a
//! typed "invalid model" error, before an engine sizes anything by it.

use runahead_gguf::{Array, GgufFile, Value, ValueType};
use runahead_model::testing::TinyModel;
use runahead_model::{CpuModel, ModelConfig, ModelError};

/// Loads the tiny llama model with `meta` replaced, returning the load error.
fn load_error(key: &str, value: Value) -> ModelError {
    let spec = TinyModel::llama();
    let key = format!("{}.{key}", spec.arch_name());
    let file = GgufFile::from_bytes(spec.to_gguf_with_meta(&[(&key, value.clone())])).unwrap();
    // The config alone already refuses it, and so does a whole load.
    assert!(ModelConfig::from_file(&file).is_err(), "{key} = {value}");
    match CpuModel::load(&file, Some(16)) {
        Ok(_) => panic!("{key} = {value} was accepted"),
        Err(e) => e,
    }
}

/// Every case gives `InvalidHyperParameter` naming the offending quantity.
fn assert_invalid(key: &str, names: &str, values: &[Value]) {
    for v in values {
        match load_error(key, v.clone()) {
            ModelError::InvalidHyperParameter { what, .. } => {
                assert!(what.contains(names), "{key} = {v}: error names {what}")
            }
            other => panic!("{key} = {v}: {other}"),
        }
    }
}

/// The tiny llama: 2 layers, width 256, FFN 512, 4 heads of 64, 2 KV heads, context 256.
#[test]
fn zero_absurd_and_inconsistent_dimensions_are_invalid_models() {
    let u = |v: u64| Value::U64(v);
    let huge = [u(0), u(1 << 40), u(u64::MAX)];
    assert_invalid("block_count", "block_count", &huge);
    assert_invalid("feed_forward_length", "feed_forward_length", &huge);
    assert_invalid("context_length", "context_length", &huge);
    assert_invalid("attention.head_count", "head_count", &huge);
    assert_invalid("attention.head_count_kv", "head_count", &huge);
    // Width: zero, absurd, or not a multiple of the 4 heads.
    assert_invalid(
        "embedding_length",
        "embedding_length",
        &[u(0), u(1 << 40), u(258)],
    );
    // Heads: not dividing the width (256 / 3), KV heads not dividing the heads or above them.
    assert_invalid("attention.head_count", "embedding_length", &[u(3)]);
    assert_invalid("attention.head_count_kv", "head_count", &[u(3), u(8)]);
    // RoPE: zero, odd, wider than the 64-wide head.
    assert_invalid(
        "rope.dimension_count",
        "rope.dimension_count",
        &[u(0), u(3), u(128)],
    );
    let f = |v: f32| Value::F32(v);
    let bad_floats = [f(f32::NAN), f(f32::INFINITY), f(-1.0), f(0.0)];
    assert_invalid("rope.freq_base", "rope.freq_base", &bad_floats);
    let bad_eps = [f(f32::NAN), f(-1e-5), f(1.0), Value::F64(1e300)];
    assert_invalid("attention.layer_norm_rms_epsilon", "epsilon", &bad_eps);
}

#[test]
fn an_absurd_vocabulary_is_an_invalid_model() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let meta = &file.header.metadata;
    for vocab in [0, 1 << 30, usize::MAX] {
        let err = ModelConfig::from_metadata(meta, vocab).unwrap_err();
        assert!(
            matches!(err, ModelError::InvalidHyperParameter { ref what, .. } if what == "vocabulary size"),
            "{vocab}: {err}"
        );
    }
}

#[test]
fn a_tokenizer_larger_than_the_embedding_is_refused_at_load() {
    let spec = TinyModel::llama();
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let rows = ModelConfig::vocab_rows(&file).unwrap();
    let meta = &file.header.metadata;
    let mut tokens: Vec<Value> = meta
        .array("tokenizer.ggml.tokens")
        .unwrap()
        .values()
        .collect();
    let mut types: Vec<Value> = meta
        .array("tokenizer.ggml.token_type")
        .unwrap()
        .values()
        .collect();
    for i in 0..10 {
        tokens.push(Value::String(format!("<extra_{i}>")));
        types.push(Value::I32(3));
    }
    let array = |ty, items| Value::Array(Array::from_values(ty, items).unwrap());
    let doctored = spec.to_gguf_with_meta(&[
        ("tokenizer.ggml.tokens", array(ValueType::String, tokens)),
        ("tokenizer.ggml.token_type", array(ValueType::I32, types)),
    ]);
    let file = GgufFile::from_bytes(doctored).unwrap();
    let err = CpuModel::load(&file, Some(16)).err().expect("a load error");
    assert!(
        matches!(err, ModelError::VocabularyMismatch { tokens, rows: r } if tokens == rows + 10 && r == rows),
        "{err}"
    );
    // Not an engine's internal error such as TokenOutOfRange: the page reports it as an
    // unsupported model.
    assert!(err.to_string().contains("invalid model"), "{err}");
}

#[test]
fn real_shapes_of_the_generated_models_are_accepted() {
    for spec in [TinyModel::llama(), TinyModel::qwen2()] {
        let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
        let c = ModelConfig::from_file(&file).unwrap();
        assert_eq!((c.n_layers, c.n_embd, c.head_dim), (2, 256, 64));
        assert_eq!(c.vocab_size, ModelConfig::vocab_rows(&file).unwrap());
    }
}
