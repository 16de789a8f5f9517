//! The `runahead` command as a user runs it: the docs/design.md contract, and clear errors.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model() -> String {
    let p = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.exists(), "run scripts/fetch-models.sh");
    p.to_string_lossy().into_owned()
}

fn runahead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runahead"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fixture(name: &str) -> Value {
    let path = root().join("tests/fixtures/smollm2-135m").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn info_describes_the_model() {
    let o = runahead(&["info", "--model", &model()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "architecture  llama",
        "CPU engine    runs it",
        "GPU engine    runs it",
        "layers        30",
        "Q4_1",
        "pre 'smollm'",
        "tied output   true",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn tokenize_prints_llama_cpp_ids() {
    let fx = fixture("tokenizer.json");
    for case in fx["cases"].as_array().unwrap().iter().take(12) {
        let text = case["text"].as_str().unwrap();
        let o = runahead(&["tokenize", "--model", &model(), "--text", text]);
        assert!(o.status.success(), "{}", stderr(&o));
        let ids: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(ids, case["ids"], "{text:?}");
    }
}

#[test]
fn generate_json_follows_the_contract_and_llama_cpp() {
    let fx = fixture("greedy.json");
    let case = &fx["cases"][1]; // "The capital of France is"
    let prompt = case["prompt"].as_str().unwrap();
    let o = runahead(&[
        "generate",
        "--model",
        &model(),
        "--prompt",
        prompt,
        "--max-tokens",
        "5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let tokens = v["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 5);
    // llama.cpp's first near-tie (top-2 margin < 0.5) on this prompt is at position 5.
    assert_eq!(tokens[..], case["tokens"].as_array().unwrap()[..5]);
    assert!(v["text"].as_str().unwrap().starts_with(" Paris"), "{v}");
    let s = &v["stats"];
    for key in [
        "prompt_tokens",
        "generated_tokens",
        "target_forwards",
        "drafted",
        "accepted",
        "prefill_seconds",
        "decode_seconds",
        "tokens_per_second",
    ] {
        assert!(s[key].is_number(), "stats.{key} missing in {s}");
    }
    assert_eq!(s["prompt_tokens"], 5);
    assert_eq!(s["generated_tokens"], 5);
    assert_eq!(s["target_forwards"], 4);
    assert_eq!(s["backend"], "cpu");
    assert_eq!(s["draft"], "none");
}

#[test]
fn chat_and_sampling_run() {
    let m = model();
    let args = [
        "generate",
        "--model",
        &m,
        "--prompt",
        "Hi",
        "--chat",
        "--max-tokens",
        "4",
        "--temperature",
        "0.8",
        "--top-k",
        "40",
        "--top-p",
        "0.9",
        "--seed",
        "3",
        "--json",
    ];
    let o = runahead(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    // The chat template adds a system prompt: far more than the two tokens of "Hi".
    assert!(v["stats"]["prompt_tokens"].as_u64().unwrap() > 20, "{v}");
    let again = runahead(&args);
    let w: Value = serde_json::from_str(stdout(&again).trim()).unwrap();
    assert_eq!(v["tokens"], w["tokens"], "same seed, same tokens");
}

fn fails_with(args: &[&str], needle: &str) {
    let o = runahead(args);
    assert!(!o.status.success(), "{args:?} succeeded");
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err:?}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_gets_clear_errors() {
    let m = model();
    fails_with(
        &["info", "--model", "/nonexistent.gguf"],
        "/nonexistent.gguf",
    );
    fails_with(
        &["generate", "--model", &m, "--prompt", ""],
        "prompt is empty",
    );
    fails_with(
        &["generate", "--model", &m, "--prompt", "x", "--threads", "0"],
        "--threads must be at least 1",
    );
    fails_with(
        &[
            "generate",
            "--model",
            &m,
            "--prompt",
            "x",
            "--temperature",
            "-1",
        ],
        "temperature",
    );
    fails_with(
        &["generate", "--model", &m, "--prompt", "x", "--top-p", "0"],
        "top-p",
    );
    fails_with(
        &[
            "generate",
            "--model",
            &m,
            "--prompt",
            "one two three four five six",
            "--context",
            "4",
        ],
        "context holds 4",
    );
    fails_with(
        &[
            "generate", "--model", &m, "--prompt", "x", "--draft", "medusa",
        ],
        "--draft medusa",
    );
    // A draft model whose tokenizer differs from the target's is refused before any weights load.
    let qwen = root().join("models/Qwen2.5-Coder-0.5B-Instruct.gguf");
    let qwen = qwen.to_string_lossy();
    fails_with(
        &[
            "generate",
            "--model",
            &m,
            "--prompt",
            "x",
            "--draft",
            &format!("model:{qwen}"),
        ],
        "cannot draft for this target",
    );

    let dir = std::env::temp_dir().join(format!("runahead-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"not a model at all").unwrap();
    fails_with(
        &["info", "--model", junk.to_str().unwrap()],
        "not a GGUF file",
    );
    let truncated = dir.join("truncated.gguf");
    let bytes = std::fs::read(&m).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    fails_with(
        &[
            "generate",
            "--model",
            truncated.to_str().unwrap(),
            "--prompt",
            "x",
        ],
        "outside the file",
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn speculative_generate_reports_provenance_and_matches_plain() {
    let m = model();
    let prompt = "Repeat: one two three four five six seven. Again: one two three four";
    let run = |draft: &str, depth: &str| {
        let o = runahead(&[
            "generate",
            "--model",
            &m,
            "--prompt",
            prompt,
            "--max-tokens",
            "10",
            "--json",
            "--draft",
            draft,
            "--depth",
            depth,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str::<Value>(stdout(&o).trim()).unwrap()
    };
    let plain = run("none", "auto");
    for (draft, depth) in [("suffix", "auto"), ("ngram", "4"), ("auto", "auto")] {
        let v = run(draft, depth);
        assert_eq!(
            v["tokens"], plain["tokens"],
            "--draft {draft} --depth {depth}"
        );
        let s = &v["stats"];
        let provenance = v["provenance"].as_array().unwrap();
        assert_eq!(provenance.len(), v["tokens"].as_array().unwrap().len());
        let from_draft = provenance.iter().filter(|p| *p == "draft").count();
        assert_eq!(Some(from_draft as u64), s["accepted"].as_u64());
        assert!(s["acceptance_rate"].is_number() && s["target_forwards_per_token"].is_number());
        let drafted: u64 = s["drafters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["drafted"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(drafted), s["drafted"].as_u64());
    }
    fails_with(
        &[
            "generate", "--model", &m, "--prompt", "x", "--draft", "ngram", "--depth", "0",
        ],
        "--depth 0",
    );
}

#[test]
fn bench_suites_dump_their_prompts_for_the_browser_bench() {
    let file = std::env::temp_dir().join(format!("runahead-dump-{}.json", std::process::id()));
    let samples = root().join("tests/fixtures/prompts-sample");
    let o = runahead(&[
        "bench",
        "--model",
        &model(),
        "--suites",
        "humaneval,mtbench-extraction",
        "--n",
        "2",
        "--prompts-dir",
        samples.to_str().unwrap(),
        "--dump-prompts",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let suites: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    std::fs::remove_file(&file).ok();
    let suites = suites.as_array().unwrap();
    let names: Vec<&str> = suites.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["humaneval", "mtbench-extraction"]);
    for s in suites {
        let prompts = s["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), 2, "{s}");
        assert!(prompts
            .iter()
            .all(|p| !p["text"].as_str().unwrap().is_empty() && p["chat"].is_boolean()));
    }
    // Nothing was run: no report.
    assert!(!stdout(&o).contains("| humaneval |"), "{}", stdout(&o));
}

#[test]
fn bench_suites_writes_report_rows_and_plot() {
    let m = model();
    let out = std::env::temp_dir().join(format!("runahead-bench-test-{}", std::process::id()));
    let samples = root().join("tests/fixtures/prompts-sample");
    let o = runahead(&[
        "bench",
        "--model",
        &m,
        "--backends",
        "cpu",
        "--suites",
        "humaneval",
        "--n",
        "1",
        "--max-tokens",
        "4",
        "--drafters",
        "ngram,suffix",
        "--depth",
        "4",
        "--prompts-dir",
        samples.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--traces",
        out.join("traces.json").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("depth 4;"), "{}", stdout(&o));
    // The traces: the prompt's ids and its plain output (no cost model at a fixed depth).
    let traces: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("traces.json")).unwrap()).unwrap();
    assert_eq!(traces["backend"], "cpu");
    assert_eq!(traces["cost"].as_array().map(Vec::len), Some(0));
    let prompts = traces["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["suite"], "humaneval");
    assert_eq!(prompts[0]["kind"], "code");
    assert!(!prompts[0]["prompt"].as_array().unwrap().is_empty());
    assert_eq!(prompts[0]["output"].as_array().unwrap().len(), 4);
    assert!(
        stdout(&o).contains("| humaneval | code | cpu | ngram |"),
        "{}",
        stdout(&o)
    );
    let rows: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rows.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r["plain_tps"].as_f64().unwrap() > 0.0 && r["generated_tokens"] == 4));
    assert!(std::fs::read_to_string(out.join("speedup.svg"))
        .unwrap()
        .contains("<svg"));
    std::fs::remove_dir_all(&out).ok();
    fails_with(
        &[
            "bench",
            "--model",
            &m,
            "--suites",
            "humaneval",
            "--prompts-dir",
            "/nonexistent/prompts",
        ],
        "scripts/fetch-prompts.sh",
    );
    fails_with(
        &[
            "bench",
            "--model",
            &m,
            "--suites",
            "humaneval",
            "--depth",
            "0",
            "--prompts-dir",
            samples.to_str().unwrap(),
        ],
        "--depth 0",
    );
}

/// The GPU backend gives the CPU reference's greedy tokens with either kernel shape.
#[test]
fn gpu_backend_with_either_kernel_shape_matches_the_reference() {
    let m = model();
    let tokens = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "--model",
            &m,
            "--prompt",
            "The capital of France is",
            "--max-tokens",
            "6",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = runahead(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        (v["tokens"].clone(), stderr(&o))
    };
    let (reference, _) = tokens(&["--backend", "reference"]);
    for kernels in ["emulated", "gpu"] {
        let (gpu, err) = tokens(&["--backend", "gpu", "--gpu-kernels", kernels]);
        assert_eq!(gpu, reference, "--gpu-kernels {kernels}");
        assert!(err.contains(&format!("{kernels} kernels")), "{err}");
    }
    fails_with(
        &[
            "generate",
            "--model",
            &m,
            "--prompt",
            "x",
            "--gpu-kernels",
            "fast",
        ],
        "--gpu-kernels",
    );
}
