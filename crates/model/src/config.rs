use runahead_gguf::{Gguf, GgufError, GgufFile, Metadata};

use crate::{Architecture, ModelError, Plan, Result, Tensor};

/// How RoPE pairs the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Adjacent pairs (2i, 2i+1): llama.cpp's "normal" mode, used by llama (its converter
    /// permutes Q/K rows so that this matches the original split-half layout).
    Normal,
    /// Split halves (i, i + d/2): GPT-NeoX style, used by qwen2, qwen3, gemma3 and phi3.
    Neox,
}

/// Hyper-parameters of a model, read from its GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub arch: Architecture,
    pub n_layers: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Hidden width of the FFN.
    pub n_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub rope_mode: RopeMode,
    pub rope_base: f32,
    /// Number of leading dimensions of each head that RoPE rotates (usually `head_dim`).
    pub rope_dim: usize,
    pub rms_eps: f32,
    /// Maximum positions the model was trained for.
    pub context_length: usize,
    pub vocab_size: usize,
    /// Whether q/k/v projections have biases (qwen2).
    pub qkv_bias: bool,
}

/// Largest hyper-parameters accepted. Each is at least 8x the largest public llama-family model
/// (126 layers, width 16,384, FFN 53,248, 128 heads, 262,144-token vocabularies, 10M-token
/// context), so no real model is refused, while a file cannot make an engine size anything
/// by an absurd number, and every product of them stays far inside u64.
pub(crate) const MAX_LAYERS: u64 = 1 << 10;
pub(crate) const MAX_EMBD: u64 = 1 << 17;
pub(crate) const MAX_FF: u64 = 1 << 20;
pub(crate) const MAX_HEADS: u64 = 1 << 10;
pub(crate) const MAX_CONTEXT: u64 = 1 << 24;
pub(crate) const MAX_VOCAB: u64 = 1 << 22;

/// Metadata key of the tokenizer's token list.
const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

impl ModelConfig {
    /// Reads the configuration of a model file: hyper-parameters from its metadata, the
    /// vocabulary size from its token embedding ([`ModelConfig::vocab_rows`]), which must have
    /// a row for every token of the tokenizer. For an engine that runs llama-style layers
    /// only: a model whose [`Plan`] needs any other step is refused, naming it (engines that
    /// execute more read the [`Plan`]).
    pub fn from_file(file: &GgufFile) -> Result<Self> {
        Self::from_header(&file.header)
    }

    /// [`ModelConfig::from_file`] from the file's header alone (its metadata and tensor table,
    /// as [`Gguf::parse_prefix`] reads them before the tensor data).
    pub fn from_header(header: &Gguf) -> Result<Self> {
        Self::for_engine(header, "this engine", &[])
    }

    /// [`ModelConfig::from_header`] for an engine (`engine` names it in errors) that executes
    /// `steps` of a [`Plan`] beyond the llama-style layer: a model needing another step is
    /// refused, naming it.
    pub fn for_engine(header: &Gguf, engine: &str, steps: &[crate::Step]) -> Result<Self> {
        let plan = Plan::from_header(header)?;
        plan.require(engine, steps)?;
        Self::check_vocabulary(header, plan.config)
    }

    /// `config` when the file's tokenizer has no token beyond the token embedding's rows.
    pub(crate) fn check_vocabulary(header: &Gguf, config: ModelConfig) -> Result<Self> {
        let (meta, vocab) = (&header.metadata, config.vocab_size);
        if let Some(tokens) = meta.get(TOKENS_KEY).and_then(|v| v.as_array()) {
            if tokens.len() > vocab {
                return Err(ModelError::VocabularyMismatch {
                    tokens: tokens.len(),
                    rows: vocab,
                });
            }
        }
        Ok(config)
    }

    /// The vocabulary size of a model file: the rows of its token embedding (GGML shape
    /// `[n_embd, vocab]`). Engines, the CLI and the page all read it here, so they agree.
    pub fn vocab_rows(file: &GgufFile) -> Result<usize> {
        Self::header_vocab_rows(&file.header)
    }

    /// [`ModelConfig::vocab_rows`] from the file's header alone.
    pub fn header_vocab_rows(header: &Gguf) -> Result<usize> {
        let embd = header
            .tensor(TensorNames::TOKEN_EMBD)
            .ok_or_else(|| GgufError::MissingTensor(TensorNames::TOKEN_EMBD.into()))?;
        match embd.shape[..] {
            [_, rows] => bounded("token_embd.weight rows", rows, MAX_VOCAB),
            _ => Err(ModelError::TensorShape {
                name: embd.name.clone(),
                expected: vec![0, 0],
                found: embd.shape.clone(),
            }),
        }
    }

    /// Reads the configuration; `vocab_size` is the token embedding's rows. Every size is
    /// checked (range, divisibility, derived products in u64) before an engine allocates by it.
    /// As [`ModelConfig::from_file`], refuses a model that needs more than llama-style layers
    /// (without the tensor table, optional tensors count as absent).
    pub fn from_metadata(meta: &Metadata, vocab_size: usize) -> Result<Self> {
        let plan = Plan::from_metadata(meta, vocab_size, &|_| false)?;
        plan.require("this engine", &[])?;
        Ok(plan.config)
    }

    /// Width of Q (and of attention's output): `n_heads * head_dim`.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of the K (and V) projection: `n_kv_heads * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Checks in u64 the sizes engines derive from the hyper-parameters: each weight matrix
    /// must be addressable as one buffer here (usize is 32 bits on wasm32), and the KV cache
    /// over the whole trained context must not overflow.
    pub(crate) fn check_derived_sizes(&self) -> Result<()> {
        let n = |v: usize| v as u64;
        let (d, kv) = (n(self.n_embd), n(self.kv_dim()));
        let q = n(self.q_dim()).max(kv);
        for (what, rows, cols) in [
            ("token embedding", n(self.vocab_size), d),
            ("feed-forward matrix", 2 * n(self.n_ff), d),
            ("attention matrix", q + 2 * kv, d),
        ] {
            let elements = product(what, &[rows, cols])?;
            usize::try_from(elements).map_err(|_| {
                invalid(
                    what,
                    elements,
                    "elements: more than this platform can address",
                )
            })?;
        }
        product(
            "KV cache",
            &[n(self.n_layers), n(self.context_length), kv, 2],
        )?;
        Ok(())
    }
}

/// `v` as a usize in `1..=max`.
pub(crate) fn bounded(what: &str, v: u64, max: u64) -> Result<usize> {
    if v == 0 {
        return Err(invalid(what, v, "must be at least 1"));
    }
    if v > max {
        let why = format!("is more than {max}, beyond any model this runtime runs");
        return Err(invalid(what, v, why));
    }
    usize::try_from(v).map_err(|_| invalid(what, v, "is more than this platform can address"))
}

pub(crate) fn positive_finite(what: &str, v: f32) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(what, v, "must be a positive finite number"))
    }
}

/// The product of `factors`, or an error naming `what` when it overflows u64.
fn product(what: &str, factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |acc, &f| acc.checked_mul(f))
        .ok_or_else(|| invalid(what, format!("{factors:?}"), "overflows 64 bits"))
}

pub(crate) fn invalid(
    what: &str,
    value: impl std::fmt::Display,
    reason: impl Into<String>,
) -> ModelError {
    ModelError::InvalidHyperParameter {
        what: what.to_owned(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// GGUF tensor names shared by every architecture ([`crate::Tensor`] has them all).
pub struct TensorNames;

impl TensorNames {
    pub const TOKEN_EMBD: &'static str = Tensor::TokenEmbd.base_name();
    pub const OUTPUT_NORM: &'static str = Tensor::OutputNorm.base_name();
    /// Absent when the output projection is tied to the token embedding.
    pub const OUTPUT: &'static str = Tensor::Output.base_name();

    pub fn layer(i: usize, what: &str) -> String {
        format!("blk.{i}.{what}")
    }
}
