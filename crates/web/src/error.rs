//! Errors as JavaScript sees them: an `Error` whose `code` property is one of a fixed set of
//! strings (the npm package documents them; pages branch on the code, people read the message).

use runahead_gguf::GgufError;
use runahead_gpu::GpuError;
use runahead_model::ModelError;
use runahead_speculate::{GenerateError, SamplingError, StopError};
use wasm_bindgen::JsValue;

/// Stable error codes. Adding one is fine; renaming one breaks pages that test for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// The browser has no WebGPU (`navigator.gpu` missing) or no adapter.
    NoWebGpu,
    /// The adapter refused a device or its limits are below what the engine needs.
    AdapterLimits,
    DeviceLost,
    OutOfMemory,
    /// Any other GPU failure (validation, readback): a bug worth reporting.
    Gpu,
    /// The model's bytes did not arrive whole (the download ended early, the file changed).
    Fetch,
    /// The bytes are not a valid GGUF file.
    Gguf,
    /// A valid GGUF the engine cannot run (architecture, tensor type, tokenizer, shapes).
    UnsupportedModel,
    /// The draft model cannot draft for this target: its tokenizer differs (vocabulary, a
    /// token's text, special tokens) or its output has fewer rows than the vocabulary.
    DraftMismatch,
    /// The model's chat template is missing or failed to render.
    ChatTemplate,
    Tokenizer,
    /// `messages` is empty or has a role other than system, user, assistant.
    InvalidMessages,
    EmptyPrompt,
    PromptTooLong,
    InvalidSampling,
    /// An option has the wrong type or an unknown value (e.g. `draft: "nope"`).
    InvalidOption,
    /// A JSON schema or grammar (`grammar`, `response_format`) cannot be compiled, or the
    /// grammar engine failed while generating.
    Grammar,
    /// The operation was cancelled before it produced anything.
    Cancelled,
    /// `generate` was called while another generation was running.
    Busy,
    /// The `onToken` callback threw; the thrown value is attached as `cause`.
    Callback,
    /// A stored history of earlier outputs cannot be used (another model's, another version's,
    /// damaged): the page discards it.
    History,
    /// A broken invariant inside the engine.
    Internal,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NoWebGpu => "no_webgpu",
            Code::AdapterLimits => "adapter_limits",
            Code::DeviceLost => "device_lost",
            Code::OutOfMemory => "out_of_memory",
            Code::Gpu => "gpu",
            Code::Fetch => "fetch",
            Code::Gguf => "gguf",
            Code::UnsupportedModel => "unsupported_model",
            Code::DraftMismatch => "draft_mismatch",
            Code::ChatTemplate => "chat_template",
            Code::Tokenizer => "tokenizer",
            Code::InvalidMessages => "invalid_messages",
            Code::EmptyPrompt => "empty_prompt",
            Code::PromptTooLong => "prompt_too_long",
            Code::InvalidSampling => "invalid_sampling",
            Code::InvalidOption => "invalid_option",
            Code::Grammar => "grammar",
            Code::Cancelled => "cancelled",
            Code::Busy => "busy",
            Code::Callback => "callback",
            Code::History => "history",
            Code::Internal => "internal",
        }
    }
}

/// An error with its code and a message a person can act on.
#[derive(Debug)]
pub struct WebError {
    pub code: Code,
    pub message: String,
    /// What JavaScript threw, for [`Code::Callback`].
    pub cause: Option<JsValue>,
}

impl WebError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        WebError {
            code,
            message: message.into(),
            cause: None,
        }
    }
}

impl From<GpuError> for WebError {
    fn from(e: GpuError) -> Self {
        let code = match &e {
            GpuError::NoAdapter(_) => Code::NoWebGpu,
            GpuError::RequestDevice(_) | GpuError::LimitTooSmall { .. } => Code::AdapterLimits,
            GpuError::DeviceLost(_) => Code::DeviceLost,
            GpuError::OutOfMemory(_) | GpuError::OverMemoryBudget { .. } => Code::OutOfMemory,
            GpuError::UnsupportedType { .. } => Code::UnsupportedModel,
            GpuError::Validation(_) | GpuError::Readback(_) => Code::Gpu,
        };
        WebError::new(code, e.to_string())
    }
}

impl From<GgufError> for WebError {
    fn from(e: GgufError) -> Self {
        WebError::new(Code::Gguf, format!("not a valid GGUF file: {e}"))
    }
}

impl From<ModelError> for WebError {
    fn from(e: ModelError) -> Self {
        let code = match &e {
            ModelError::Gguf(_) => Code::Gguf,
            ModelError::UnsupportedArchitecture(_)
            | ModelError::NotImplemented { .. }
            | ModelError::UnknownTensor { .. }
            | ModelError::UnsupportedKey { .. }
            | ModelError::UnsupportedTensorType { .. }
            | ModelError::TensorShape { .. }
            | ModelError::Config(_)
            | ModelError::InvalidHyperParameter { .. }
            | ModelError::VocabularyMismatch { .. }
            | ModelError::NoUsableLogit { .. } => Code::UnsupportedModel,
            ModelError::IncompatibleDraft(_) => Code::DraftMismatch,
            ModelError::Tokenizer(_) => Code::Tokenizer,
            ModelError::InvalidMessages(_) => Code::InvalidMessages,
            ModelError::InvalidTools(_) => Code::InvalidOption,
            ModelError::ChatTemplate(_)
            | ModelError::ChatTemplateFuel { .. }
            | ModelError::ChatTemplateOutput { .. } => Code::ChatTemplate,
            ModelError::ContextFull { .. } => Code::PromptTooLong,
            ModelError::TokenOutOfRange { .. } | ModelError::InvalidBatch(_) => Code::Internal,
            ModelError::Backend(inner) => {
                if let Some(gpu) = inner.downcast_ref::<GpuError>() {
                    return gpu.clone().into();
                }
                // A matrix whose bytes do not match its shape: a bad file, not a bug.
                let code = match inner.downcast_ref::<runahead_cpu::CpuError>() {
                    Some(runahead_cpu::CpuError::MatrixSize { .. }) => Code::UnsupportedModel,
                    _ => Code::Internal,
                };
                return WebError::new(code, e.to_string());
            }
        };
        WebError::new(code, e.to_string())
    }
}

impl From<SamplingError> for WebError {
    fn from(e: SamplingError) -> Self {
        WebError::new(Code::InvalidSampling, e.to_string())
    }
}

impl From<StopError> for WebError {
    fn from(e: StopError) -> Self {
        WebError::new(Code::InvalidOption, e.to_string())
    }
}

impl From<GenerateError> for WebError {
    fn from(e: GenerateError) -> Self {
        match e {
            GenerateError::Model(m) => m.into(),
            GenerateError::Sampling(s) => s.into(),
            GenerateError::EmptyPrompt => WebError::new(Code::EmptyPrompt, e.to_string()),
            GenerateError::PromptTooLong { .. } => {
                WebError::new(Code::PromptTooLong, e.to_string())
            }
            GenerateError::Constraint(_) => WebError::new(Code::Grammar, e.to_string()),
            GenerateError::Logits(_) => WebError::new(Code::InvalidOption, e.to_string()),
        }
    }
}

impl From<WebError> for JsValue {
    fn from(e: WebError) -> Self {
        let error = js_sys::Error::new(&e.message);
        error.set_name("RunaheadError");
        // Reflect::set only fails on frozen or proxied objects; a fresh Error is neither.
        let _ = js_sys::Reflect::set(&error, &"code".into(), &e.code.as_str().into());
        if let Some(cause) = e.cause {
            let _ = js_sys::Reflect::set(&error, &"cause".into(), &cause);
        }
        error.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_errors_inside_model_errors_keep_their_code() {
        let lost: ModelError = GpuError::DeviceLost("gone".into()).into();
        assert_eq!(WebError::from(lost).code, Code::DeviceLost);
        let limit: ModelError = GpuError::LimitTooSmall {
            limit: "maxStorageBufferBindingSize",
            needed: 2,
            available: 1,
        }
        .into();
        assert_eq!(WebError::from(limit).code, Code::AdapterLimits);
    }

    #[test]
    fn generate_errors_map_to_their_codes() {
        let too_long = GenerateError::PromptTooLong {
            prompt: 9,
            context: 8,
        };
        assert_eq!(WebError::from(too_long).code, Code::PromptTooLong);
        let sampling = GenerateError::Sampling(SamplingError::TopP(2.0));
        let e = WebError::from(sampling);
        assert_eq!(e.code, Code::InvalidSampling);
        assert!(e.message.contains("top-p"), "{}", e.message);
    }
}
