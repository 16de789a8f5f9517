//! Every chat template shipped in a real GGUF here (the models, and llama.cpp's vocabulary-only
//! files in data/vocab/ that carry one) compiles and renders a conversation. Templates pass
//! through runahead's compile-time namespace guard (`chat/namespace_guard.rs`), which rewrites
//! each `{% set ns.attr = ... %}`: this is the check that the rewrite keeps real templates
//! working (Gemma 4's sets namespace attributes 18 times).

use std::path::PathBuf;

use runahead_gguf::GgufFile;
use runahead_model::{ChatMessage, ChatTemplate};

fn gguf_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["models", "data/vocab"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        files.extend(
            entries
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "gguf")),
        );
    }
    files.sort();
    files
}

#[test]
fn real_templates_compile_and_render() {
    let messages = [
        ChatMessage::new("user", "What is the capital of France?"),
        ChatMessage::new("assistant", "Paris."),
        ChatMessage::new("user", "And of Italy?"),
    ];
    let mut rendered = Vec::new();
    for path in gguf_files() {
        let Ok(file) = GgufFile::open(&path) else {
            continue; // not every file here is a model (the suite's own checks cover them)
        };
        let Ok(source) = file.header.metadata.str("tokenizer.chat_template") else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let template =
            ChatTemplate::new(source, "<s>", "</s>").unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = template
            .render(&messages, true)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for m in &messages {
            assert!(
                text.contains(&m.content),
                "{name}: {:?} not in {text:?}",
                m.content
            );
        }
        rendered.push(name);
    }
    println!("rendered: {rendered:?}");
    // The two models every test here uses carry templates; without them this test proves nothing.
    assert!(rendered.len() >= 2, "{rendered:?}");
}
