//! Decoding on top of any [`runahead_model::LanguageModel`]: sampling, the generation loop, and
//! speculative decoding (drafters proposing tokens that the target verifies in one forward).

mod drafter;
mod generate;
mod sampling;

pub use drafter::{Drafter, NgramDrafter};
pub use generate::{
    generate, generate_with, GenerateError, GenerateOptions, Generation, Provenance, Stats,
    StopReason, MAX_DRAFT,
};
pub use sampling::{Distribution, Sampler, SamplingError, SamplingParams};
