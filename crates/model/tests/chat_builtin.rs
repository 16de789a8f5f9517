//! The chat templates a model file without one gets (`model_template`) against llama.cpp's
//! built-in formats (tests/fixtures/chat-builtin/*.json, made by
//! scripts/fixtures/make_chat_builtin.sh through `llama_chat_apply_template`), and which files
//! get one.

mod common;

use common::fixture;
use runahead_gguf::{GgufFile, GgufWriter, Metadata};
use runahead_model::{model_template, ChatMessage, ChatTemplate};

fn metadata(arch: &str, tokens: &[&str], template: Option<&str>) -> Metadata {
    let mut w = GgufWriter::new();
    w.meta_str("general.architecture", arch);
    w.meta_strings("tokenizer.ggml.tokens", tokens);
    if let Some(t) = template {
        w.meta_str("tokenizer.chat_template", t);
    }
    GgufFile::from_bytes(w.to_bytes())
        .expect("a header")
        .header
        .metadata
}

const GEMMA_TOKENS: &[&str] = &[
    "<pad>",
    "<eos>",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
];

#[test]
fn gemma_files_without_a_template_render_as_llama_cpp_does() {
    let meta = metadata("gemma3", GEMMA_TOKENS, None);
    let found = model_template(&meta).expect("a built-in template");
    assert_eq!(found.builtin, Some("gemma"));
    let template = ChatTemplate::new(found.source, "<bos>", "<eos>").expect("compiles");
    let fx = fixture("chat-builtin", "gemma.json");
    let cases = fx["cases"].as_array().expect("cases");
    assert!(cases.len() >= 5);
    for case in cases {
        let messages: Vec<ChatMessage> = case["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                ChatMessage::new(
                    m["role"].as_str().expect("role"),
                    m["content"].as_str().expect("content"),
                )
            })
            .collect();
        let add = case["add_generation_prompt"].as_bool().expect("flag");
        let ours = template.render(&messages, add).expect("renders");
        assert_eq!(ours, case["rendered"].as_str().expect("rendered"), "{case}");
    }
}

#[test]
fn a_file_keeps_its_own_template_and_others_get_none() {
    let own = metadata("gemma3", GEMMA_TOKENS, Some("{{ messages[0].content }}"));
    let found = model_template(&own).expect("the file's");
    assert_eq!(found.builtin, None);
    assert_eq!(found.source, "{{ messages[0].content }}");
    // Gemma without the turn markers (a base vocabulary) and other architectures: none.
    assert_eq!(
        model_template(&metadata("gemma3", &["<bos>", "<eos>"], None)),
        None
    );
    assert_eq!(model_template(&metadata("llama", GEMMA_TOKENS, None)), None);
}
