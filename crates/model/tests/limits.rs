//! The limits that bound what a hostile file can cost, measured against the real models: each
//! must leave a wide margin over what they need (the numbers are quoted where the limits are
//! set: `runahead_gguf::DEFAULT_HEADER_BUDGET`, `runahead_model::TEMPLATE_FUEL`).

mod common;

use common::{open_model, QWEN_05B, SMOLLM2};
use runahead_gguf::DEFAULT_HEADER_BUDGET;
use runahead_model::{ChatMessage, ChatTemplate, ModelConfig, Tokenizer, TEMPLATE_FUEL};

/// A conversation of `turns` user/assistant pairs after a system message.
fn conversation(turns: usize) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::new("system", "You are a helpful assistant.")];
    for i in 0..turns {
        messages.push(ChatMessage::new(
            "user",
            &format!("Question {i}: what is {i} + {i}?"),
        ));
        messages.push(ChatMessage::new(
            "assistant",
            &format!("{i} + {i} = {}.", 2 * i),
        ));
    }
    messages
}

#[test]
fn real_models_fit_the_limits_with_margin() {
    for (file, _) in [SMOLLM2, QWEN_05B] {
        let model = open_model(file);
        let memory = model.header.memory;
        let config = ModelConfig::from_file(&model).unwrap();
        let tok = Tokenizer::from_metadata(&model.header.metadata).unwrap();
        let source = model
            .header
            .metadata
            .str("tokenizer.chat_template")
            .unwrap();
        let template = ChatTemplate::for_tokenizer(source, &tok).unwrap();
        let (_, fuel_one) = template
            .render_with_cost(&[ChatMessage::new("user", "Hi")], true)
            .unwrap();
        let messages = conversation(50);
        let (text, fuel) = template.render_with_cost(&messages, true).unwrap();
        println!(
            "{file}: header {memory} bytes ({:.1} MiB), vocab {}, template fuel {fuel_one} for \
             one message, {fuel} for {} messages ({} bytes)",
            memory as f64 / (1 << 20) as f64,
            config.vocab_size,
            messages.len(),
            text.len()
        );
        assert!(memory * 4 < DEFAULT_HEADER_BUDGET, "{file}: {memory} bytes");
        assert!(fuel * 100 < TEMPLATE_FUEL, "{file}: {fuel} steps");
    }
}
