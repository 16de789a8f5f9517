//! Options objects passed from JavaScript. They cross the boundary as JSON (they are plain
//! numbers, strings and booleans), so a typo in a field name is reported instead of ignored.

use std::collections::BTreeMap;

use runahead_grammar::GrammarSpec;
use runahead_model::ChatMessage;
use runahead_speculate::LogitOptions;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::JsValue;

use crate::error::{Code, WebError};

/// Tokens of earlier outputs the suffix drafter keeps by default (a page can set its own bound
/// with the `historyTokens` load option, up to [`MAX_HISTORY_TOKENS`]).
pub const DEFAULT_HISTORY_TOKENS: usize = 1 << 16;
/// The largest `historyTokens`: the trie holds up to 40 nodes per token.
pub const MAX_HISTORY_TOKENS: usize = 1 << 20;

/// `Engine.load(bytes, options)`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadOptions {
    /// KV cache size in tokens (default: the GPU engine's 4096, capped by the model's
    /// trained context).
    pub context: Option<usize>,
    /// `auto` (default), `webgpu` or `cpu` (see [`crate::backend`]).
    #[serde(default)]
    pub backend: crate::backend::BackendOption,
    /// Tokens of earlier outputs the suffix drafter keeps (and a page persists); default
    /// [`DEFAULT_HISTORY_TOKENS`].
    pub history_tokens: Option<usize>,
    /// The CPU engine's threads (default 1; more only where [`crate::threads`] allows).
    pub threads: Option<usize>,
}

/// `engine.generate(prompt, options, onToken)`; defaults are the CLI's.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    /// 0 is greedy.
    pub temperature: f32,
    /// 0 keeps every token.
    pub top_k: usize,
    pub top_p: f32,
    pub seed: u64,
    /// Drafter name (`none`, `ngram`, `suffix`, `model` once a draft model is loaded, `auto`).
    pub draft: String,
    /// Wrap the prompt in the model's chat template as one user message.
    pub chat: bool,
    /// The generation ends when its text contains one of these (checked by the generation).
    pub stop: Vec<String>,
    /// Draft tokens verified per step: `"auto"` (the device's verification cost, measured at
    /// the first speculative generation, weighed against the running acceptance) or a number.
    pub depth: DepthOption,
    /// Structured output: the text must match this grammar, regex or JSON schema.
    pub grammar: Option<GrammarOption>,
    /// Report each token's log-probability (`result.logprobs`).
    pub logprobs: bool,
    /// With `logprobs`: the most likely alternatives listed per token (0 to 20).
    pub top_logprobs: usize,
    /// OpenAI's penalties over the generated tokens (-2 to 2).
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// Token id (as a string key, as JSON objects have them) -> bias added to its logit
    /// (-100 to 100).
    pub logit_bias: BTreeMap<String, f32>,
    /// Functions the model may call, in OpenAI's shape `{type: "function", function: {name,
    /// description, parameters}}`: rendered into the prompt, and the reply read back as
    /// `content` and `tool_calls`.
    pub tools: Vec<serde_json::Value>,
    /// OpenAI's `tool_choice`: `"auto"` (default), `"none"`, `"required"` or `{type:
    /// "function", function: {name}}`.
    pub tool_choice: Option<serde_json::Value>,
    /// Whether one reply may make several calls (default true, as OpenAI's).
    pub parallel_tool_calls: Option<bool>,
}

impl GenerateOptions {
    /// The decoding crate's logit options (their ranges are checked by the generation).
    pub fn logit_options(&self) -> Result<LogitOptions, WebError> {
        if self.top_logprobs > 0 && !self.logprobs {
            return Err(WebError::new(
                Code::InvalidOption,
                "top_logprobs: needs logprobs: true",
            ));
        }
        let mut logit_bias = Vec::with_capacity(self.logit_bias.len());
        for (key, &bias) in &self.logit_bias {
            let token = key.parse::<u32>().map_err(|_| {
                WebError::new(
                    Code::InvalidOption,
                    format!("logit_bias: keys are token ids, got {key:?}"),
                )
            })?;
            logit_bias.push((token, bias));
        }
        Ok(LogitOptions {
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            logit_bias,
            logprobs: self.logprobs.then_some(self.top_logprobs),
        })
    }
}

/// `grammar`: exactly one of a Lark grammar, a regex or a JSON schema (an object, `true`, or
/// its JSON text), the shapes `runahead generate --grammar / --json-schema` take.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GrammarOption {
    pub lark: Option<String>,
    pub regex: Option<String>,
    #[serde(rename = "jsonSchema", alias = "json_schema")]
    pub json_schema: Option<serde_json::Value>,
}

impl GrammarOption {
    /// The grammar crate's description of it, or why it is not one.
    pub fn spec(&self) -> Result<GrammarSpec, WebError> {
        let spec = match (&self.lark, &self.regex, &self.json_schema) {
            (Some(lark), None, None) => GrammarSpec::Lark(lark.clone()),
            (None, Some(regex), None) => GrammarSpec::Regex(regex.clone()),
            (None, None, Some(serde_json::Value::String(text))) => {
                GrammarSpec::JsonSchema(text.clone())
            }
            (None, None, Some(schema)) => GrammarSpec::JsonSchema(schema.to_string()),
            _ => {
                return Err(WebError::new(
                    Code::InvalidOption,
                    "grammar: expected exactly one of {lark}, {regex} or {jsonSchema}",
                ))
            }
        };
        Ok(spec)
    }
}

/// `depth`: a number, or a name (only `"auto"` is valid; others are refused by validation with
/// a message rather than by the parser's).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum DepthOption {
    Fixed(usize),
    Named(String),
}

impl std::fmt::Display for DepthOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DepthOption::Fixed(n) => write!(f, "{n}"),
            DepthOption::Named(name) => write!(f, "\"{name}\""),
        }
    }
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 128,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            draft: "none".into(),
            chat: false,
            stop: Vec::new(),
            depth: DepthOption::Named("auto".into()),
            grammar: None,
            logprobs: false,
            top_logprobs: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            logit_bias: BTreeMap::new(),
            tools: Vec::new(),
            tool_choice: None,
            parallel_tool_calls: None,
        }
    }
}

/// What `generate` continues: text, or a conversation for the model's chat template.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Text(String),
    Messages(Vec<ChatMessage>),
}

/// One message as the page sends it: `{role, content}`, and the fields chat templates read
/// beside them (OpenAI's `name`, an assistant's `tool_calls`, a tool result's `tool_call_id`),
/// passed to the template as given; other fields are ignored.
#[derive(Deserialize)]
struct MessageIn {
    role: String,
    content: String,
    name: Option<serde_json::Value>,
    tool_calls: Option<serde_json::Value>,
    tool_call_id: Option<serde_json::Value>,
}

/// Reads `generate`'s first argument: a string, or an array of `{role, content}`.
pub fn prompt_from_js(value: &JsValue) -> Result<Prompt, WebError> {
    if let Some(text) = value.as_string() {
        return Ok(Prompt::Text(text));
    }
    let not_messages = || {
        WebError::new(
            Code::InvalidMessages,
            "expected a prompt string or an array of messages {role, content}",
        )
    };
    if !js_sys::Array::is_array(value) {
        return Err(not_messages());
    }
    let json = js_sys::JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(not_messages)?;
    messages_from_json(&json).map(Prompt::Messages)
}

/// The JSON half of [`prompt_from_js`] for an array of messages.
pub fn messages_from_json(json: &str) -> Result<Vec<ChatMessage>, WebError> {
    let messages: Vec<MessageIn> = serde_json::from_str(json).map_err(|e| {
        WebError::new(
            Code::InvalidMessages,
            format!("messages: each must be {{role, content}} with string values: {e}"),
        )
    })?;
    Ok(messages
        .into_iter()
        .map(|m| {
            let mut message = ChatMessage::new(&m.role, &m.content);
            let fields = [
                ("name", m.name),
                ("tool_calls", m.tool_calls),
                ("tool_call_id", m.tool_call_id),
            ];
            for (key, value) in fields {
                if let Some(value) = value.filter(|v| !v.is_null()) {
                    message.fields.insert(key.into(), value);
                }
            }
            message
        })
        .collect())
}

/// Reads an options object; `undefined` and `null` give the defaults.
pub fn from_js<T: DeserializeOwned + Default>(value: &JsValue) -> Result<T, WebError> {
    if value.is_undefined() || value.is_null() {
        return Ok(T::default());
    }
    let json = js_sys::JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| {
            WebError::new(
                Code::InvalidOption,
                "options must be a plain object of numbers, strings and booleans",
            )
        })?;
    from_json(&json)
}

/// The JSON half of [`from_js`].
pub fn from_json<T: DeserializeOwned>(json: &str) -> Result<T, WebError> {
    serde_json::from_str(json)
        .map_err(|e| WebError::new(Code::InvalidOption, format!("invalid options: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_fields_and_defaults() {
        let o: GenerateOptions =
            from_json(r#"{"maxTokens": 4, "topP": 0.5, "draft": "ngram"}"#).expect("valid options");
        assert_eq!(o.max_tokens, 4);
        assert_eq!(o.top_p, 0.5);
        assert_eq!(o.draft, "ngram");
        assert_eq!(o.temperature, 0.0);
        assert_eq!(o.depth, DepthOption::Named("auto".into()));
        let fixed: GenerateOptions = from_json(r#"{"depth": 4}"#).expect("valid options");
        assert_eq!(fixed.depth, DepthOption::Fixed(4));
        let l: LoadOptions = from_json(r#"{"context": 512}"#).expect("valid options");
        assert_eq!(l.context, Some(512));
    }

    #[test]
    fn grammars_take_one_of_three_shapes() {
        let spec = |json: &str| {
            from_json::<GenerateOptions>(json)
                .and_then(|o| o.grammar.unwrap_or_default().spec())
                .map_err(|e| e.code)
        };
        assert_eq!(
            spec(r#"{"grammar": {"regex": "[0-9]+"}}"#),
            Ok(GrammarSpec::Regex("[0-9]+".into()))
        );
        assert_eq!(
            spec(r#"{"grammar": {"lark": "start: \"a\""}}"#),
            Ok(GrammarSpec::Lark("start: \"a\"".into()))
        );
        assert_eq!(
            spec(r#"{"grammar": {"json_schema": {"type": "object"}}}"#),
            Ok(GrammarSpec::JsonSchema(r#"{"type":"object"}"#.into()))
        );
        assert_eq!(
            spec(r#"{"grammar": {"jsonSchema": "{}"}}"#),
            Ok(GrammarSpec::JsonSchema("{}".into()))
        );
        for bad in [
            r#"{"grammar": {}}"#,
            r#"{"grammar": {"regex": "a", "lark": "b"}}"#,
            r#"{"grammar": {"gbnf": "x"}}"#,
            r#"{"grammar": "x"}"#,
        ] {
            assert_eq!(spec(bad), Err(Code::InvalidOption), "{bad}");
        }
    }

    #[test]
    fn logit_options_read_openais_fields() {
        let o: GenerateOptions = from_json(
            r#"{"logprobs": true, "topLogprobs": 3, "frequencyPenalty": 0.5,
                "presencePenalty": -1, "logitBias": {"12": -100, "7": 2.5}}"#,
        )
        .expect("valid options");
        assert_eq!(
            o.logit_options().expect("valid"),
            LogitOptions {
                frequency_penalty: 0.5,
                presence_penalty: -1.0,
                logit_bias: vec![(12, -100.0), (7, 2.5)],
                logprobs: Some(3),
            }
        );
        let bad_key: GenerateOptions = from_json(r#"{"logitBias": {"a": 1}}"#).expect("parses");
        assert_eq!(
            bad_key.logit_options().unwrap_err().code,
            Code::InvalidOption
        );
        let top_alone: GenerateOptions = from_json(r#"{"topLogprobs": 2}"#).expect("parses");
        assert_eq!(
            top_alone.logit_options().unwrap_err().code,
            Code::InvalidOption
        );
    }

    #[test]
    fn typos_and_wrong_types_are_reported() {
        let typo = from_json::<GenerateOptions>(r#"{"max_tokens": 4}"#).unwrap_err();
        assert_eq!(typo.code, Code::InvalidOption);
        assert!(typo.message.contains("max_tokens"), "{}", typo.message);
        let negative = from_json::<GenerateOptions>(r#"{"maxTokens": -1}"#).unwrap_err();
        assert_eq!(negative.code, Code::InvalidOption);
        let fraction = from_json::<LoadOptions>(r#"{"context": 1.5}"#).unwrap_err();
        assert_eq!(fraction.code, Code::InvalidOption);
        let stop = from_json::<GenerateOptions>(r#"{"stop": "x"}"#).unwrap_err();
        assert_eq!(stop.code, Code::InvalidOption);
    }

    #[test]
    fn messages_parse_with_extra_fields_and_refuse_wrong_shapes() {
        let m = messages_from_json(r#"[{"role": "user", "content": "Hi", "other": 1}]"#)
            .expect("valid messages");
        assert_eq!(m, [ChatMessage::new("user", "Hi")]);
        let m = messages_from_json(
            r#"[{"role": "assistant", "content": "", "name": "a", "tool_call_id": null,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {}}}]}]"#,
        )
        .expect("valid messages");
        assert_eq!(m[0].fields["name"], "a");
        assert_eq!(m[0].fields["tool_calls"][0]["id"], "c1");
        assert!(!m[0].fields.contains_key("tool_call_id"));
        for bad in [
            r#"[{"role": "user"}]"#,
            r#"[{"role": 1, "content": "x"}]"#,
            "{}",
        ] {
            let e = messages_from_json(bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidMessages, "{bad}");
        }
    }
}
