//! Which chat template a model file gets: its own `tokenizer.chat_template`, or for a file
//! without one (Gemma 3's GGUFs ship none) the turn format its architecture's instruction-tuned
//! models were trained on, where the vocabulary holds that format's markers. llama.cpp keeps the
//! same formats built in (`llama_chat_apply_template` with a template name); the test
//! `tests/chat_builtin.rs` checks the renders against it.

use runahead_gguf::Metadata;

/// Gemma's turns: `<start_of_turn>user\n...<end_of_turn>\n`, the assistant as `model`, contents
/// trimmed; Gemma has no system role, so a system message's text opens the next user turn,
/// followed by a blank line.
const GEMMA: &str = "\
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{%- set ns.system = ns.system ~ (message['content'] | trim) -%}
{%- else -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' ~ role ~ '\n' -}}
{%- if ns.system and role != 'model' -%}
{{- ns.system ~ '\n\n' -}}
{%- set ns.system = '' -%}
{%- endif -%}
{{- (message['content'] | trim) ~ '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\n' -}}
{%- endif -%}";

/// A model's chat template and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelTemplate<'a> {
    /// The Jinja source.
    pub source: &'a str,
    /// `None` for the file's own; the format's name for a built-in one (`gemma`).
    pub builtin: Option<&'static str>,
}

/// The chat template of the model `meta` describes; `None` when the file has none and no
/// built-in format fits it.
pub fn model_template(meta: &Metadata) -> Option<ModelTemplate<'_>> {
    if let Ok(source) = meta.str("tokenizer.chat_template") {
        return Some(ModelTemplate {
            source,
            builtin: None,
        });
    }
    let arch = meta.str("general.architecture").ok()?;
    let has_token = |text: &str| {
        meta.strings("tokenizer.ggml.tokens")
            .is_ok_and(|tokens| tokens.iter().any(|t| t == text))
    };
    if arch.starts_with("gemma") && has_token("<start_of_turn>") && has_token("<end_of_turn>") {
        return Some(ModelTemplate {
            source: GEMMA,
            builtin: Some("gemma"),
        });
    }
    None
}
