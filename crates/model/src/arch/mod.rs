//! One description per architecture, which every engine executes: the GGUF keys it reads, its
//! tensors (named as llama.cpp's `LLM_TENSOR_NAMES` names them) and a per-layer plan of steps
//! (norms and where they sit, attention options, FFN activation, embedding scale).
//!
//! Each architecture is one file here ([`llama`], [`qwen2`], [`qwen3`], [`gemma3`], [`phi3`]):
//! it starts from [`Hparams::plan`] (the keys every architecture shares) and sets what differs.
//! An engine states the [`Step`]s it implements and calls [`Plan::require`]: a model that needs
//! a step it does not implement is refused by name, never run without it. Every tensor of a
//! file must be one the plan reads ([`Plan::check_header`]), so a tensor that changes the
//! arithmetic (a `rope_freqs.weight` an architecture does not read, an unknown layer tensor) is
//! refused too.

mod gemma3;
mod hparams;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;
mod tensor;
pub mod weights;

use runahead_gguf::{Gguf, GgufError, Metadata};

use crate::{ModelConfig, ModelError, Result, Rope, TensorSpec, TensorTotals};
pub(crate) use hparams::Hparams;
pub use tensor::Tensor;

/// Transformer families runahead runs: decoder stacks with RMSNorm, RoPE and grouped-query
/// attention, each described by one file of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Phi3,
}

impl Architecture {
    /// Every architecture, in the order `runahead info` and the docs list them.
    pub const ALL: [Architecture; 5] = [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
        Architecture::Gemma3,
        Architecture::Phi3,
    ];

    /// The `general.architecture` value (and metadata key prefix) of the family.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Gemma3 => "gemma3",
            Architecture::Phi3 => "phi3",
        }
    }

    fn of(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// The FFN's activation, applied to the gate before it multiplies the up projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x * sigmoid(x)` (llama, qwen, phi3).
    Silu,
    /// GELU, tanh approximation (gemma3).
    GeluTanh,
}

/// Per-pair RoPE frequency factors (the angle of pair `i` is divided by factor `i`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeFactors {
    None,
    /// Llama 3's `rope_freqs.weight`.
    Freqs,
    /// Phi-3's LongRoPE: `rope_factors_long.weight` when the context is longer than
    /// `original_context`, `rope_factors_short.weight` otherwise (as llama.cpp picks them by
    /// its context size).
    LongShort {
        original_context: usize,
    },
}

/// Attention options of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionPlan {
    /// RoPE base of this layer (gemma3's sliding-window layers have their own).
    pub rope_base: f32,
    /// Multiplies every RoPE angle (llama.cpp's `freq_scale`: 1 / the linear scaling factor).
    pub rope_freq_scale: f32,
    /// A query at position `p` sees keys at positions `> p - window` only.
    pub window: Option<usize>,
    /// Multiplies `q·k` before the softmax.
    pub scale: f32,
}

/// One layer's plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerPlan {
    pub attention: AttentionPlan,
}

/// The description of a model that engines execute. Per layer, in order:
///
/// 1. `h = rms_norm(x) * attn_norm`;
/// 2. Q, K, V = `h` times `attn_q`/`attn_k`/`attn_v` (or split from `attn_qkv` when
///    [`Plan::fused_qkv`]), plus biases when `config.qkv_bias`;
/// 3. with [`Plan::qk_norm`], each head of Q and K RMS-normed by `attn_q_norm`/`attn_k_norm`;
/// 4. RoPE on Q and K (the layer's base and freq scale, [`Plan::rope_factors`], scaled by
///    [`Plan::rope_attn_factor`]);
/// 5. attention with the layer's scale and window; `o = attn_output` times it;
/// 6. with [`Plan::post_norms`], `o = rms_norm(o) * post_attention_norm`; `x += o`;
/// 7. `h = rms_norm(x) * ffn_norm`; gate and up (split from a fused `ffn_up` of twice the
///    width when [`Plan::fused_gate_up`], gate first); `f = act(gate) * up`; `o = ffn_down f`;
/// 8. with [`Plan::post_norms`], `o = rms_norm(o) * post_ffw_norm`; `x += o`.
///
/// The input is the token's embedding times [`Plan::embd_scale`]; the output is
/// `output_norm`, the output projection, then [`Plan::logit_softcap`].
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub config: ModelConfig,
    pub layers: Vec<LayerPlan>,
    pub qk_norm: bool,
    pub post_norms: bool,
    pub activation: Activation,
    pub fused_qkv: bool,
    pub fused_gate_up: bool,
    pub embd_scale: Option<f32>,
    pub rope_factors: RopeFactors,
    /// Multiplies RoPE's cos and sin (llama.cpp's `attn_factor`; LongRoPE's
    /// `rope.scaling.attn_factor`).
    pub rope_attn_factor: f32,
    /// `cap * tanh(logit / cap)` on the output.
    pub logit_softcap: Option<f32>,
    /// The file has its own `output.weight` (otherwise the output is the token embedding).
    pub separate_output: bool,
}

/// A step of a plan beyond a llama-style layer: engines list those they implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Head dimension from `attention.key_length`, Q wider or narrower than `n_embd`.
    HeadDim,
    QkNorm,
    PostNorms,
    GeluTanh,
    FusedQkv,
    FusedGateUp,
    EmbeddingScale,
    SlidingWindow,
    /// A RoPE base or freq scale that differs between layers, or a freq scale other than 1.
    LayerRope,
    RopeFactors,
    /// An attention scale other than `1/sqrt(head_dim)`.
    AttentionScale,
    LogitSoftcap,
}

impl Step {
    /// Every step: an engine that implements the whole plan passes this.
    pub const ALL: &'static [Step] = &[
        Step::HeadDim,
        Step::QkNorm,
        Step::PostNorms,
        Step::GeluTanh,
        Step::FusedQkv,
        Step::FusedGateUp,
        Step::EmbeddingScale,
        Step::SlidingWindow,
        Step::LayerRope,
        Step::RopeFactors,
        Step::AttentionScale,
        Step::LogitSoftcap,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Step::HeadDim => "a head dimension (attention.key_length) other than n_embd / n_heads",
            Step::QkNorm => "per-head Q/K RMS norms (attn_q_norm, attn_k_norm)",
            Step::PostNorms => {
                "post-attention and post-FFN norms (post_attention_norm, post_ffw_norm)"
            }
            Step::GeluTanh => "a GELU-tanh gated FFN",
            Step::FusedQkv => "a fused attn_qkv projection",
            Step::FusedGateUp => "a fused gate/up ffn_up projection",
            Step::EmbeddingScale => "a scaled token embedding",
            Step::SlidingWindow => "sliding-window attention",
            Step::LayerRope => "per-layer RoPE bases or a RoPE frequency scale",
            Step::RopeFactors => "RoPE frequency factors (rope_freqs, rope_factors_long/short)",
            Step::AttentionScale => "an attention scale other than 1/sqrt(head_dim)",
            Step::LogitSoftcap => "final logit soft-capping",
        }
    }
}

impl Plan {
    /// The plan of a model file from its header (metadata and tensor table).
    pub fn from_header(header: &Gguf) -> Result<Self> {
        let vocab = ModelConfig::header_vocab_rows(header)?;
        Self::from_metadata(&header.metadata, vocab, &|name| {
            header.tensor(name).is_some()
        })
    }

    /// The plan from metadata; `vocab_size` is the token embedding's rows, `has_tensor` says
    /// whether the file holds a tensor (optional ones: `output.weight`, `rope_freqs.weight`,
    /// fused or separate projections).
    pub fn from_metadata(
        meta: &Metadata,
        vocab_size: usize,
        has_tensor: &dyn Fn(&str) -> bool,
    ) -> Result<Self> {
        let arch_name = meta.str("general.architecture")?;
        let arch = Architecture::of(arch_name)
            .ok_or_else(|| ModelError::UnsupportedArchitecture(arch_name.to_owned()))?;
        let h = Hparams {
            meta,
            arch,
            has_tensor,
        };
        let plan = match arch {
            Architecture::Llama => llama::plan(&h, vocab_size)?,
            Architecture::Qwen2 => qwen2::plan(&h, vocab_size)?,
            Architecture::Qwen3 => qwen3::plan(&h, vocab_size)?,
            Architecture::Gemma3 => gemma3::plan(&h, vocab_size)?,
            Architecture::Phi3 => phi3::plan(&h, vocab_size)?,
        };
        plan.config.check_derived_sizes()?;
        Ok(plan)
    }

    /// The steps of this plan beyond a llama-style layer.
    pub fn steps(&self) -> Vec<Step> {
        let c = &self.config;
        let default_scale = 1.0 / (c.head_dim as f32).sqrt();
        let l0 = self.layers.first().map(|l| l.attention);
        let mut steps = Vec::new();
        let mut add = |cond: bool, s: Step| {
            if cond {
                steps.push(s);
            }
        };
        add(c.q_dim() != c.n_embd, Step::HeadDim);
        add(self.qk_norm, Step::QkNorm);
        add(self.post_norms, Step::PostNorms);
        add(self.activation == Activation::GeluTanh, Step::GeluTanh);
        add(self.fused_qkv, Step::FusedQkv);
        add(self.fused_gate_up, Step::FusedGateUp);
        add(self.embd_scale.is_some(), Step::EmbeddingScale);
        add(
            self.layers.iter().any(|l| l.attention.window.is_some()),
            Step::SlidingWindow,
        );
        add(
            self.layers.iter().any(|l| {
                l.attention.rope_freq_scale != 1.0 || l.attention.rope_base != c.rope_base
            }),
            Step::LayerRope,
        );
        add(
            self.rope_factors != RopeFactors::None || self.rope_attn_factor != 1.0,
            Step::RopeFactors,
        );
        add(
            l0.is_some_and(|_| {
                self.layers
                    .iter()
                    .any(|l| l.attention.scale != default_scale)
            }),
            Step::AttentionScale,
        );
        add(self.logit_softcap.is_some(), Step::LogitSoftcap);
        steps
    }

    /// Refuses this model, naming the first step `engine` does not implement.
    pub fn require(&self, engine: &str, implemented: &[Step]) -> Result<()> {
        match self.steps().into_iter().find(|s| !implemented.contains(s)) {
            None => Ok(()),
            Some(step) => Err(ModelError::NotImplemented {
                arch: self.config.arch.name().to_owned(),
                step: step.describe().to_owned(),
                engine: engine.to_owned(),
            }),
        }
    }

    /// Each layer's RoPE for a context of `capacity` positions. `factors`: the frequency
    /// factors the file holds (`rope_freqs`, or LongRoPE's long and short); LongRoPE's are
    /// picked by the context, as llama.cpp picks them by its context size.
    pub fn ropes(&self, capacity: usize, factors: Option<(&[f32], Option<&[f32]>)>) -> Vec<Rope> {
        let factors = match (factors, self.rope_factors) {
            (Some((long, Some(short))), RopeFactors::LongShort { original_context }) => {
                Some(if capacity > original_context {
                    long
                } else {
                    short
                })
            }
            (Some((freqs, _)), _) => Some(freqs),
            (None, _) => None,
        };
        self.layers
            .iter()
            .map(|l| {
                let a = &l.attention;
                let base = a.rope_base;
                Rope::new(
                    &self.config,
                    base,
                    a.rope_freq_scale,
                    factors,
                    self.rope_attn_factor,
                )
            })
            .collect()
    }

    /// Q's width: `n_heads * head_dim`.
    pub fn q_dim(&self) -> usize {
        self.config.q_dim()
    }

    /// Every tensor this plan reads, in file order, made one at a time (a file may claim any
    /// number of layers: a check stops at the first tensor it lacks).
    pub fn tensors(&self) -> impl Iterator<Item = TensorSpec> + '_ {
        let c = &self.config;
        let (d, q, kv, ff, vocab, hd) = (
            c.n_embd,
            c.q_dim(),
            c.kv_dim(),
            c.n_ff,
            c.vocab_size,
            c.head_dim,
        );
        let pairs = c.rope_dim / 2;
        let global = match self.rope_factors {
            RopeFactors::None => vec![],
            RopeFactors::Freqs => vec![Tensor::RopeFreqs],
            RopeFactors::LongShort { .. } => {
                vec![Tensor::RopeFactorsLong, Tensor::RopeFactorsShort]
            }
        };
        let globals = global
            .into_iter()
            .map(move |t| TensorSpec::vector(t.name(None), pairs));
        let layers = (0..c.n_layers).flat_map(move |l| {
            self.layer_tensors().into_iter().map(move |t| {
                let name = t.name(Some(l));
                match t {
                    Tensor::AttnQkv => TensorSpec::matrix(name, q + 2 * kv, d),
                    Tensor::AttnQ => TensorSpec::matrix(name, q, d),
                    Tensor::AttnK | Tensor::AttnV => TensorSpec::matrix(name, kv, d),
                    Tensor::AttnQBias => TensorSpec::vector(name, q),
                    Tensor::AttnKBias | Tensor::AttnVBias => TensorSpec::vector(name, kv),
                    Tensor::AttnQNorm | Tensor::AttnKNorm => TensorSpec::vector(name, hd),
                    Tensor::AttnOutput => TensorSpec::matrix(name, d, q),
                    Tensor::FfnGate => TensorSpec::matrix(name, ff, d),
                    Tensor::FfnUp if self.fused_gate_up => TensorSpec::matrix(name, 2 * ff, d),
                    Tensor::FfnUp => TensorSpec::matrix(name, ff, d),
                    Tensor::FfnDown => TensorSpec::matrix(name, d, ff),
                    _ => TensorSpec::vector(name, d),
                }
            })
        });
        std::iter::once(TensorSpec::matrix(Tensor::TokenEmbd.name(None), vocab, d))
            .chain(globals)
            .chain(layers)
            .chain(std::iter::once(TensorSpec::vector(
                Tensor::OutputNorm.name(None),
                d,
            )))
            .chain(
                self.separate_output
                    .then(|| TensorSpec::matrix(Tensor::Output.name(None), vocab, d)),
            )
    }

    /// The tensors of each layer, in file order.
    pub fn layer_tensors(&self) -> Vec<Tensor> {
        let mut t = vec![Tensor::AttnNorm];
        if self.fused_qkv {
            t.push(Tensor::AttnQkv);
        } else {
            t.extend([Tensor::AttnQ, Tensor::AttnK, Tensor::AttnV]);
        }
        if self.config.qkv_bias {
            t.extend([Tensor::AttnQBias, Tensor::AttnKBias, Tensor::AttnVBias]);
        }
        if self.qk_norm {
            t.extend([Tensor::AttnQNorm, Tensor::AttnKNorm]);
        }
        t.push(Tensor::AttnOutput);
        if self.post_norms {
            t.push(Tensor::PostAttnNorm);
        }
        t.push(Tensor::FfnNorm);
        if !self.fused_gate_up {
            t.push(Tensor::FfnGate);
        }
        t.extend([Tensor::FfnUp, Tensor::FfnDown]);
        if self.post_norms {
            t.push(Tensor::PostFfnNorm);
        }
        t
    }

    /// Checks that `header` holds every tensor this plan reads, with its shape and a type the
    /// engines decode, and nothing else (a tensor the plan does not read would change the
    /// arithmetic unseen), before anything is allocated for them.
    pub fn check_header(&self, header: &Gguf) -> Result<TensorTotals> {
        let mut totals = TensorTotals {
            file_bytes: 0,
            vector_elements: 0,
        };
        let mut read = std::collections::HashSet::new();
        for spec in self.tensors() {
            let info = header
                .tensor(&spec.name)
                .ok_or_else(|| GgufError::MissingTensor(spec.name.clone()))?;
            if info.shape != spec.shape {
                return Err(ModelError::TensorShape {
                    name: spec.name,
                    expected: spec.shape,
                    found: info.shape.clone(),
                });
            }
            if !info.ty.is_supported() {
                return Err(ModelError::UnsupportedTensorType {
                    name: spec.name,
                    ty: info.ty,
                });
            }
            totals.file_bytes = totals.file_bytes.saturating_add(info.size);
            if spec.shape.len() == 1 {
                totals.vector_elements = totals.vector_elements.saturating_add(spec.shape[0]);
            }
            read.insert(spec.name);
        }
        if let Some(extra) = header.tensors.iter().find(|t| !read.contains(&t.name)) {
            return Err(ModelError::UnknownTensor {
                arch: self.config.arch.name().to_owned(),
                name: extra.name.clone(),
            });
        }
        Ok(totals)
    }
}
