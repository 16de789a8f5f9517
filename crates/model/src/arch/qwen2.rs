//! `qwen2` (Qwen2, Qwen2.5): llama's layer with Q/K/V biases and RoPE in split halves (NEOX).

use super::{Hparams, Plan};
use crate::{Result, RopeMode};

pub(super) fn plan(h: &Hparams, vocab: usize) -> Result<Plan> {
    h.plan(vocab, RopeMode::Neox, true)
}
