//! Tools in the page: `generate`'s `tools`, `toolChoice` and `parallelToolCalls` read into the
//! model crate's tool types (the prompt, the grammar a call must match), and the reply split
//! into `content` and `tool_calls`, as `runahead generate --tools` does.

use runahead_model::tools::{parse_reply, parse_tools, tool_grammar, Tool, ToolChoice, ToolSyntax};
use serde_json::{json, Value};

use crate::error::{Code, WebError};
use crate::options::GenerateOptions;

/// What a generation with tools asks for.
#[derive(Debug)]
pub struct ToolRequest {
    pub tools: Vec<Tool>,
    /// `None` for `"none"`: the tools are in the prompt, no call is asked for or read back.
    pub choice: Option<ToolChoice>,
    /// More than one call in a reply (OpenAI's `parallel_tool_calls`, default true).
    pub parallel: bool,
}

fn invalid(message: String) -> WebError {
    WebError::new(Code::InvalidOption, message)
}

impl ToolRequest {
    /// The tools the options give, checked; `None` without any.
    pub fn from_options(opts: &GenerateOptions) -> Result<Option<Self>, WebError> {
        let choice = opts.tool_choice.as_ref().filter(|c| !c.is_null());
        if opts.tools.is_empty() {
            return match choice.and_then(Value::as_str) {
                None if choice.is_none() => Ok(None),
                Some("none" | "auto") => Ok(None),
                _ => Err(invalid(
                    "toolChoice: asks for a call, but no tools are given".into(),
                )),
            };
        }
        let tools = parse_tools(&opts.tools)?;
        let choice = match choice {
            None => Some(ToolChoice::Auto),
            Some(Value::String(name)) => match name.as_str() {
                "auto" => Some(ToolChoice::Auto),
                "required" => Some(ToolChoice::Required),
                "none" => None,
                other => {
                    return Err(invalid(format!(
                        "toolChoice: expected \"auto\", \"none\", \"required\" or {{type: \"function\", function: {{name}}}}, got {other:?}"
                    )))
                }
            },
            Some(named) => {
                let name = named
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        invalid(
                            "toolChoice: expected {type: \"function\", function: {name}}".into(),
                        )
                    })?;
                if !tools.iter().any(|t| t.name == name) {
                    return Err(invalid(format!(
                        "toolChoice: names {name:?}, which is not one of the tools"
                    )));
                }
                Some(ToolChoice::Function(name.to_owned()))
            }
        };
        if choice.is_some() && opts.grammar.is_some() {
            return Err(invalid(
                "grammar: a reply that may call tools follows the tools' grammar; give tools or a grammar, not both".into(),
            ));
        }
        Ok(Some(ToolRequest {
            tools,
            choice,
            parallel: opts.parallel_tool_calls.unwrap_or(true),
        }))
    }

    /// The grammar (Lark) the reply must match; `None` where it is free text.
    pub fn grammar(&self, syntax: ToolSyntax) -> Result<Option<String>, WebError> {
        match &self.choice {
            None => Ok(None),
            Some(choice) => Ok(tool_grammar(syntax, &self.tools, choice, self.parallel)?),
        }
    }
}

/// Adds `content` (the reply's text without its calls) and `tool_calls` (`[{name, arguments}]`,
/// the arguments as JSON text) to a generation's result, read from its `text`.
pub fn split_reply(result: &mut Value, syntax: ToolSyntax) {
    let text = result
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let reply = parse_reply(syntax, text);
    let calls: Vec<Value> = reply
        .calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    if let Some(fields) = result.as_object_mut() {
        fields.insert("content".into(), reply.content.into());
        fields.insert("tool_calls".into(), calls.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::from_json;

    fn request(json: &str) -> Result<Option<ToolRequest>, WebError> {
        ToolRequest::from_options(&from_json::<GenerateOptions>(json).expect("options"))
    }

    const WEATHER: &str = r#"[{"type": "function", "function": {"name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]"#;

    #[test]
    fn tool_choice_reads_openai_values() {
        let with = |choice: &str| {
            request(&format!(
                r#"{{"tools": {WEATHER}, "toolChoice": {choice}}}"#
            ))
            .map(|r| r.expect("tools").choice)
        };
        assert_eq!(with("\"auto\"").unwrap(), Some(ToolChoice::Auto));
        assert_eq!(with("null").unwrap(), Some(ToolChoice::Auto));
        assert_eq!(with("\"required\"").unwrap(), Some(ToolChoice::Required));
        assert_eq!(with("\"none\"").unwrap(), None);
        assert_eq!(
            with(r#"{"type": "function", "function": {"name": "weather"}}"#).unwrap(),
            Some(ToolChoice::Function("weather".into()))
        );
        for bad in [
            "\"always\"",
            r#"{"type": "function", "function": {"name": "other"}}"#,
            r#"{"type": "function"}"#,
            "3",
        ] {
            let e = with(bad).expect_err(bad);
            assert_eq!(e.code, Code::InvalidOption, "{bad}: {}", e.message);
            assert!(e.message.starts_with("toolChoice:"), "{}", e.message);
        }
    }

    #[test]
    fn no_tools_is_no_request_and_a_call_without_tools_is_refused() {
        assert!(request("{}").unwrap().is_none());
        assert!(request(r#"{"toolChoice": "none"}"#).unwrap().is_none());
        assert!(request(r#"{"tools": [], "toolChoice": "auto"}"#)
            .unwrap()
            .is_none());
        let e = request(r#"{"toolChoice": "required"}"#).unwrap_err();
        assert_eq!(e.code, Code::InvalidOption);
    }

    #[test]
    fn bad_tools_and_a_grammar_beside_tools_are_invalid_options() {
        let e = request(r#"{"tools": [{"type": "function", "function": {"name": "a b"}}]}"#)
            .unwrap_err();
        assert_eq!(e.code, Code::InvalidOption, "{}", e.message);
        let e = request(&format!(
            r#"{{"tools": {WEATHER}, "grammar": {{"regex": "x"}}}}"#
        ))
        .unwrap_err();
        assert_eq!(e.code, Code::InvalidOption, "{}", e.message);
        // With "none" no call is made: a grammar may shape the text.
        let ok = request(&format!(
            r#"{{"tools": {WEATHER}, "toolChoice": "none", "grammar": {{"regex": "x"}}}}"#
        ));
        assert!(ok.is_ok());
    }

    #[test]
    fn a_reply_splits_into_content_and_calls() {
        let mut result = json!({"text": "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"});
        split_reply(&mut result, ToolSyntax::Hermes);
        assert_eq!(result["content"], "");
        assert_eq!(result["tool_calls"][0]["name"], "weather");
        let args: Value =
            serde_json::from_str(result["tool_calls"][0]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Oslo"}));
        let mut plain = json!({"text": "It is sunny."});
        split_reply(&mut plain, ToolSyntax::Hermes);
        assert_eq!(plain["content"], "It is sunny.");
        assert_eq!(plain["tool_calls"], json!([]));
    }
}
