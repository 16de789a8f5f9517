//! The `Engine` class in headless Chromium on WebGPU (SwiftShader on CI), called the way the
//! npm package calls it: a generated model's greedy output against the CPU reference in the same
//! wasm instance, drafting, cancellation, and the error codes pages rely on; and the CPU engine
//! behind the same class (`backend: "cpu"`, and `"auto"` on SwiftShader's fallback adapter).
//! Run with `scripts/wasm.sh test`.

#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;

use std::sync::Arc;

use runahead_cpu::{CpuEngine, CpuOptions, Isa};
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{argmax, Batch, CpuModel, LanguageModel, Tokenizer};
use runahead_web::{Engine, ModelStream};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

const PROMPT: &str = "the cat sat on the mat, the cat sat on the";
const CONTEXT: usize = 96;

fn options(json: &str) -> JsValue {
    js_sys::JSON::parse(json).expect("test options are valid JSON")
}

fn field(value: &JsValue, path: &[&str]) -> JsValue {
    path.iter().fold(value.clone(), |v, key| {
        js_sys::Reflect::get(&v, &(*key).into()).unwrap_or(JsValue::UNDEFINED)
    })
}

fn code(error: &JsValue) -> String {
    field(error, &["code"]).as_string().unwrap_or_default()
}

fn token_ids(result: &JsValue) -> Vec<u32> {
    js_sys::Array::from(&field(result, &["tokens"]))
        .iter()
        .map(|t| t.as_f64().unwrap_or(-1.0) as u32)
        .collect()
}

/// The GPU engine (by name: `auto` takes the CPU engine on SwiftShader's fallback adapter).
async fn load(bytes: Vec<u8>) -> Result<Engine, JsValue> {
    load_on(bytes, "webgpu").await
}

async fn load_on(bytes: Vec<u8>, backend: &str) -> Result<Engine, JsValue> {
    let json = format!(r#"{{"context": {CONTEXT}, "backend": "{backend}"}}"#);
    Engine::load(bytes, options(&json)).await
}

fn bytes_of_tiny_llama() -> Vec<u8> {
    TinyModel::llama().to_gguf()
}

/// Greedy decoding on the CPU reference, one token per forward, stopping like the engine does.
async fn cpu_greedy(bytes: Vec<u8>, prompt: &[u32], max_tokens: usize) -> Vec<u32> {
    let file = GgufFile::from_bytes(bytes).expect("tiny GGUF");
    let tokenizer = Tokenizer::from_metadata(&file.header.metadata).expect("tokenizer");
    let mut cpu = CpuModel::load(&file, Some(CONTEXT)).expect("CPU model");
    let logits = cpu
        .forward(&Batch::causal(prompt, 0))
        .await
        .expect("prefill");
    let mut next = logits.argmax(logits.n_rows() - 1);
    let mut out = vec![next];
    while out.len() < max_tokens && !tokenizer.is_end(next) {
        let pos = cpu.cache_len();
        let logits = cpu
            .forward(&Batch::causal(&[next], pos))
            .await
            .expect("step");
        next = argmax(logits.row(0));
        out.push(next);
    }
    out
}

/// What the `onToken` callback saw.
#[derive(Default)]
struct Seen {
    tokens: Vec<u32>,
    from_draft: usize,
    text: String,
}

type OnToken = Closure<dyn FnMut(String, u32, bool) -> bool>;

/// A callback that records tokens and runs `after(count)` after each one; its return value is
/// what the callback returns (false stops the generation).
fn recorder(seen: Rc<RefCell<Seen>>, mut after: impl FnMut(usize) -> bool + 'static) -> OnToken {
    Closure::new(move |text: String, token: u32, from_draft: bool| {
        let count = {
            let mut s = seen.borrow_mut();
            s.tokens.push(token);
            s.from_draft += from_draft as usize;
            s.text.push_str(&text);
            s.tokens.len()
        };
        after(count)
    })
}

async fn run(engine: &Engine, opts: &str, on_token: Option<&OnToken>) -> Result<JsValue, JsValue> {
    let callback = on_token.map(|c| c.as_ref().unchecked_ref::<js_sys::Function>().clone());
    JsFuture::from(engine.generate(PROMPT.into(), options(opts), callback)).await
}

#[wasm_bindgen_test]
async fn greedy_generation_streams_the_cpu_reference_tokens_and_cancels_cleanly() {
    let bytes = TinyModel::llama().to_gguf();
    let engine = Rc::new(load(bytes.clone()).await.expect("engine loads"));
    let info = engine.info().expect("info");
    assert_eq!(
        field(&info, &["architecture"]).as_string().as_deref(),
        Some("llama")
    );
    assert_eq!(field(&info, &["context"]).as_f64(), Some(CONTEXT as f64));
    assert_eq!(field(&info, &["chatTemplate"]).as_bool(), Some(true));

    let prompt = engine.tokenize(PROMPT).expect("tokenize");
    let want = cpu_greedy(bytes, &prompt, 24).await;
    assert!(want.len() > 4, "the reference ended early: {want:?}");

    for draft in ["none", "ngram"] {
        let seen = Rc::new(RefCell::new(Seen::default()));
        let on_token = recorder(seen.clone(), |_| true);
        let opts = format!(r#"{{"maxTokens": 24, "draft": "{draft}"}}"#);
        let result = run(&engine, &opts, Some(&on_token))
            .await
            .expect("generate");
        let seen = seen.borrow();
        assert_eq!(token_ids(&result), want, "draft {draft}: result tokens");
        assert_eq!(seen.tokens, want, "draft {draft}: streamed tokens");
        let accepted = field(&result, &["stats", "accepted"]).as_f64();
        assert_eq!(Some(seen.from_draft as f64), accepted, "draft {draft}");
        let stats = field(&result, &["stats"]);
        assert_eq!(
            field(&stats, &["prompt_tokens"]).as_f64(),
            Some(prompt.len() as f64)
        );
        assert_eq!(
            field(&stats, &["draft"]).as_string().as_deref(),
            Some(draft)
        );
        assert_eq!(
            field(&stats, &["backend"]).as_string().as_deref(),
            Some("gpu")
        );
    }

    // A draft model on the same device: the target's own weights, which predict its every
    // greedy token (its one-row forwards give the bits of the target's verification rows).
    let error = run(&engine, r#"{"maxTokens": 4, "draft": "model"}"#, None)
        .await
        .expect_err("no draft model yet");
    assert_eq!(code(&error), "invalid_option");
    let draft = engine
        .load_draft(bytes_of_tiny_llama())
        .expect("the draft model loads on the target's device");
    assert_eq!(
        field(&draft, &["name"]).as_string().as_deref(),
        Some("tiny-llama")
    );
    assert_eq!(field(&draft, &["context"]).as_f64(), Some(CONTEXT as f64));
    assert_eq!(
        field(&engine.info().expect("info"), &["draft", "parameters"]).as_f64(),
        field(&info, &["parameters"]).as_f64()
    );
    for draft in ["model", "auto"] {
        let seen = Rc::new(RefCell::new(Seen::default()));
        let on_token = recorder(seen.clone(), |_| true);
        let opts = format!(r#"{{"maxTokens": 24, "draft": "{draft}", "depth": 4}}"#);
        let result = run(&engine, &opts, Some(&on_token))
            .await
            .expect("generate with the draft model");
        assert_eq!(token_ids(&result), want, "draft {draft}");
        assert_eq!(seen.borrow().tokens, want, "draft {draft}: streamed");
        let stat = |k: &str| field(&result, &["stats", k]).as_f64().unwrap_or(-1.0);
        assert!(stat("drafted") > 0.0, "draft {draft}: nothing drafted");
        if draft == "model" {
            assert_eq!(
                stat("accepted"),
                stat("drafted"),
                "a model drafting for itself"
            );
        }
    }

    // A second generate while one streams is refused with `busy`, and the first one's output
    // is what it would have been alone.
    let seen = Rc::new(RefCell::new(Seen::default()));
    let refused: Rc<RefCell<Option<js_sys::Promise>>> = Rc::default();
    let on_token = {
        let (engine, refused) = (engine.clone(), refused.clone());
        recorder(seen.clone(), move |count| {
            if count == 2 {
                *refused.borrow_mut() = Some(engine.generate("x".into(), JsValue::UNDEFINED, None));
            }
            true
        })
    };
    let result = run(&engine, r#"{"maxTokens": 24}"#, Some(&on_token))
        .await
        .expect("the first generation runs to its end");
    assert_eq!(token_ids(&result), want);
    let busy = refused
        .borrow_mut()
        .take()
        .expect("second generate attempted");
    let busy = JsFuture::from(busy)
        .await
        .expect_err("second generate refused");
    assert_eq!(code(&busy), "busy");

    // cancel() from inside the stream after 3 tokens; a second generate meanwhile is refused.
    let seen = Rc::new(RefCell::new(Seen::default()));
    let refused: Rc<RefCell<Option<js_sys::Promise>>> = Rc::default();
    let on_token = {
        let (engine, refused) = (engine.clone(), refused.clone());
        recorder(seen.clone(), move |count| {
            if count == 3 {
                engine.cancel();
                *refused.borrow_mut() = Some(engine.generate("x".into(), JsValue::UNDEFINED, None));
            }
            true
        })
    };
    assert!(!engine.is_generating());
    let result = run(&engine, r#"{"maxTokens": 24}"#, Some(&on_token))
        .await
        .expect("cancelled");
    let stop = field(&result, &["stats", "stop_reason"]).as_string();
    assert_eq!(stop.as_deref(), Some("cancelled"));
    assert_eq!(token_ids(&result), want[..3]);
    let busy = refused
        .borrow_mut()
        .take()
        .expect("second generate attempted");
    let busy = JsFuture::from(busy)
        .await
        .expect_err("second generate refused");
    assert_eq!(code(&busy), "busy");

    // The callback returning false stops too; then the engine generates from scratch again.
    let seen = Rc::new(RefCell::new(Seen::default()));
    let on_token = recorder(seen.clone(), |count| count < 2);
    let result = run(&engine, r#"{"maxTokens": 24}"#, Some(&on_token))
        .await
        .expect("stopped");
    assert_eq!(token_ids(&result), want[..2]);
    let result = run(&engine, r#"{"maxTokens": 24}"#, None)
        .await
        .expect("generates again");
    assert_eq!(token_ids(&result), want);
    assert!(!engine.is_generating());
}

#[wasm_bindgen_test]
async fn bad_input_gives_error_codes_and_leaves_the_engine_usable() {
    for bytes in [
        b"not a model".to_vec(),
        b"GGUF\x03\0\0\0\xff\xff\xff\xff".to_vec(),
    ] {
        let error = load(bytes)
            .await
            .err()
            .expect("malformed bytes are refused");
        assert_eq!(code(&error), "gguf", "{error:?}");
        assert!(error.is_instance_of::<js_sys::Error>());
    }
    let error = Engine::load(TinyModel::llama().to_gguf(), options(r#"{"context": 0}"#))
        .await
        .err()
        .expect("context 0 is refused");
    assert_eq!(code(&error), "invalid_option");
    let error = Engine::load(
        TinyModel::llama().to_gguf(),
        options(r#"{"backend": "gpu"}"#),
    )
    .await
    .err()
    .expect("an unknown backend is refused");
    assert_eq!(code(&error), "invalid_option");

    // A model streamed in: a chunk past the size the download announced, a chunk out of place
    // and a download that ends early are `fetch`, a size that is not one `invalid_option`, a
    // size the CPU engine cannot hold `out_of_memory`; a stream of unknown size loads.
    let file = TinyModel::llama().to_gguf();
    let write = |stream: &ModelStream, at: usize, chunk: &[u8]| {
        JsFuture::from(stream.write(at as f64, chunk))
    };
    let stream = Engine::stream_model(file.len() as f64, JsValue::UNDEFINED).expect("a stream");
    let error = write(&stream, 8, &file)
        .await
        .expect_err("a chunk past the announced size");
    assert_eq!(code(&error), "fetch");
    write(&stream, 0, &file[..100])
        .await
        .expect("the first chunk");
    let error = stream.finish().err().expect("only 100 bytes arrived");
    assert_eq!(code(&error), "fetch", "{error:?}");
    let stream = Engine::stream_model(file.len() as f64, JsValue::UNDEFINED).expect("a stream");
    write(&stream, 0, &file[..100])
        .await
        .expect("the first chunk");
    let error = write(&stream, 300, &file[300..400])
        .await
        .expect_err("a chunk out of place");
    assert_eq!(code(&error), "fetch");
    for size in [-1.0, 0.5, 1e300] {
        let error = Engine::stream_model(size, JsValue::UNDEFINED)
            .err()
            .expect("an impossible size");
        assert_eq!(code(&error), "invalid_option", "{size}");
    }
    let stream = Engine::stream_model(1e15, options(r#"{"backend": "cpu"}"#)).expect("a stream");
    let error = write(&stream, 0, &file)
        .await
        .expect_err("a petabyte in WebAssembly memory");
    assert_eq!(code(&error), "out_of_memory");
    let stream = Engine::stream_model(0.0, JsValue::UNDEFINED).expect("size unknown");
    for (i, chunk) in file.chunks(1000).enumerate() {
        write(&stream, i * 1000, chunk).await.expect("a chunk");
    }
    stream
        .finish()
        .expect("a model streamed without a known size loads");

    let engine = load(TinyModel::qwen2().to_gguf())
        .await
        .expect("engine loads");
    let refused = [
        (r#"{"temperature": -1}"#, "invalid_sampling"),
        (r#"{"temperature": 0.8, "topP": 0}"#, "invalid_sampling"),
        (r#"{"draft": "nope"}"#, "invalid_option"),
        (r#"{"max_tokens": 3}"#, "invalid_option"),
        (r#"{"maxTokens": "many"}"#, "invalid_option"),
    ];
    for (opts, want) in refused {
        let error = run(&engine, opts, None).await.expect_err(opts);
        assert_eq!(code(&error), want, "{opts}: {error:?}");
    }
    // A draft model of another tokenizer, or not a model at all, is refused before anything
    // is loaded; the engine goes on without one.
    let other_eos = TinyModel::llama()
        .to_gguf_with_meta(&[("tokenizer.ggml.eos_token_id", runahead_gguf::Value::U32(2))]);
    let error = engine.load_draft(other_eos).expect_err("another EOS token");
    assert_eq!(code(&error), "draft_mismatch", "{error:?}");
    let error = engine
        .load_draft(b"not a model".to_vec())
        .expect_err("not a GGUF");
    assert_eq!(code(&error), "gguf");
    assert!(field(&engine.info().expect("info"), &["draft"]).is_undefined());
    let error = run(&engine, r#"{"draft": "model"}"#, None)
        .await
        .expect_err("no draft model");
    assert_eq!(code(&error), "invalid_option");

    let long = "word ".repeat(CONTEXT);
    let error = JsFuture::from(engine.generate(long.into(), JsValue::UNDEFINED, None))
        .await
        .expect_err("prompt longer than the context");
    assert_eq!(code(&error), "prompt_too_long");
    let error = JsFuture::from(engine.generate("".into(), JsValue::UNDEFINED, None))
        .await
        .expect_err("empty prompt");
    assert_eq!(code(&error), "empty_prompt");

    // A throwing callback ends the generation with code "callback" and the thrown value.
    let throwing = js_sys::Function::new_with_args("text", "throw new TypeError('page bug')");
    let error = JsFuture::from(engine.generate(PROMPT.into(), JsValue::UNDEFINED, Some(throwing)))
        .await
        .expect_err("callback threw");
    assert_eq!(code(&error), "callback");
    assert!(field(&error, &["cause"]).is_instance_of::<js_sys::TypeError>());

    let result = run(
        &engine,
        r#"{"maxTokens": 3, "temperature": 0.7, "seed": 5}"#,
        None,
    )
    .await
    .expect("sampling still works after errors");
    assert!(!token_ids(&result).is_empty());
}

/// 100 generations on one loaded engine do not grow the page's WebAssembly memory (it never
/// shrinks, so growth would show as a larger buffer): after the first 20 its size stays put.
/// The n-gram drafter keeps no index across requests; the KV cache record is reused.
#[wasm_bindgen_test]
async fn a_hundred_generations_do_not_grow_the_page_memory() {
    let engine = load(TinyModel::llama().to_gguf())
        .await
        .expect("engine loads");
    let memory_bytes = || {
        let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
        memory
            .buffer()
            .unchecked_into::<js_sys::ArrayBuffer>()
            .byte_length()
    };
    let mut after_warmup = 0;
    for i in 0..100 {
        run(
            &engine,
            r#"{"maxTokens": 8, "draft": "ngram", "depth": 4}"#,
            None,
        )
        .await
        .expect("generates");
        if i == 19 {
            after_warmup = memory_bytes();
        }
    }
    assert_eq!(memory_bytes(), after_warmup, "bytes of WebAssembly memory");
}

/// Greedy decoding on the CPU engine's scalar kernels, one token per forward: what the
/// package's CPU backend (simd128, the same bits) must stream.
async fn cpu_engine_greedy(bytes: Vec<u8>, prompt: &[u32], max_tokens: usize) -> Vec<u32> {
    let file = Arc::new(GgufFile::from_bytes(bytes).expect("tiny GGUF"));
    let tokenizer = Tokenizer::from_metadata(&file.header.metadata).expect("tokenizer");
    let options = CpuOptions {
        context: Some(CONTEXT),
        threads: Some(1),
        isa: Some(Isa::Scalar),
    };
    let mut engine = CpuEngine::load(file, &options).expect("CPU engine");
    let logits = engine
        .forward(&Batch::causal(prompt, 0))
        .await
        .expect("prefill");
    let mut next = logits.argmax(logits.n_rows() - 1);
    let mut out = vec![next];
    while out.len() < max_tokens && !tokenizer.is_end(next) {
        let pos = engine.cache_len();
        let logits = engine
            .forward(&Batch::causal(&[next], pos))
            .await
            .expect("step");
        next = argmax(logits.row(0));
        out.push(next);
    }
    out
}

/// `backend: "cpu"` and `"auto"` (SwiftShader's adapter is a fallback one) load the CPU
/// engine, say so in `info()`, and stream its greedy tokens with every drafter and depth.
#[wasm_bindgen_test]
async fn the_cpu_backend_streams_the_cpu_engines_greedy_tokens() {
    for spec in [TinyModel::llama(), TinyModel::qwen2()] {
        let bytes = spec.to_gguf();
        for backend in ["cpu", "auto"] {
            let engine = load_on(bytes.clone(), backend).await.expect("loads");
            let info = engine.info().expect("info");
            assert_eq!(
                field(&info, &["backend"]).as_string().as_deref(),
                Some("cpu")
            );
            let reason = field(&info, &["backendReason"]).as_string();
            if backend == "auto" {
                assert!(
                    reason.as_deref().is_some_and(|r| r.contains("fallback")),
                    "auto on SwiftShader: {reason:?}"
                );
            } else {
                assert_eq!(reason, None, "the CPU engine was asked for by name");
            }
            // "simd128", or "simd128+relaxed" in the relaxed SIMD build.
            let kernels = Isa::Simd128.name();
            assert_eq!(
                field(&info, &["adapter"]).as_string(),
                Some(format!("CPU engine ({kernels}, 1 thread)"))
            );
            assert_eq!(field(&info, &["context"]).as_f64(), Some(CONTEXT as f64));

            let prompt = engine.tokenize(PROMPT).expect("tokenize");
            let want = cpu_engine_greedy(bytes.clone(), &prompt, 24).await;
            assert!(want.len() > 4, "the engine ended early: {want:?}");
            for opts in [
                r#"{"maxTokens": 24, "draft": "none"}"#,
                r#"{"maxTokens": 24, "draft": "ngram", "depth": 4}"#,
                r#"{"maxTokens": 24, "draft": "suffix"}"#,
                r#"{"maxTokens": 24, "draft": "auto", "depth": "auto"}"#,
            ] {
                let seen = Rc::new(RefCell::new(Seen::default()));
                let on_token = recorder(seen.clone(), |_| true);
                let result = run(&engine, opts, Some(&on_token)).await.expect(opts);
                assert_eq!(token_ids(&result), want, "{backend} {opts}");
                assert_eq!(seen.borrow().tokens, want, "{backend} {opts}: streamed");
                assert_eq!(
                    field(&result, &["stats", "backend"]).as_string().as_deref(),
                    Some("cpu")
                );
            }
        }
    }
}

/// Streams `bytes` into `stream` in chunks of the sizes `chunks` cycles through.
async fn stream_in(stream: &ModelStream, bytes: &[u8], chunks: &[usize]) {
    let mut at = 0;
    for &n in chunks.iter().cycle() {
        if at == bytes.len() {
            break;
        }
        let end = (at + n).min(bytes.len());
        JsFuture::from(stream.write(at as f64, &bytes[at..end]))
            .await
            .expect("a chunk");
        at = end;
    }
}

#[wasm_bindgen_test]
async fn a_model_streamed_onto_webgpu_generates_what_the_loaded_one_does() {
    let opts = r#"{"maxTokens": 16, "draft": "none"}"#;
    for spec in [TinyModel::qwen2(), TinyModel::gemma3()] {
        let bytes = spec.to_gguf();
        let loaded = load(bytes.clone()).await.expect("engine loads");
        let want = token_ids(&run(&loaded, opts, None).await.expect("generates"));
        let json = format!(r#"{{"context": {CONTEXT}, "backend": "webgpu"}}"#);
        let stream = Engine::stream_model(bytes.len() as f64, options(&json)).expect("a stream");
        stream_in(&stream, &bytes, &[1, 3, 4093, 65_537, 2]).await;
        let engine = stream.finish().expect("the streamed model");
        let info = engine.info().expect("info");
        assert_eq!(
            field(&info, &["backend"]).as_string().as_deref(),
            Some("webgpu")
        );
        let got = run(&engine, opts, None).await.expect("generates");
        assert_eq!(token_ids(&got), want, "{}", spec.arch_name());

        // The draft model through the same path, onto the target's device.
        let draft = engine.stream_draft(0.0).expect("a draft stream");
        stream_in(&draft, &bytes, &[65_536]).await;
        let described = draft.finish_draft().expect("the draft model");
        assert_eq!(
            field(&described, &["context"]).as_f64(),
            Some(CONTEXT as f64)
        );
        let drafted = run(&engine, r#"{"maxTokens": 16, "draft": "model"}"#, None)
            .await
            .expect("generates with the draft model");
        assert_eq!(token_ids(&drafted), want, "{} drafting", spec.arch_name());
    }
}

/// The clock llguidance reads in the page (crates/wasm-instant): the page's milliseconds as
/// durations, and an earlier reading less a later one is zero rather than a panic.
#[wasm_bindgen_test]
fn grammar_clock_reads_the_page_time() {
    let start = instant::Instant::now();
    let wall = js_sys::Date::now();
    while js_sys::Date::now() - wall < 20.0 {}
    let later = instant::Instant::now();
    let elapsed = (later - start).as_secs_f64();
    assert!(
        (0.015..5.0).contains(&elapsed),
        "{elapsed} s for a 20 ms wait"
    );
    assert!(start.elapsed().as_secs_f64() >= elapsed);
    assert_eq!(start - later, std::time::Duration::ZERO);
}
