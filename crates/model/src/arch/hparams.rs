//! The keys every architecture shares, read into the plan each architecture starts from.

use runahead_gguf::{Metadata, Value};

use super::{Activation, Architecture, AttentionPlan, LayerPlan, Plan, RopeFactors, Tensor};
use crate::config::{bounded, invalid, positive_finite, MAX_CONTEXT, MAX_EMBD, MAX_FF, MAX_HEADS};
use crate::config::{MAX_LAYERS, MAX_VOCAB};
use crate::{ModelConfig, ModelError, Result, RopeMode};

/// Reads an architecture's keys (`{arch}.…`) for its description.
pub(crate) struct Hparams<'a> {
    pub(super) meta: &'a Metadata,
    pub(super) arch: Architecture,
    pub(super) has_tensor: &'a dyn Fn(&str) -> bool,
}

impl Hparams<'_> {
    pub(super) fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch.name())
    }

    pub(super) fn has(&self, k: &str) -> bool {
        self.meta.get(&self.key(k)).is_some()
    }

    pub(super) fn has_tensor(&self, t: Tensor, layer: Option<usize>) -> bool {
        (self.has_tensor)(&t.name(layer))
    }

    pub(super) fn dim(&self, k: &str, max: u64) -> Result<usize> {
        bounded(&self.key(k), self.meta.u64(&self.key(k))?, max)
    }

    pub(super) fn opt_dim(&self, k: &str, max: u64) -> Result<Option<usize>> {
        if self.has(k) {
            self.dim(k, max).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(super) fn opt_f32(&self, k: &str) -> Result<Option<f32>> {
        if self.has(k) {
            Ok(Some(self.meta.f64(&self.key(k))? as f32))
        } else {
            Ok(None)
        }
    }

    pub(super) fn opt_str(&self, k: &str) -> Result<Option<&str>> {
        if self.has(k) {
            Ok(Some(self.meta.str(&self.key(k))?))
        } else {
            Ok(None)
        }
    }

    pub(super) fn get(&self, k: &str) -> Option<&Value> {
        self.meta.get(&self.key(k))
    }

    /// Refuses a key this architecture does not implement, by name, when the file has it.
    pub(super) fn refuse_key(&self, k: &str, why: &str) -> Result<()> {
        match self.get(k) {
            None => Ok(()),
            Some(v) => Err(ModelError::UnsupportedKey {
                key: self.key(k),
                value: format!("{v:?}"),
                why: why.to_owned(),
            }),
        }
    }

    /// The plan every architecture starts from: the shared keys (sizes, head dims from
    /// `attention.key_length`/`value_length`, RoPE, norm epsilon, linear RoPE scaling) and a
    /// llama-style layer; the architecture's file sets what differs.
    pub(super) fn plan(
        &self,
        vocab_size: usize,
        rope_mode: RopeMode,
        qkv_bias: bool,
    ) -> Result<Plan> {
        let vocab_size = bounded("vocabulary size", vocab_size as u64, MAX_VOCAB)?;
        let n_layers = self.dim("block_count", MAX_LAYERS)?;
        let n_embd = self.dim("embedding_length", MAX_EMBD)?;
        let n_ff = self.dim("feed_forward_length", MAX_FF)?;
        let n_heads = self.dim("attention.head_count", MAX_HEADS)?;
        let n_kv_heads = self
            .opt_dim("attention.head_count_kv", MAX_HEADS)?
            .unwrap_or(n_heads);
        let context_length = self.dim("context_length", MAX_CONTEXT)?;
        let head_dim = match self.opt_dim("attention.key_length", MAX_EMBD)? {
            Some(k) => k,
            None if n_embd.is_multiple_of(n_heads) => n_embd / n_heads,
            None => {
                let why = format!("is not a multiple of the {n_heads} attention heads");
                return Err(invalid(&self.key("embedding_length"), n_embd, why));
            }
        };
        if n_kv_heads > n_heads || !n_heads.is_multiple_of(n_kv_heads) {
            let why = format!("is not a multiple of the {n_kv_heads} KV heads");
            return Err(invalid(&self.key("attention.head_count"), n_heads, why));
        }
        let value_dim = self
            .opt_dim("attention.value_length", MAX_EMBD)?
            .unwrap_or(head_dim);
        if value_dim != head_dim {
            return Err(ModelError::UnsupportedKey {
                key: self.key("attention.value_length"),
                value: value_dim.to_string(),
                why: format!("differs from attention.key_length {head_dim}"),
            });
        }
        let rope_dim = self
            .opt_dim("rope.dimension_count", MAX_EMBD)?
            .unwrap_or(head_dim);
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(invalid(
                &self.key("rope.dimension_count"),
                rope_dim,
                format!("must be even and at most the head dimension {head_dim}"),
            ));
        }
        let rope_base = self.opt_f32("rope.freq_base")?.unwrap_or(10000.0);
        positive_finite(&self.key("rope.freq_base"), rope_base)?;
        let eps_key = self.key("attention.layer_norm_rms_epsilon");
        let rms_eps = self.meta.f64(&eps_key)? as f32;
        if !(0.0..1.0).contains(&rms_eps) {
            return Err(invalid(&eps_key, rms_eps, "must be in [0, 1)"));
        }
        let rope_freq_scale = self.rope_scaling()?;
        let rope_attn_factor = self.opt_f32("rope.scaling.attn_factor")?.unwrap_or(1.0);
        positive_finite(&self.key("rope.scaling.attn_factor"), rope_attn_factor)?;
        let config = ModelConfig {
            arch: self.arch,
            n_layers,
            n_embd,
            n_ff,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_mode,
            rope_base,
            rope_dim,
            rms_eps,
            context_length,
            vocab_size,
            qkv_bias,
        };
        let attention = AttentionPlan {
            rope_base,
            rope_freq_scale,
            window: None,
            scale: 1.0 / (head_dim as f32).sqrt(),
        };
        Ok(Plan {
            config,
            layers: vec![LayerPlan { attention }; n_layers],
            qk_norm: false,
            post_norms: false,
            activation: Activation::Silu,
            fused_qkv: false,
            fused_gate_up: false,
            embd_scale: None,
            rope_factors: RopeFactors::None,
            rope_attn_factor,
            logit_softcap: None,
            separate_output: self.has_tensor(Tensor::Output, None),
        })
    }

    /// llama.cpp's `freq_scale` from `rope.scaling.type`/`factor` (or `rope.scale_linear`):
    /// none and linear are implemented; any other type is refused by name.
    pub(super) fn rope_scaling(&self) -> Result<f32> {
        let kind = self.opt_str("rope.scaling.type")?;
        let factor = match self.opt_f32("rope.scaling.factor")? {
            Some(f) => Some(f),
            None => self.opt_f32("rope.scale_linear")?,
        };
        let linear = match kind {
            None | Some("linear") => factor,
            Some("none") => None,
            Some(other) => {
                return Err(ModelError::UnsupportedKey {
                    key: self.key("rope.scaling.type"),
                    value: other.to_owned(),
                    why: "is not implemented (none and linear are)".into(),
                })
            }
        };
        match linear {
            None => Ok(1.0),
            Some(0.0) => Ok(1.0),
            Some(f) => {
                positive_finite(&self.key("rope.scaling.factor"), f)?;
                Ok(1.0 / f)
            }
        }
    }
}
