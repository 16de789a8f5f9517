//! The error of a generation, shared by the generation loop and verification: below both, so
//! neither imports the other for it.

use runahead_model::ModelError;

use crate::constraint::ConstraintError;
use crate::logits::LogitError;
use crate::sampling::SamplingError;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    #[error(transparent)]
    Logits(#[from] LogitError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but the context holds {context}: shorten it or raise the context size")]
    PromptTooLong { prompt: usize, context: usize },
}
