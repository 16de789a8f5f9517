//! `qwen3` (Qwen3 dense): qwen2's layer without biases, each head of Q and K RMS-normed
//! (`attn_q_norm`, `attn_k_norm`) before RoPE, and a head dimension from
//! `attention.key_length` (128 where `n_embd / n_heads` is 64 on Qwen3-0.6B).

use super::{Hparams, Plan};
use crate::{Result, RopeMode};

pub(super) fn plan(h: &Hparams, vocab: usize) -> Result<Plan> {
    let mut plan = h.plan(vocab, RopeMode::Neox, false)?;
    plan.qk_norm = true;
    Ok(plan)
}
