//! Tool calls on real models: with `tool_choice` required (or naming a function), the reply is
//! a call that parses and whose arguments validate against the tool's schema, in the syntax of
//! the model's template (Qwen2.5's `<tool_call>` tags; SmolLM2's template has none, so the JSON
//! form); greedy speculative decoding returns what greedy plain decoding returns.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_grammar::{Grammar, GrammarSpec, Vocabulary};
use runahead_model::tools::{
    parse_reply, parse_tools, tool_grammar, Tool, ToolChoice, ToolSyntax, MAX_PARALLEL_CALLS,
};
use runahead_model::{ChatMessage, ChatTemplate, Tokenizer};
use runahead_speculate::{
    generate_constrained, Constraint, Depth, GenerateOptions, KvTokens, NgramDrafter,
    SamplingParams,
};
use serde_json::{json, Value};

fn model(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name);
    assert!(
        p.exists(),
        "models/{name} is missing (scripts/setup.sh fetches it)"
    );
    p
}

fn tools() -> Vec<Tool> {
    parse_tools(&[
        json!({"type": "function", "function": {
            "name": "get_weather", "description": "The current weather in a city.",
            "parameters": {"type": "object",
                "properties": {"city": {"type": "string", "maxLength": 24},
                               "unit": {"type": "string", "enum": ["C", "F"]}},
                "required": ["city", "unit"], "additionalProperties": false}}}),
        json!({"type": "function", "function": {
            "name": "get_time", "description": "The time now in a time zone.",
            "parameters": {"type": "object",
                "properties": {"zone": {"type": "string", "maxLength": 24}},
                "required": ["zone"], "additionalProperties": false}}}),
    ])
    .unwrap()
}

/// Greedy generations of the reply to one question, plain and with the n-gram drafter; both
/// returned as text.
fn replies(name: &str, choice: &ToolChoice) -> (ToolSyntax, String, String) {
    let file = Arc::new(GgufFile::open(model(name)).unwrap());
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let source = file.header.metadata.str("tokenizer.chat_template").unwrap();
    let template = ChatTemplate::for_tokenizer(source, &tok).unwrap();
    let tools = tools();
    let messages = [ChatMessage::new(
        "user",
        "What is the weather in Paris, in Celsius?",
    )];
    let prompt = template
        .render_conversation_with_tools(&messages, &tools)
        .unwrap();
    let prompt = tok.encode_rendered(&prompt).unwrap();
    let syntax = template.tool_syntax();
    let lark = tool_grammar(syntax, &tools, choice, false)
        .unwrap()
        .unwrap();
    let vocab = Vocabulary::new(&tok).unwrap();
    let options = CpuOptions {
        context: Some(1024),
        threads: Some(2),
        isa: None,
    };
    let mut engine = CpuEngine::load(file.clone(), &options).unwrap();
    let opts = GenerateOptions {
        max_tokens: 64,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    };
    let mut run = |drafter: Option<&mut NgramDrafter>| {
        let mut grammar = Grammar::new(&vocab, &GrammarSpec::Lark(lark.clone())).unwrap();
        let g = block_on(generate_constrained(
            &mut engine,
            drafter.map(|d| d as &mut dyn runahead_speculate::Drafter),
            &mut KvTokens::default(),
            &prompt,
            &opts,
            Some(&mut grammar as &mut dyn Constraint),
            |t| tok.is_end(t),
            |_, _| ControlFlow::Continue(()),
        ))
        .unwrap();
        let kept: Vec<u32> = g
            .tokens
            .iter()
            .copied()
            .filter(|&t| !tok.is_end(t))
            .collect();
        // Special tokens (`<tool_call>`) are part of the reply's text here.
        kept.iter().map(|&t| tok.token_text(t)).collect::<String>()
    };
    let plain = run(None);
    let speculative = run(Some(&mut NgramDrafter::default()));
    (syntax, plain, speculative)
}

fn check_call(reply: &str, syntax: ToolSyntax, only: Option<&str>) {
    let parsed = parse_reply(syntax, reply);
    assert!(!parsed.calls.is_empty(), "no call in {reply:?}");
    for call in &parsed.calls {
        if let Some(name) = only {
            assert_eq!(call.name, name, "{reply:?}");
        }
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        let schema = &tools()
            .into_iter()
            .find(|t| t.name == call.name)
            .unwrap()
            .parameters;
        for key in schema["required"].as_array().unwrap() {
            assert!(
                args.get(key.as_str().unwrap()).is_some(),
                "{key} missing in {reply:?}"
            );
        }
        if call.name == "get_weather" {
            assert!(
                ["C", "F"].contains(&args["unit"].as_str().unwrap()),
                "{reply:?}"
            );
        }
    }
}

#[test]
fn qwen_calls_a_tool_in_its_own_syntax() {
    let (syntax, plain, speculative) =
        replies("Qwen2.5-Coder-0.5B-Instruct.gguf", &ToolChoice::Required);
    assert_eq!(syntax, ToolSyntax::Hermes);
    assert!(plain.starts_with("<tool_call>\n{\"name\": "), "{plain:?}");
    assert_eq!(speculative, plain);
    check_call(&plain, syntax, None);
}

#[test]
fn smollm2_calls_the_named_tool_in_the_json_form() {
    let choice = ToolChoice::Function("get_time".into());
    let (syntax, plain, speculative) = replies("SmolLM2-135M-Instruct.Q4_1.gguf", &choice);
    assert_eq!(syntax, ToolSyntax::Json);
    assert_eq!(speculative, plain);
    check_call(&plain, syntax, Some("get_time"));
}

/// With parallel calls, Qwen's `<tool_call>` grammar takes up to [`MAX_PARALLEL_CALLS`] calls
/// and then only the end, so a model that keeps writing calls stops instead of running to
/// `max_tokens`.
#[test]
fn parallel_calls_end_at_the_bound() {
    let file = GgufFile::open(model("Qwen2.5-Coder-0.5B-Instruct.gguf")).unwrap();
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let vocab = Vocabulary::new(&tok).unwrap();
    let lark = tool_grammar(ToolSyntax::Hermes, &tools(), &ToolChoice::Required, true)
        .unwrap()
        .unwrap();
    let mut grammar = Grammar::new(&vocab, &GrammarSpec::Lark(lark)).unwrap();
    let call =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";
    let calls = vec![call; MAX_PARALLEL_CALLS].join("\n");
    let tokens = tok.encode_rendered(&calls).unwrap();
    assert_eq!(grammar.allowed_prefix(&tokens).unwrap(), tokens.len());
    let more = tok.encode_rendered(&format!("{calls}\n{call}")).unwrap();
    let allowed = grammar.allowed_prefix(&more).unwrap();
    assert!(allowed < more.len(), "a call past the bound is allowed");
    assert!(
        allowed >= tokens.len(),
        "{allowed} of {} tokens",
        tokens.len()
    );
}
