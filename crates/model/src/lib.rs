//! Everything about a model that is not tied to a device: its architecture read from GGUF
//! metadata, its tokenizer and chat template, the interface every engine implements
//! ([`LanguageModel`]), and the plain-Rust f32 reference engine ([`CpuModel`]) that the GPU
//! engine is tested against.

#![forbid(unsafe_code)]

mod arch;
mod chat;
mod config;
mod cpu;
mod error;
pub mod kv_ring;
mod lm;
mod pre_tokenize;
mod tensors;
pub mod testing;
mod tokenizer;

pub use arch::weights;
pub use arch::{
    Activation, Architecture, AttentionPlan, LayerPlan, Plan, RopeFactors, Step, Tensor,
};
pub use chat::tools;
pub use chat::{
    check_conversation, model_template, ChatMessage, ChatTemplate, ModelTemplate, CHAT_ROLES,
    MAX_MESSAGES, TEMPLATE_FUEL, TEMPLATE_OUTPUT_SLACK,
};
pub use config::{ModelConfig, RopeMode, TensorNames};
pub use cpu::{gelu_tanh, CpuModel, Rope};
pub use error::ModelError;
pub use kv_ring::{ring_parts, ring_slots, RingLimits, RING_BLOCK};
pub use lm::{
    argmax, argmax_rows, argmax_rows_of, log_sum_exp, top_k_of, Batch, LanguageModel, Logits, Mask,
    TopLogits,
};
pub use tensors::{
    check_header_tensors, check_header_tensors_for, check_tensors, TensorSpec, TensorTotals,
};
pub use tokenizer::{TokenDecoder, Tokenizer};

pub type Result<T, E = ModelError> = std::result::Result<T, E>;
