//! Tools rendered into a real model's prompt exactly as Hugging Face's `apply_chat_template`
//! renders them (the fixture is Jinja2's output: scripts/fixtures/render_tools.py), and the
//! reply of a template without tool support gets the tools in its system message.

use std::collections::BTreeMap;
use std::path::PathBuf;

use runahead_gguf::GgufFile;
use runahead_model::testing::sha256_hex;
use runahead_model::tools::{parse_tools, ToolSyntax};
use runahead_model::{ChatMessage, ChatTemplate};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn message(v: &Value) -> ChatMessage {
    let mut fields = BTreeMap::new();
    for (k, x) in v.as_object().unwrap() {
        if k != "role" && k != "content" {
            fields.insert(k.clone(), x.clone());
        }
    }
    let mut m = ChatMessage::new(v["role"].as_str().unwrap(), v["content"].as_str().unwrap());
    m.fields = fields;
    m
}

#[test]
fn qwen_renders_tools_as_hugging_face_does() {
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/chat-tools/qwen2.5-coder-0.5b.json"))
            .unwrap(),
    )
    .unwrap();
    let path = root()
        .join("models")
        .join(fixture["model"].as_str().unwrap());
    let file = GgufFile::open(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/setup.sh fetches it)", path.display()));
    let source = file.header.metadata.str("tokenizer.chat_template").unwrap();
    assert_eq!(
        sha256_hex(source.as_bytes()),
        fixture["template_sha256"].as_str().unwrap(),
        "the model's template is not the fixture's: regenerate it (scripts/fixtures/render_tools.py)"
    );
    let template = ChatTemplate::new(source, "", "").unwrap();
    assert_eq!(template.tool_syntax(), ToolSyntax::Hermes);
    let tools = parse_tools(fixture["tools"].as_array().unwrap()).unwrap();
    let messages: Vec<ChatMessage> = fixture["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(message)
        .collect();
    let rendered = template
        .render_conversation_with_tools(&messages, &tools)
        .unwrap();
    assert_eq!(rendered, fixture["rendered"].as_str().unwrap());
}

#[test]
fn templates_without_tools_get_them_in_the_system_message() {
    let template = ChatTemplate::new(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(template.tool_syntax(), ToolSyntax::Json);
    let tools = parse_tools(&[serde_json::json!({"type": "function", "function": {
        "name": "get_time", "description": "The time now."}})])
    .unwrap();
    let text = template
        .render_conversation_with_tools(&[ChatMessage::new("user", "Time?")], &tools)
        .unwrap();
    assert!(
        text.starts_with("<system>You can call these tools"),
        "{text}"
    );
    assert!(text.contains("- get_time: The time now. Arguments: {\"type\":\"object\"}"));
    assert!(text.ends_with("<user>Time?\n"), "{text}");
}
