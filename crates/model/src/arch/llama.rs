//! `llama` (Llama 1-3.x, SmolLM, Mistral-style files): RMSNorm, RoPE in adjacent pairs (the
//! converter permutes Q/K rows so that this matches the original split halves), a SiLU-gated
//! FFN, tied or separate output. Llama 3's `rope_freqs.weight` divides each pair's angle.

use super::{Hparams, Plan, RopeFactors, Tensor};
use crate::{Result, RopeMode};

pub(super) fn plan(h: &Hparams, vocab: usize) -> Result<Plan> {
    let mut plan = h.plan(vocab, RopeMode::Normal, false)?;
    if h.has_tensor(Tensor::RopeFreqs, None) {
        plan.rope_factors = RopeFactors::Freqs;
    }
    Ok(plan)
}
