//! `runahead chat` as a user runs it, on SmolLM2: two turns piped through the binary, the second
//! prefilling only what is new (the cache of the first turn is kept) and answering exactly what
//! `runahead generate` answers on the whole conversation; and `--stop` on generate.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use runahead_gguf::GgufFile;
use runahead_model::{ChatMessage, ChatTemplate, Tokenizer};
use serde_json::Value;

const MAX_TOKENS: &str = "8";

fn model() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.exists(), "run scripts/fetch-models.sh");
    p.to_string_lossy().into_owned()
}

fn runahead(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runahead"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `(prompt, cached, generated)` token counts from each `--stats` line: `[turn 1: 37 prompt
/// tokens, 0 cached, 37 prefilled in 0.50 s; 8 generated at ...`.
fn turn_stats(stderr: &str) -> Vec<(usize, usize, usize)> {
    stderr
        .lines()
        .filter(|l| l.starts_with("[turn "))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = |i: usize| -> usize { words[i].parse().unwrap() };
            (at(2), at(5), at(12))
        })
        .collect()
}

/// The conversation as the model's template renders it, with the assistant's turn opened.
fn rendered(messages: &[ChatMessage]) -> String {
    let file = GgufFile::open(model()).unwrap();
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let source = file.header.metadata.str("tokenizer.chat_template").unwrap();
    let template = ChatTemplate::for_tokenizer(source, &tok).unwrap();
    template.render_conversation(messages).unwrap()
}

fn two_turns(backend: &str) {
    let m = model();
    let (q1, q2) = ("What is the capital of France?", "And of Germany?");
    let common = [
        "--model",
        &m,
        "--backend",
        backend,
        "--max-tokens",
        MAX_TOKENS,
        // One line per answer, so that stdout splits into answers.
        "--stop",
        "\n",
    ];
    let chat_args: Vec<&str> = ["chat", "--system", "Answer briefly.", "--stats"]
        .into_iter()
        .chain(common)
        .collect();
    let o = runahead(&chat_args, &format!("{q1}\n\n{q2}\n"));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let answers: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        answers.len(),
        2,
        "one line per answer (the empty line is skipped): {stdout:?}"
    );
    let turns = turn_stats(&stderr);
    assert_eq!(turns.len(), 2, "{stderr}");
    let (first_prompt, first_cached, generated) = turns[0];
    let (second_prompt, second_cached, _) = turns[1];
    assert_eq!(first_cached, 0);
    // The first turn's prompt and all of its answer but the last token (never fed back) are
    // reused: the second turn prefills its new message, the template's glue and that token.
    assert_eq!(second_cached, first_prompt + generated - 1, "{stderr}");
    let glue_and_message = second_prompt - second_cached;
    assert!(glue_and_message < 20, "{stderr}");

    // The second answer equals a fresh generation on the whole conversation.
    let conversation = rendered(&[
        ChatMessage::new("system", "Answer briefly."),
        ChatMessage::new("user", q1),
        ChatMessage::new("assistant", answers[0]),
        ChatMessage::new("user", q2),
    ]);
    let generate_args: Vec<&str> = ["generate", "--json", "--prompt", &conversation]
        .into_iter()
        .chain(common)
        .collect();
    let g = runahead(&generate_args, "");
    let v: Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(v["stats"]["prompt_tokens"], second_prompt);
    assert_eq!(v["stats"]["cached_tokens"], 0);
    assert_eq!(v["text"], answers[1], "{stderr}");
}

#[test]
fn a_second_turn_reuses_the_first_and_equals_a_fresh_run_cpu() {
    two_turns("cpu");
}

#[test]
fn a_second_turn_reuses_the_first_and_equals_a_fresh_run_reference() {
    two_turns("reference");
}

#[test]
fn generate_stops_before_a_stop_string() {
    let m = model();
    let base = [
        "generate",
        "--model",
        &m,
        "--prompt",
        "Monday, Tuesday, Wednesday,",
        "--max-tokens",
        "12",
        "--json",
    ];
    let full: Value = serde_json::from_slice(&runahead(&base, "").stdout).unwrap();
    let text = full["text"].as_str().unwrap().to_owned();
    // "day" ends inside a token ("Thursday"): the text stops in the middle of it.
    let first = text
        .find("day")
        .unwrap_or_else(|| panic!("\"day\" in {text:?}"));
    for draft in ["none", "ngram", "suffix", "auto"] {
        let args: Vec<&str> = base
            .into_iter()
            .chain(["--stop", "day", "--stop", "never", "--draft", draft])
            .collect();
        let v: Value = serde_json::from_slice(&runahead(&args, "").stdout).unwrap();
        assert_eq!(v["text"], text[..first], "{draft}: {v}");
        assert_eq!(v["stats"]["stop_reason"], "stop", "{draft}");
    }
    // Streamed: the same text (and a newline).
    let args: Vec<&str> = base[..base.len() - 1]
        .iter()
        .copied()
        .chain(["--stop", "day"])
        .collect();
    let streamed = String::from_utf8(runahead(&args, "").stdout).unwrap();
    assert_eq!(streamed, format!("{}\n", &text[..first]));
}
