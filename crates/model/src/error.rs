use runahead_gguf::{GgmlType, GgufError};

/// Errors from loading a model or running it.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported architecture '{0}' (supported: llama, qwen2, qwen3, gemma3, phi3)")]
    UnsupportedArchitecture(String),
    /// The model needs a step of its architecture's plan that this engine does not run.
    #[error("{arch}: {engine} does not implement {step}")]
    NotImplemented {
        arch: String,
        step: String,
        engine: String,
    },
    /// A tensor the architecture's plan does not read: running without it would compute
    /// something else than the model.
    #[error("tensor '{name}' is not part of a {arch} model as runahead runs it (it would change the arithmetic)")]
    UnknownTensor { arch: String, name: String },
    /// A metadata key whose value changes the arithmetic in a way not implemented.
    #[error("unsupported model: {key} = {value} {why}")]
    UnsupportedKey {
        key: String,
        value: String,
        why: String,
    },
    #[error("tensor '{name}' has type {ty}, which runahead cannot decode")]
    UnsupportedTensorType { name: String, ty: GgmlType },
    #[error("tensor '{name}' has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// A hyper-parameter, or a size derived from them, that is zero, inconsistent or beyond
    /// any real model; found before anything is allocated by it.
    #[error("invalid model: {what} = {value} {reason}")]
    InvalidHyperParameter {
        what: String,
        value: String,
        reason: String,
    },
    /// The tokenizer has tokens the token embedding has no row for; caught at load, not when
    /// one of them is first typed or generated.
    #[error(
        "invalid model: the tokenizer has {tokens} tokens but the token embedding only {rows} rows"
    )]
    VocabularyMismatch { tokens: usize, rows: usize },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    ChatTemplate(String),
    /// Rendering ran out of its step budget: a template with runaway loops, which would
    /// otherwise hang the page.
    #[error("chat template: rendering took more than {limit} steps (runaway loops in the model's template)")]
    ChatTemplateFuel { limit: u64 },
    /// The rendered text grew past the size limit.
    #[error("chat template: the rendered text exceeds {limit} bytes")]
    ChatTemplateOutput { limit: usize },
    /// A conversation the chat API refuses before rendering: no messages, or a role other
    /// than `system`, `user` and `assistant`.
    #[error("messages: {0}")]
    InvalidMessages(String),
    /// Tool definitions or a `tool_choice` that cannot be used.
    #[error("tools: {0}")]
    InvalidTools(String),
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange { id: u32, vocab: usize },
    #[error("context is full: {needed} positions needed, the context holds {context}")]
    ContextFull { needed: usize, context: usize },
    #[error("the draft model cannot draft for this target: {0}")]
    IncompatibleDraft(String),
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    /// Every logit of a row is NaN or -inf, so there is no token to pick: the weights (or an
    /// engine) produced garbage, which greedy decoding must not turn into token 0.
    #[error("row {row} of the model's output has no usable logit (all NaN or -inf): the model's weights are likely corrupt")]
    NoUsableLogit { row: usize },
    /// An engine-specific failure (GPU device lost, out of memory, ...); downcast to the
    /// engine's error type for details.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync + 'static>),
}
