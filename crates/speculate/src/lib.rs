//! Decoding on top of any [`runahead_model::LanguageModel`]: sampling and the generation loop.

mod generate;
mod sampling;

pub use generate::{
    generate, GenerateError, GenerateOptions, Generation, Provenance, Stats, StopReason,
};
pub use sampling::{Distribution, Sampler, SamplingError, SamplingParams};
