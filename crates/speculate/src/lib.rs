//! Decoding on top of any [`runahead_model::LanguageModel`]: sampling, the generation loop, and
//! speculative decoding: drafters propose a chain or a tree of tokens, the target verifies it in
//! one forward pass, and the output is exactly what plain decoding would give.

#![forbid(unsafe_code)]

mod auto;
mod constrained;
mod constraint;
mod cost;
mod depth;
mod draft;
mod drafter;
mod error;
mod generate;
mod history;
mod limits;
mod logits;
mod model_drafter;
mod report;
mod sampling;
mod stats;
mod stop;
mod suffix;
mod text;
mod verify;

pub use auto::AutoDrafter;
pub use constraint::{Constraint, ConstraintError, TokenSet};
pub use cost::{calibrate, CostCurve, CostModel};
pub use depth::{Adaptive, Depth, DepthController, Plan, StepRecord};
pub use draft::Draft;
pub use drafter::{observe_unverified, ready, DraftRequest, Drafter, LocalFuture, NgramDrafter};
pub use error::GenerateError;
pub use generate::{
    generate, generate_cached, generate_constrained, generate_with, GenerateOptions, Generation,
    KvTokens, Provenance, StopReason,
};
pub use history::{
    decode_history, encode_history, fnv1a, tokenizer_fingerprint, HistoryError, HISTORY_VERSION,
};
pub use limits::{MAX_DRAFT, PREFILL_CHUNK};
pub use logits::{LogitError, LogitOptions, TokenLogprob, MAX_TOP_LOGPROBS};
pub use model_drafter::ModelDrafter;
pub use report::{generation_json, logprob_json};
pub use sampling::{Distribution, Sampler, SamplingError, SamplingParams, Scores};
pub use stats::{DrafterStats, Stats};
pub use stop::{Released, StopError, StopMatcher, StopStrings, MAX_STOP_BYTES, MAX_STOP_STRINGS};
pub use suffix::{SuffixDrafter, SuffixTrie};
pub use text::{generate_text, generate_text_constrained, Piece};
pub use verify::{verification_batch, verify, walk_greedy, walk_sampling, Rejection, Verdict};
