//! `phi3` (Phi-3, Phi-3.5, Phi-4-mini): Q, K and V in one `attn_qkv` matrix (or separate),
//! gate and up in one `ffn_up` of twice the FFN width (gate first), RoPE in split halves over
//! `rope.dimension_count` dims (partial on Phi-4-mini), LongRoPE factors
//! (`rope_factors_long/short.weight`, chosen by the context against
//! `rope.scaling.original_context_length`, cos/sin scaled by `rope.scaling.attn_factor`).
//! `attention.sliding_window` is ignored, as llama.cpp ignores it for phi3.

use super::{Hparams, Plan, RopeFactors, Tensor};
use crate::config::MAX_CONTEXT;
use crate::{Result, RopeMode};

pub(super) fn plan(h: &Hparams, vocab: usize) -> Result<Plan> {
    let mut plan = h.plan(vocab, RopeMode::Neox, false)?;
    plan.fused_qkv = h.has_tensor(Tensor::AttnQkv, Some(0));
    plan.fused_gate_up = true;
    if h.has_tensor(Tensor::RopeFactorsLong, None) || h.has_tensor(Tensor::RopeFactorsShort, None) {
        let original_context = h
            .opt_dim("rope.scaling.original_context_length", MAX_CONTEXT)?
            .unwrap_or(plan.config.context_length);
        plan.rope_factors = RopeFactors::LongShort { original_context };
    }
    Ok(plan)
}
