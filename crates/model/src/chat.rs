//! Chat templates: the Jinja template in `tokenizer.chat_template`, rendered with minijinja
//! (with Python-compatible string/dict methods, which HF templates use).

use minijinja::{context, Environment, ErrorKind};
use serde::Serialize;

use crate::{ModelError, Result};

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
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| ModelError::ChatTemplate(e.to_string()))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .map_err(|e| ModelError::ChatTemplate(format!("cannot render: {e}")))
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
}
