//! What the engine keeps about a loaded model besides its weights on the GPU: the tokenizer,
//! the chat template and a description for `info()`. Read once from the GGUF metadata, the same
//! way the CLI does (crates/cli/src/commands.rs), so the file's bytes can be dropped after load.

use std::cell::RefCell;
use std::collections::BTreeMap;

use runahead_gguf::Gguf;
use runahead_grammar::{Grammar, GrammarError, Vocabulary};
use runahead_model::tools::{Tool, ToolSyntax};
use runahead_model::{
    check_conversation, check_header_tensors_for, model_template, ChatMessage, ChatTemplate,
    ModelConfig, ModelError, Step, TensorTotals, Tokenizer,
};
use serde::Serialize;

use crate::error::{Code, WebError};
use crate::options::{GrammarOption, Prompt};

/// `engine.info()`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// `general.name`, when the file has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `general.architecture` (`llama`, `qwen2`, `qwen3`, `gemma3`, `phi3`).
    pub architecture: String,
    pub layers: usize,
    pub embedding: usize,
    pub feed_forward: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub vocab: usize,
    /// KV cache size of this engine, in tokens.
    pub context: usize,
    /// Context the model was trained for.
    pub trained_context: usize,
    pub parameters: u64,
    /// Tensor count per GGML type (`Q4_1: 120, F32: 61`).
    pub tensor_types: BTreeMap<String, usize>,
    pub chat_template: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bos: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_of_turn: Option<u32>,
    /// `webgpu` or `cpu`: the engine the model runs on.
    pub backend: &'static str,
    /// Why `backend: "auto"` chose the CPU engine (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_reason: Option<String>,
    /// The WebGPU adapter the model runs on, or the CPU engine's kernels and threads.
    pub adapter: String,
    /// The CPU engine's threads (absent on WebGPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Why the CPU engine runs fewer threads than the page asked for (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_reason: Option<String>,
}

pub struct Session {
    pub tokenizer: Tokenizer,
    /// What this model's record of earlier outputs is keyed by (the tokenizer's fingerprint).
    pub history_key: u64,
    /// `None` when the model has no `tokenizer.chat_template`.
    template: Option<ChatTemplate>,
    pub info: ModelInfo,
    /// The vocabulary's token trie for structured output, built by the first generation that
    /// asks for a grammar (a Qwen-sized vocabulary takes a moment) and kept for the next.
    vocabulary: RefCell<Option<Vocabulary>>,
}

/// Tensor count per GGML type (`Q4_1: 120, F32: 61`).
pub(crate) fn tensor_types(header: &Gguf) -> BTreeMap<String, usize> {
    let mut types = BTreeMap::new();
    for t in &header.tensors {
        *types.entry(t.ty.to_string()).or_default() += 1;
    }
    types
}

/// Weights in the file (every tensor's elements).
pub(crate) fn parameters(header: &Gguf) -> u64 {
    header.tensors.iter().map(|t| t.n_elements()).sum()
}

/// The page's engines (WebGPU and the CPU engine) execute every step of an architecture's plan.
const PAGE_STEPS: &[Step] = Step::ALL;

/// The model's configuration, as the page's engines run it.
pub(crate) fn page_config(header: &Gguf) -> Result<ModelConfig, ModelError> {
    ModelConfig::for_engine(header, "the page's engines", PAGE_STEPS)
}

/// Every tensor the model reads, checked against its header.
pub(crate) fn page_tensors(
    header: &Gguf,
    config: &ModelConfig,
) -> Result<TensorTotals, ModelError> {
    check_header_tensors_for(header, config, "the page's engines", PAGE_STEPS)
}

/// Metadata problems in a file that parsed as GGUF mean "a model this engine cannot run".
pub(crate) fn unsupported(e: ModelError) -> WebError {
    match e {
        ModelError::Gguf(_)
        | ModelError::Tokenizer(_)
        | ModelError::Config(_)
        | ModelError::ChatTemplate(_) => WebError::new(Code::UnsupportedModel, e.to_string()),
        other => other.into(),
    }
}

impl Session {
    /// Reads tokenizer, template and description (the engine's part of the description is
    /// filled in by [`Session::set_engine`] once the weights are on the GPU).
    pub fn new(header: &Gguf) -> Result<Self, WebError> {
        let meta = &header.metadata;
        let config = page_config(header).map_err(unsupported)?;
        let tokenizer = Tokenizer::from_metadata(meta).map_err(unsupported)?;
        let template = match model_template(meta).map(|t| t.source) {
            Some(source) => {
                let special = |id: Option<u32>| id.map(|i| tokenizer.token_text(i));
                let bos = special(tokenizer.bos).unwrap_or_default();
                let eos = special(tokenizer.eos).unwrap_or_default();
                Some(ChatTemplate::new(source, &bos, &eos).map_err(unsupported)?)
            }
            None => None,
        };
        let info = ModelInfo {
            name: meta.str("general.name").ok().map(str::to_owned),
            architecture: meta
                .str("general.architecture")
                .unwrap_or_default()
                .to_owned(),
            layers: config.n_layers,
            embedding: config.n_embd,
            feed_forward: config.n_ff,
            heads: config.n_heads,
            kv_heads: config.n_kv_heads,
            vocab: config.vocab_size,
            context: 0,
            trained_context: config.context_length,
            parameters: parameters(header),
            tensor_types: tensor_types(header),
            chat_template: template.is_some(),
            bos: tokenizer.bos,
            eos: tokenizer.eos,
            end_of_turn: tokenizer.eot,
            backend: "webgpu",
            backend_reason: None,
            adapter: String::new(),
            threads: None,
            threads_reason: None,
        };
        Ok(Session {
            history_key: runahead_speculate::tokenizer_fingerprint(&tokenizer),
            tokenizer,
            template,
            info,
            vocabulary: RefCell::new(None),
        })
    }

    /// Records the engine the weights went to.
    pub fn set_engine(&mut self, context: usize, adapter: &str) {
        self.info.context = context;
        self.info.adapter = adapter.to_owned();
    }

    /// Token ids of `prompt`: text raw (tokenized as is) or, with `chat`, wrapped by the
    /// model's chat template as one user message, as `runahead generate [--chat]` does; a
    /// conversation rendered by the template with the assistant's turn opened. `tools` are
    /// rendered with the conversation (a raw text prompt takes none).
    pub fn prompt_tokens(
        &self,
        prompt: &Prompt,
        chat: bool,
        tools: &[Tool],
    ) -> Result<Vec<u32>, WebError> {
        // A rendered template may already start with the BOS text the tokenizer adds:
        // `encode_rendered` keeps one BOS, as llama.cpp does.
        let ids = match prompt {
            Prompt::Text(_) if !chat && !tools.is_empty() => {
                return Err(WebError::new(
                    Code::InvalidOption,
                    "tools: the chat template renders them: give messages, or chat: true",
                ))
            }
            Prompt::Text(text) if !chat => self.tokenizer.encode(text)?,
            Prompt::Text(text) => self.tokenizer.encode_rendered(
                &self
                    .template()?
                    .render_conversation_with_tools(&[ChatMessage::new("user", text)], tools)?,
            )?,
            Prompt::Messages(messages) => {
                // Checked first: a bad conversation is the caller's error on any model.
                check_conversation(messages)?;
                self.tokenizer.encode_rendered(
                    &self
                        .template()?
                        .render_conversation_with_tools(messages, tools)?,
                )?
            }
        };
        if ids.is_empty() {
            return Err(WebError::new(
                Code::EmptyPrompt,
                "the prompt is empty: give some text",
            ));
        }
        Ok(ids)
    }

    /// `grammar` compiled over this model's vocabulary: a bad schema or grammar is the error
    /// `grammar`, before any token is generated.
    pub fn grammar(&self, grammar: &GrammarOption) -> Result<Grammar, WebError> {
        let spec = grammar.spec()?;
        let failed = |e: GrammarError| WebError::new(Code::Grammar, format!("grammar: {e}"));
        let vocabulary = {
            let mut cached = self.vocabulary.borrow_mut();
            match cached.as_ref() {
                Some(v) => v.clone(),
                None => cached
                    .insert(Vocabulary::new(&self.tokenizer).map_err(failed)?)
                    .clone(),
            }
        };
        Grammar::new(&vocabulary, &spec).map_err(failed)
    }

    /// How this model's template spells tool calls.
    pub fn tool_syntax(&self) -> Result<ToolSyntax, WebError> {
        Ok(self.template()?.tool_syntax())
    }

    fn template(&self) -> Result<&ChatTemplate, WebError> {
        self.template.as_ref().ok_or_else(|| {
            WebError::new(
                Code::ChatTemplate,
                "chat: the model has no chat template (tokenizer.chat_template); \
                 send the prompt raw instead",
            )
        })
    }
}
