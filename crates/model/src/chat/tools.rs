//! Tools (function calling): the functions an app offers, rendered into the prompt in the form
//! the model was trained on, the grammar that makes a reply a well-formed call, and the calls
//! read back out of the reply's text.
//!
//! Two syntaxes:
//! - [`ToolSyntax::Hermes`]: the chat template renders `tools` itself and the model answers
//!   `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` (Qwen2.5, Qwen3, SmolLM3,
//!   Hermes): chosen when the template mentions `<tool_call>`.
//! - [`ToolSyntax::Json`]: every other template. The tools and the answer's shape are written
//!   into the system message, and the reply is one JSON object, `{"tool_calls": [{"name": ...,
//!   "arguments": {...}}]}` or `{"response": "..."}`, which the grammar enforces (llama.cpp's
//!   generic tool format has this shape too). A model not trained on tools follows it because
//!   the grammar leaves it nothing else to write.

use serde_json::{json, Map, Value};

use crate::{ChatMessage, ModelError, Result};

/// How tools reach the prompt and how the reply spells a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSyntax {
    Hermes,
    Json,
}

impl ToolSyntax {
    /// The syntax a chat template's source was written for.
    pub fn of_template(source: &str) -> Self {
        if source.contains("<tool_call>") && source.contains("tools") {
            ToolSyntax::Hermes
        } else {
            ToolSyntax::Json
        }
    }
}

/// One function an app offers: OpenAI's `{"type": "function", "function": {name, description,
/// parameters}}`, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    /// The whole definition as the app gave it (templates render it with `tojson`).
    pub definition: Value,
    /// JSON schema of the arguments (`{"type": "object"}` when the tool gives none).
    pub parameters: Value,
}

/// Whether and which tool the reply must call (OpenAI's `tool_choice`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides: a call or a text answer.
    Auto,
    /// At least one call.
    Required,
    /// A call of this function.
    Function(String),
}

/// A call read from a reply; `arguments` is JSON text, as OpenAI returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// A reply split into its text and its calls.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ToolReply {
    pub content: String,
    pub calls: Vec<ToolCall>,
}

/// Most tools one request may offer (each is rendered into the prompt).
pub const MAX_TOOLS: usize = 128;

/// Reads OpenAI-shaped tool definitions: each `{"type": "function", "function": {"name", ...}}`
/// with a name of letters, digits, `_` and `-` (OpenAI's rule) and, if given, an object schema.
pub fn parse_tools(tools: &[Value]) -> Result<Vec<Tool>> {
    let bad = |i: usize, why: &str| ModelError::InvalidTools(format!("tools[{i}]: {why}"));
    if tools.len() > MAX_TOOLS {
        return Err(ModelError::InvalidTools(format!(
            "{} tools, more than the {MAX_TOOLS} a request may offer",
            tools.len()
        )));
    }
    let mut out: Vec<Tool> = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad(
                i,
                "expected {\"type\": \"function\", \"function\": {...}}",
            ));
        }
        let f = t
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(i, "missing \"function\""))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(i, "missing function.name"))?;
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(bad(
                i,
                "function.name must be 1-64 letters, digits, '_' or '-'",
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(bad(i, &format!("function {name:?} is offered twice")));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => return Err(bad(i, "function.parameters must be a JSON schema object")),
        };
        out.push(Tool {
            name: name.to_owned(),
            definition: t.clone(),
            parameters,
        });
    }
    Ok(out)
}

/// The JSON schema of one call of any of `tools` (or of `only`): `{"name": <const>,
/// "arguments": <its parameters>}`.
fn call_schema(tools: &[Tool], only: Option<&str>) -> Value {
    let variants: Vec<Value> = tools
        .iter()
        .filter(|t| only.is_none_or(|n| n == t.name))
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    match variants.len() {
        1 => variants.into_iter().next().unwrap_or(Value::Null),
        _ => json!({"anyOf": variants}),
    }
}

/// Most calls one reply may hold under `parallel`, so a constrained reply ends before
/// `max_tokens` even when the model keeps writing calls.
pub const MAX_PARALLEL_CALLS: usize = 128;

/// The grammar (llguidance's Lark syntax) a reply must match under `choice`: one call, or one
/// or more with `parallel` (OpenAI's `parallel_tool_calls`). `None` when the reply is free text
/// (Hermes with [`ToolChoice::Auto`]: the model writes a call or an answer and [`parse_reply`]
/// tells which).
pub fn tool_grammar(
    syntax: ToolSyntax,
    tools: &[Tool],
    choice: &ToolChoice,
    parallel: bool,
) -> Result<Option<String>> {
    let only = match choice {
        ToolChoice::Function(name) => {
            if !tools.iter().any(|t| &t.name == name) {
                return Err(ModelError::InvalidTools(format!(
                    "tool_choice names {name:?}, which is not among the tools"
                )));
            }
            Some(name.as_str())
        }
        _ => None,
    };
    if tools.is_empty() {
        return Err(ModelError::InvalidTools(
            "tool_choice needs at least one tool".into(),
        ));
    }
    let mut call = call_schema(tools, only);
    let grammar = match (syntax, choice) {
        (ToolSyntax::Hermes, ToolChoice::Auto) => return Ok(None),
        // `<tool_call>` and `</tool_call>` are the vocabulary's own tokens in these models.
        (ToolSyntax::Hermes, _) => {
            with_layout(&mut call);
            let more = if parallel {
                format!(" (\"\\n\" call){{0,{}}}", MAX_PARALLEL_CALLS - 1)
            } else {
                String::new()
            };
            format!(
                "start: call{more}\ncall: <tool_call> \"\\n\" body \"\\n\" </tool_call>\n\
                 body: %json {call}\n"
            )
        }
        (ToolSyntax::Json, choice) => {
            let calls = json!({
                "type": "object",
                "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1,
                                              "maxItems": if parallel { MAX_PARALLEL_CALLS } else { 1 }}},
                "required": ["tool_calls"],
                "additionalProperties": false,
            });
            let mut schema = match choice {
                ToolChoice::Auto => json!({"anyOf": [calls, {
                    "type": "object",
                    "properties": {"response": {"type": "string"}},
                    "required": ["response"],
                    "additionalProperties": false,
                }]}),
                _ => calls,
            };
            with_layout(&mut schema);
            format!("start: %json {schema}\n")
        }
    };
    Ok(Some(grammar))
}

/// JSON in one layout, `{"a": 1, "b": [2, 3]}` (as the templates print arguments), with no
/// other whitespace: keys and separators are then forced tokens, and the model cannot spend its
/// tokens on indentation.
fn with_layout(schema: &mut Value) {
    if let Value::Object(map) = schema {
        map.insert(
            "x-guidance".into(),
            json!({"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": false}),
        );
    }
}

/// The system text [`ToolSyntax::Json`] adds: the tools and the answer's shape.
pub fn json_tools_prompt(tools: &[Tool]) -> String {
    let mut text = String::from("You can call these tools (JSON schemas of their arguments):\n");
    for t in tools {
        let description = t
            .definition
            .pointer("/function/description")
            .and_then(Value::as_str)
            .unwrap_or("");
        text.push_str(&format!(
            "- {}: {} Arguments: {}\n",
            t.name, description, t.parameters
        ));
    }
    text.push_str(
        "Answer with one JSON object: {\"tool_calls\": [{\"name\": <tool>, \"arguments\": \
         {...}}]} to call tools, or {\"response\": <text>} to answer directly.",
    );
    text
}

/// `messages` with [`json_tools_prompt`] in the system message (appended to the first one, or
/// a new one in front).
pub fn with_json_tools_prompt(messages: &[ChatMessage], tools: &[Tool]) -> Vec<ChatMessage> {
    let prompt = json_tools_prompt(tools);
    let mut out = messages.to_vec();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{prompt}", first.content);
        }
        _ => out.insert(0, ChatMessage::new("system", &prompt)),
    }
    out
}

/// Splits a reply into its text and the calls it makes. A call that does not parse (a reply cut
/// off by `max_tokens`, or a free-running model's malformed JSON) stays in the text.
pub fn parse_reply(syntax: ToolSyntax, text: &str) -> ToolReply {
    match syntax {
        ToolSyntax::Hermes => parse_hermes(text),
        ToolSyntax::Json => parse_json(text),
    }
}

fn parse_hermes(text: &str) -> ToolReply {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut reply = ToolReply::default();
    let mut rest = text;
    let mut content = String::new();
    while let Some(start) = rest.find(OPEN) {
        let body_start = start + OPEN.len();
        let (body, next) = match rest[body_start..].find(CLOSE) {
            Some(end) => (
                &rest[body_start..body_start + end],
                &rest[body_start + end + CLOSE.len()..],
            ),
            None => (&rest[body_start..], ""),
        };
        match call_of(body.trim()) {
            Some(call) => {
                content.push_str(&rest[..start]);
                reply.calls.push(call);
            }
            None => content.push_str(&rest[..body_start + body.len()]),
        }
        rest = next;
    }
    content.push_str(rest);
    reply.content = content.trim().to_owned();
    reply
}

fn parse_json(text: &str) -> ToolReply {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text.trim()) else {
        return ToolReply {
            content: text.to_owned(),
            calls: Vec::new(),
        };
    };
    if let Some(Value::String(response)) = object.get("response") {
        return ToolReply {
            content: response.clone(),
            calls: Vec::new(),
        };
    }
    let calls: Option<Vec<ToolCall>> = object
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.iter().filter_map(call_of_value).collect());
    match calls {
        Some(calls) if !calls.is_empty() => ToolReply {
            content: String::new(),
            calls,
        },
        _ => ToolReply {
            content: text.to_owned(),
            calls: Vec::new(),
        },
    }
}

fn call_of(body: &str) -> Option<ToolCall> {
    call_of_value(&serde_json::from_str(body).ok()?)
}

/// `{"name": ..., "arguments": {...}}`; arguments given as a JSON string are kept as that text.
fn call_of_value(v: &Value) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?.to_owned();
    let arguments = match v.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(a) => serde_json::to_string(a).ok()?,
    };
    Some(ToolCall { name, arguments })
}

/// The `tools` a template renders: each definition as the app gave it.
pub(super) fn template_tools(tools: &[Tool]) -> Value {
    Value::Array(tools.iter().map(|t| t.definition.clone()).collect())
}

/// An assistant's earlier calls as HF templates read them: `tool_calls[i].function.arguments`
/// as an object (OpenAI sends it as JSON text).
pub fn template_tool_calls(calls: &[ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                let arguments = serde_json::from_str::<Value>(&c.arguments)
                    .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                let mut function = Map::new();
                function.insert("name".into(), Value::String(c.name.clone()));
                function.insert("arguments".into(), arguments);
                json!({"type": "function", "function": function})
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Vec<Tool> {
        parse_tools(&[json!({"type": "function", "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]},
        }})])
        .unwrap()
    }

    #[test]
    fn hermes_replies_split_into_text_and_calls() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \
                    {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>";
        let reply = parse_reply(ToolSyntax::Hermes, text);
        assert_eq!(reply.content, "Let me check.");
        assert_eq!(
            reply.calls,
            vec![
                ToolCall {
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into()
                },
                ToolCall {
                    name: "f".into(),
                    arguments: "{}".into()
                },
            ]
        );
        // Cut off inside the call: no call, the text kept.
        let cut = "<tool_call>\n{\"name\": \"get_wea";
        let reply = parse_reply(ToolSyntax::Hermes, cut);
        assert!(reply.calls.is_empty());
        assert_eq!(reply.content, cut);
        // Unclosed but complete (a stop before `</tool_call>`): the call.
        let open = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}";
        assert_eq!(
            parse_reply(ToolSyntax::Hermes, open).calls,
            vec![ToolCall {
                name: "f".into(),
                arguments: r#"{"a": 1}"#.into()
            }]
        );
    }

    #[test]
    fn json_replies_are_calls_or_a_response() {
        let calls = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}"#;
        let reply = parse_reply(ToolSyntax::Json, calls);
        assert_eq!(reply.calls.len(), 1);
        assert_eq!(reply.calls[0].arguments, r#"{"city":"Oslo"}"#);
        let answer = parse_reply(ToolSyntax::Json, r#"{"response": "Hello."}"#);
        assert_eq!(
            answer,
            ToolReply {
                content: "Hello.".into(),
                calls: vec![]
            }
        );
        let plain = parse_reply(ToolSyntax::Json, "just text");
        assert_eq!(plain.content, "just text");
    }

    #[test]
    fn tools_are_checked() {
        let err = |v: Value| parse_tools(&[v]).unwrap_err().to_string();
        assert!(err(json!({"type": "custom"})).contains("tools[0]"));
        assert!(err(json!({"type": "function", "function": {"name": "a b"}})).contains("name"));
        assert!(
            err(json!({"type": "function", "function": {"name": "a", "parameters": 3}}))
                .contains("parameters")
        );
        let two = [
            json!({"type": "function", "function": {"name": "a"}}),
            json!({"type": "function", "function": {"name": "a"}}),
        ];
        assert!(parse_tools(&two).unwrap_err().to_string().contains("twice"));
        let tools = weather();
        assert_eq!(tools[0].parameters["required"], json!(["city"]));
        let e = tool_grammar(
            ToolSyntax::Json,
            &tools,
            &ToolChoice::Function("nope".into()),
            true,
        );
        assert!(e.unwrap_err().to_string().contains("nope"));
    }

    #[test]
    fn grammars_name_the_tools() {
        let tools = weather();
        assert_eq!(
            tool_grammar(ToolSyntax::Hermes, &tools, &ToolChoice::Auto, true).unwrap(),
            None
        );
        let g = tool_grammar(ToolSyntax::Hermes, &tools, &ToolChoice::Required, false)
            .unwrap()
            .unwrap();
        assert!(
            g.contains("<tool_call>") && g.contains("\"const\":\"get_weather\""),
            "{g}"
        );
        let g = tool_grammar(ToolSyntax::Json, &tools, &ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        assert!(g.contains("response") && g.contains("tool_calls"), "{g}");
    }

    #[test]
    fn the_json_prompt_joins_the_system_message() {
        let tools = weather();
        let m = with_json_tools_prompt(&[ChatMessage::new("user", "hi")], &tools);
        assert_eq!(m[0].role, "system");
        assert!(m[0].content.contains("get_weather: The weather in a city."));
        let m = with_json_tools_prompt(
            &[
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "hi"),
            ],
            &tools,
        );
        assert_eq!(m.len(), 2);
        assert!(m[0].content.starts_with("Be brief.\n\nYou can call"));
    }
}
