//! `Engine.forwardCost` in headless Chromium on WebGPU (SwiftShader) and on the CPU engine: a
//! generated model's per-forward numbers are present and sane (the GPU engine's dispatch count
//! with the argmax, one sample per forward, the call counter's own readings taken out exactly;
//! the CPU engine's times of each block size), and bad input gets error codes that leave the
//! engine usable. Run with `scripts/wasm.sh test`. Times are not checked against any threshold
//! (they say nothing on this machine); the real model's counts are checked against the native
//! engine's by tests/e2e/forward-cost.test.mjs.

#![cfg(target_arch = "wasm32")]

use runahead_model::testing::TinyModel;
use runahead_web::Engine;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

const PROMPT: &str = "the cat sat on the mat, the cat sat on the";

fn options(json: &str) -> JsValue {
    js_sys::JSON::parse(json).expect("test options are valid JSON")
}

fn field(value: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(value, &key.into()).unwrap_or(JsValue::UNDEFINED)
}

fn number(value: &JsValue, key: &str) -> f64 {
    field(value, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is a number"))
}

fn code(error: &JsValue) -> String {
    field(error, "code").as_string().unwrap_or_default()
}

async fn load(backend: &str) -> Engine {
    load_with_context(backend, TinyModel::llama(), 96).await
}

async fn load_with_context(backend: &str, model: TinyModel, context: usize) -> Engine {
    let json = format!(r#"{{"context": {context}, "backend": "{backend}"}}"#);
    Engine::load(model.to_gguf(), options(&json))
        .await
        .expect("the generated model loads")
}

async fn cost(
    engine: &Engine,
    prompt: &str,
    opts: &str,
    counter: Option<js_sys::Function>,
) -> Result<JsValue, JsValue> {
    JsFuture::from(engine.forward_cost(prompt.into(), options(opts), counter)).await
}

/// Each `(prompt, options, code)` refused with that error code.
async fn refused(engine: &Engine, cases: &[(&str, &str, &str)]) {
    for &(prompt, opts, want) in cases {
        let error = cost(engine, prompt, opts, None).await.expect_err("refused");
        assert_eq!(code(&error), want, "{opts}: {error:?}");
    }
}

#[wasm_bindgen_test]
async fn forward_cost_reports_every_forward_and_calibrates_the_call_counter() {
    let engine = load("webgpu").await;
    // A counter that counts only its own readings: the engine must take them all out.
    let counter = js_sys::Function::new_no_args(
        "globalThis.__ownReadings = (globalThis.__ownReadings ?? 0) + 1; \
         return globalThis.__ownReadings;",
    );
    let result = cost(
        &engine,
        PROMPT,
        r#"{"rows": [1, 5], "reps": 3}"#,
        Some(counter),
    )
    .await
    .expect("forwardCost on the GPU engine");
    let per_forward = number(&result, "dispatches_per_forward");
    assert!(per_forward > 3.0, "{per_forward} dispatches");
    assert!(number(&result, "prompt_tokens") > 1.0);
    let costs = js_sys::Array::from(&field(&result, "host_cost"));
    assert_eq!(costs.length(), 2);
    for (c, rows) in costs.iter().zip([1.0, 5.0]) {
        assert_eq!(number(&c, "rows"), rows);
        assert_eq!(number(&c, "dispatches"), per_forward + 1.0, "the argmax");
        assert_eq!(number(&c, "reps"), 3.0);
        assert_eq!(number(&c, "staging_writes"), 0.0);
        assert_eq!(number(&c, "calls_encode_submit"), 0.0);
        assert_eq!(number(&c, "calls_wait"), 0.0);
        let samples = js_sys::Array::from(&field(&c, "encode_submit_samples_ms"));
        assert_eq!(samples.length(), 3);
        for ms in [number(&c, "encode_submit_ms"), number(&c, "wait_ms")] {
            assert!(ms.is_finite() && ms >= 0.0, "{ms}");
        }
    }
    // Without a counter the call counts are absent, not zero.
    let result = cost(&engine, PROMPT, r#"{"rows": [2], "reps": 1}"#, None)
        .await
        .expect("forwardCost without a counter");
    let c = js_sys::Array::from(&field(&result, "host_cost")).get(0);
    assert!(field(&c, "calls_encode_submit").is_null());
}

#[wasm_bindgen_test]
async fn bad_forward_cost_input_gets_error_codes_and_leaves_the_engine_usable() {
    let engine = load("webgpu").await;
    let long = "the cat ".repeat(80);
    let cases = [
        (PROMPT, r#"{"rows": [0]}"#, "invalid_option"),
        (PROMPT, r#"{"rows": [65]}"#, "invalid_option"),
        (PROMPT, r#"{"rows": []}"#, "invalid_option"),
        (PROMPT, r#"{"reps": 0}"#, "invalid_option"),
        (PROMPT, r#"{"reps": 1001}"#, "invalid_option"),
        (PROMPT, r#"{"row": [1]}"#, "invalid_option"),
        (PROMPT, r#"{"rows": 1}"#, "invalid_option"),
        ("", "{}", "empty_prompt"),
        (long.as_str(), "{}", "prompt_too_long"),
    ];
    refused(&engine, &cases).await;
    // Busy while a generation holds the model.
    let generation = engine.generate(PROMPT.into(), options(r#"{"maxTokens": 2}"#), None);
    let error = cost(&engine, PROMPT, "{}", None).await.expect_err("busy");
    assert_eq!(code(&error), "busy");
    JsFuture::from(generation).await.expect("the generation");
    cost(&engine, PROMPT, r#"{"rows": [1], "reps": 1}"#, None)
        .await
        .expect("the engine is still usable");
}

#[wasm_bindgen_test]
async fn forward_cost_on_the_cpu_engine_times_each_block_and_refuses_bad_input() {
    let engine = load("cpu").await;
    let result = cost(&engine, PROMPT, r#"{"rows": [1, 8, 3], "reps": 3}"#, None)
        .await
        .expect("forwardCost on the CPU engine");
    assert_eq!(
        field(&result, "backend").as_string().as_deref(),
        Some("cpu")
    );
    assert!(field(&result, "relaxed_simd").as_bool().is_some());
    assert!(number(&result, "threads") >= 1.0);
    assert!(number(&result, "prompt_tokens") > 1.0);
    let forwards = js_sys::Array::from(&field(&result, "forwards"));
    assert_eq!(forwards.length(), 3);
    for (f, rows) in forwards.iter().zip([1.0, 8.0, 3.0]) {
        assert_eq!(number(&f, "rows"), rows);
        assert_eq!(number(&f, "reps"), 3.0);
        let (median, min) = (number(&f, "median_ms"), number(&f, "min_ms"));
        assert!(
            min.is_finite() && min >= 0.0 && median >= min,
            "{min} {median}"
        );
        // The generated model's forward can read 0 ms on a clock of 0.1 ms steps.
        let ratio = field(&f, "median_vs_one_row");
        assert!(ratio.is_null() || ratio.as_f64().is_some_and(f64::is_finite));
    }
    // The context of 96 holds no prompt of 90 tokens with a block of 8 behind it.
    let long = "the cat ".repeat(45);
    let cases = [
        (PROMPT, r#"{"rows": [0]}"#, "invalid_option"),
        (PROMPT, r#"{"rows": [33]}"#, "invalid_option"),
        (PROMPT, r#"{"reps": 201}"#, "invalid_option"),
        (PROMPT, r#"{"row": [1]}"#, "invalid_option"),
        ("", "{}", "empty_prompt"),
        (long.as_str(), "{}", "prompt_too_long"),
    ];
    refused(&engine, &cases).await;
    let generation = engine.generate(PROMPT.into(), options(r#"{"maxTokens": 2}"#), None);
    JsFuture::from(generation)
        .await
        .expect("a generation after forwardCost");

    // A prompt longer than one prefill block (256 rows) goes in several.
    let model = TinyModel {
        context: 512,
        ..TinyModel::llama()
    };
    let engine = load_with_context("cpu", model, 512).await;
    let long = "the cat sat on the mat. ".repeat(20);
    let result = cost(&engine, &long, r#"{"rows": [1, 4], "reps": 2}"#, None)
        .await
        .expect("forwardCost behind a long prompt");
    assert!(number(&result, "prompt_tokens") > 256.0);
    assert_eq!(js_sys::Array::from(&field(&result, "forwards")).length(), 2);
}
