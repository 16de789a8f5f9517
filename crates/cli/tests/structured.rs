//! `runahead generate` with structured output as a user runs it: `--json-schema` output that
//! parses and follows the schema, `--tools` replies that are calls of the named tool with
//! arguments under its schema, and clear errors for bad schemas and tool files.

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

/// A file in a fresh directory under the target dir (removed with it).
fn file(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("structured");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn generate(extra: &[&str]) -> Value {
    let m = model();
    let mut args = vec!["generate", "--model", &m, "--max-tokens", "48", "--json"];
    args.extend_from_slice(extra);
    let o = runahead(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn json_schema_output_follows_the_schema() {
    let schema = file(
        "city.json",
        r#"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
            "country": {"type": "string", "enum": ["France", "Italy", "Spain"]}},
            "required": ["city", "country"], "additionalProperties": false}"#,
    );
    let out = generate(&[
        "--prompt",
        "The capital of France is Paris. As JSON:",
        "--json-schema",
        &schema,
        "--draft",
        "none",
    ]);
    // One mask per picked position: the prompt's last row and each forward's row.
    let stats = &out["stats"];
    let forwards = stats["target_forwards"].as_u64().unwrap();
    assert_eq!(stats["masks"].as_u64(), Some(forwards + 1), "{stats}");
    assert!(stats["mask_seconds"].as_f64().unwrap() > 0.0, "{stats}");
    let v: Value = serde_json::from_str(out["text"].as_str().unwrap()).unwrap();
    let object = v.as_object().unwrap();
    assert_eq!(object.len(), 2, "{v}");
    assert!(object["city"].as_str().unwrap().len() <= 20);
    assert!(["France", "Italy", "Spain"].contains(&object["country"].as_str().unwrap()));
}

#[test]
fn tools_reply_with_a_call_of_the_named_tool() {
    let tools = file(
        "tools.json",
        r#"[{"type": "function", "function": {"name": "get_weather",
              "description": "The current weather in a city.",
              "parameters": {"type": "object", "properties": {
                  "city": {"type": "string", "maxLength": 20},
                  "unit": {"type": "string", "enum": ["C", "F"]}},
                "required": ["city", "unit"], "additionalProperties": false}}},
            {"type": "function", "function": {"name": "get_time"}}]"#,
    );
    let out = generate(&[
        "--chat",
        "--prompt",
        "What is the weather in Paris?",
        "--tools",
        &tools,
        "--tool-choice",
        "get_weather",
    ]);
    let calls = out["tool_calls"].as_array().unwrap();
    assert!(!calls.is_empty(), "{out}");
    for call in calls {
        assert_eq!(call["name"], "get_weather", "{out}");
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert!(args["city"].is_string(), "{args}");
        assert!(
            ["C", "F"].contains(&args["unit"].as_str().unwrap()),
            "{args}"
        );
    }
    assert_eq!(out["content"], "", "{out}");
}

#[test]
fn bad_schemas_and_tools_are_clear_errors() {
    let m = model();
    let fails_with = |extra: &[&str], needle: &str| {
        let mut args = vec!["generate", "--model", m.as_str(), "--prompt", "Hi"];
        args.extend_from_slice(extra);
        let o = runahead(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    let not_json = file("not-json.json", "{\"type\": ");
    fails_with(&["--json-schema", &not_json], "not valid JSON");
    let tools = file(
        "tools-bad.json",
        r#"[{"type": "function", "function": {"name": "a b"}}]"#,
    );
    fails_with(&["--chat", "--tools", &tools], "function.name");
    let ok = file(
        "tools-ok.json",
        r#"[{"type": "function", "function": {"name": "f"}}]"#,
    );
    fails_with(
        &["--chat", "--tools", &ok, "--tool-choice", "g"],
        "not among the tools",
    );
    fails_with(&["--tools", &ok], "--chat");
}
