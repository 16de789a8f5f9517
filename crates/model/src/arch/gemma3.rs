//! `gemma3` (Gemma 3 text models): the embedding scaled by sqrt(n_embd); Q/K RMS norms per
//! head; RMS norms after attention and after the FFN as well as before them; a GELU-tanh gated
//! FFN; sliding-window layers (window `attention.sliding_window`) with their own RoPE base
//! (`rope.freq_base_swa`, 10000 when absent) and freq scale 1, every `sliding_window_pattern`-th
//! layer (6 when absent) global; queries scaled by 1/sqrt(head_dim) (1/sqrt(n_embd / n_heads)
//! on the 62-layer 27B), as llama.cpp does. The norm weights in GGUF already hold Gemma's
//! `1 + w`.

use runahead_gguf::Value;

use super::{Activation, Hparams, Plan};
use crate::config::{invalid, positive_finite, MAX_CONTEXT, MAX_LAYERS};
use crate::{ModelError, Result, RopeMode};

pub(super) fn plan(h: &Hparams, vocab: usize) -> Result<Plan> {
    let mut plan = h.plan(vocab, RopeMode::Neox, false)?;
    let c = &plan.config;
    plan.qk_norm = true;
    plan.post_norms = true;
    plan.activation = Activation::GeluTanh;
    plan.embd_scale = Some((c.n_embd as f32).sqrt());
    plan.logit_softcap = h.opt_f32("final_logit_softcapping")?.filter(|&v| v != 0.0);
    if let Some(cap) = plan.logit_softcap {
        positive_finite(&h.key("final_logit_softcapping"), cap)?;
    }
    h.refuse_key(
        "attn_logit_softcapping",
        "attention soft-capping is not part of Gemma 3",
    )?;
    let scale = if c.n_layers == 62 {
        1.0 / ((c.n_embd / c.n_heads) as f32).sqrt()
    } else {
        1.0 / (c.head_dim as f32).sqrt()
    };
    let window = h
        .opt_dim("attention.sliding_window", MAX_CONTEXT)
        .or_else(|e| match h.get("attention.sliding_window") {
            Some(v) if v.as_u64() == Some(0) => Ok(None),
            _ => Err(e),
        })?;
    let swa = match window {
        None => vec![false; c.n_layers],
        Some(_) => swa_layers(h, c.n_layers)?,
    };
    let swa_base = h.opt_f32("rope.freq_base_swa")?.unwrap_or(10000.0);
    positive_finite(&h.key("rope.freq_base_swa"), swa_base)?;
    for (layer, &is_swa) in plan.layers.iter_mut().zip(&swa) {
        layer.attention.scale = scale;
        if is_swa {
            layer.attention.window = window;
            layer.attention.rope_base = swa_base;
            layer.attention.rope_freq_scale = 1.0;
        }
    }
    Ok(plan)
}

/// Which layers slide: `attention.sliding_window_pattern` as one flag per layer, or as `n`
/// (layer `i` slides unless `i % n == n - 1`; 6 when absent).
fn swa_layers(h: &Hparams, n_layers: usize) -> Result<Vec<bool>> {
    let key = "attention.sliding_window_pattern";
    match h.get(key) {
        Some(Value::Array(flags)) => {
            if flags.len() != n_layers {
                let why = format!("has {} flags for {n_layers} layers", flags.len());
                return Err(invalid(&h.key(key), flags.len(), why));
            }
            flags
                .values()
                .map(|f| {
                    f.as_bool().ok_or_else(|| ModelError::UnsupportedKey {
                        key: h.key(key),
                        value: format!("{f:?}"),
                        why: "is not a flag".into(),
                    })
                })
                .collect()
        }
        _ => {
            let n = h.opt_dim(key, MAX_LAYERS)?.unwrap_or(6);
            Ok((0..n_layers).map(|i| i % n < n - 1).collect())
        }
    }
}
