//! Chat templates: the Jinja template in `tokenizer.chat_template`, rendered with minijinja
//! (with Python-compatible string/dict methods, which HF templates use).
//!
//! The template comes from the model file, so rendering is bounded: a step budget (minijinja's
//! fuel) stops runaway loops and a cap on the output stops runaway text.

use std::io::{self, Write};

use minijinja::{context, Environment, ErrorKind};
use serde::Serialize;

use crate::{ModelError, Result};

/// Steps (minijinja instructions) one render may take. Measured (`tests/limits.rs`): one
/// message takes 38 steps with SmolLM2's ChatML template and 43 with Qwen2.5's, and a
/// 101-message conversation 2,336 and 3,210; 2,000,000 is 600x the latter, yet runaway loops
/// stop within a fraction of a second.
pub const TEMPLATE_FUEL: u64 = 2_000_000;

/// Bytes a render may produce beyond the conversation's own text (roles and contents count
/// on top, so a long prompt is never refused here: the context limit decides). Real templates
/// add tens of bytes per message and a system prompt.
pub const TEMPLATE_OUTPUT_SLACK: usize = 1 << 20;

/// One message of a conversation.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        ChatMessage {
            role: role.to_owned(),
            content: content.to_owned(),
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source` with the tokenizer's BOS and EOS texts as `bos_token`/`eos_token`.
    pub fn for_tokenizer(source: &str, tokenizer: &crate::Tokenizer) -> Result<Self> {
        let special = |id: Option<u32>| id.map(|i| tokenizer.token_text(i)).unwrap_or_default();
        ChatTemplate::new(source, &special(tokenizer.bos), &special(tokenizer.eos))
    }

    /// Compiles `source`; `bos`/`eos` are the texts templates see as `bos_token`/`eos_token`.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
        env.set_fuel(Some(TEMPLATE_FUEL));
        // HF templates are whitespace-exact with these two settings.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| ModelError::ChatTemplate(format!("cannot compile: {e}")))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        })
    }

    /// Renders a conversation; `add_generation_prompt` opens the assistant's turn.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with_cost(messages, add_generation_prompt)
            .map(|(text, _)| text)
    }

    /// [`ChatTemplate::render`] that also returns the steps (fuel) the render took, to check
    /// real templates against [`TEMPLATE_FUEL`].
    pub fn render_with_cost(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<(String, u64)> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| ModelError::ChatTemplate(e.to_string()))?;
        let own_text: usize = messages
            .iter()
            .map(|m| m.role.len() + m.content.len())
            .sum();
        let mut out = CappedWriter::new(own_text.saturating_add(TEMPLATE_OUTPUT_SLACK));
        let rendered = template.render_captured_to(
            context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos,
                eos_token => self.eos,
            },
            &mut out,
        );
        match rendered {
            Ok(captured) => {
                let used = captured.state().fuel_levels().map_or(0, |(used, _)| used);
                let text = String::from_utf8(out.bytes)
                    .map_err(|_| ModelError::ChatTemplate("rendered invalid UTF-8".into()))?;
                Ok((text, used))
            }
            Err(_) if out.overflowed => Err(ModelError::ChatTemplateOutput { limit: out.limit }),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(ModelError::ChatTemplateFuel {
                limit: TEMPLATE_FUEL,
            }),
            Err(e) => Err(ModelError::ChatTemplate(format!("cannot render: {e}"))),
        }
    }
}

/// Collects rendered text and fails the render once it would pass `limit` bytes, so a
/// runaway template stops at the limit instead of when memory runs out.
struct CappedWriter {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl CappedWriter {
    fn new(limit: usize) -> Self {
        CappedWriter {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.limit.saturating_sub(self.bytes.len()) {
            self.overflowed = true;
            return Err(io::Error::other("chat template output limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn renders_chatml() {
        let t = ChatTemplate::new(CHATML, "<|im_start|>", "<|im_end|>").unwrap();
        let out = t.render(&[ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_methods_and_raise_exception() {
        let t = ChatTemplate::new("{{ messages[0].content.strip().upper() }}", "", "").unwrap();
        assert_eq!(
            t.render(&[ChatMessage::new("user", "  a b ")], false)
                .unwrap(),
            "A B"
        );
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").unwrap();
        let err = t.render(&[], false).unwrap_err().to_string();
        assert!(err.contains("no system role"), "{err}");
        assert!(ChatTemplate::new("{% if %}", "", "").is_err());
    }

    #[test]
    fn runaway_loops_run_out_of_fuel_quickly() {
        let source =
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
        let t = ChatTemplate::new(source, "", "").unwrap();
        let start = std::time::Instant::now();
        let err = t.render(&[], false).unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::ChatTemplateFuel {
                    limit: TEMPLATE_FUEL
                }
            ),
            "{err}"
        );
        assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
        // An endless recursion through a macro is stopped by minijinja's recursion limit
        // (before the fuel runs out), never by the stack.
        let t =
            ChatTemplate::new("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "", "").unwrap();
        let err = t.render(&[], false).unwrap_err();
        assert!(matches!(err, ModelError::ChatTemplate(_)), "{err}");
    }

    #[test]
    fn runaway_output_hits_the_size_limit() {
        let message = [ChatMessage::new("user", "hello")];
        let limit = "user".len() + "hello".len() + TEMPLATE_OUTPUT_SLACK;
        for source in [
            // One huge value (minijinja caps one repetition at 100 MB).
            "{{ 'x' * 100000000 }}",
            // Many small writes.
            "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
            // Repeating the user's text.
            "{% for i in range(100000) %}{{ messages[0].content * 100 }}{% endfor %}",
        ] {
            let t = ChatTemplate::new(source, "", "").unwrap();
            let err = t.render(&message, false).unwrap_err();
            assert!(
                matches!(err, ModelError::ChatTemplateOutput { limit: l } if l == limit),
                "{source}: {err}"
            );
        }
        // A long conversation is not refused: its own text does not count against the slack.
        let long = "y".repeat(3 * TEMPLATE_OUTPUT_SLACK);
        let t = ChatTemplate::new(CHATML, "", "").unwrap();
        let out = t.render(&[ChatMessage::new("user", &long)], true).unwrap();
        assert!(out.len() > long.len());
    }
}
