use runahead_gguf::{Gguf, GgufError, GgufFile, Metadata};

use crate::{ModelError, Result};

/// Transformer families runahead runs. Both are pre-norm decoder stacks with RMSNorm, RoPE,
/// grouped-query attention and a SiLU-gated FFN; they differ in the RoPE pairing and biases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
}

/// How RoPE pairs the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Adjacent pairs (2i, 2i+1): llama.cpp's "normal" mode, used by llama (its converter
    /// permutes Q/K rows so that this matches the original split-half layout).
    Normal,
    /// Split halves (i, i + d/2): GPT-NeoX style, used by qwen2.
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
const MAX_LAYERS: u64 = 1 << 10;
const MAX_EMBD: u64 = 1 << 17;
const MAX_FF: u64 = 1 << 20;
const MAX_HEADS: u64 = 1 << 10;
const MAX_CONTEXT: u64 = 1 << 24;
const MAX_VOCAB: u64 = 1 << 22;

/// Metadata key of the tokenizer's token list.
const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

impl ModelConfig {
    /// Reads the configuration of a model file: hyper-parameters from its metadata, the
    /// vocabulary size from its token embedding ([`ModelConfig::vocab_rows`]), which must have
    /// a row for every token of the tokenizer.
    pub fn from_file(file: &GgufFile) -> Result<Self> {
        Self::from_header(&file.header)
    }

    /// [`ModelConfig::from_file`] from the file's header alone (its metadata and tensor table,
    /// as [`Gguf::parse_prefix`] reads them before the tensor data).
    pub fn from_header(header: &Gguf) -> Result<Self> {
        let vocab = Self::header_vocab_rows(header)?;
        let meta = &header.metadata;
        let config = Self::from_metadata(meta, vocab)?;
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
    pub fn from_metadata(meta: &Metadata, vocab_size: usize) -> Result<Self> {
        let arch_name = meta.str("general.architecture")?;
        let arch = match arch_name {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            other => return Err(ModelError::UnsupportedArchitecture(other.to_owned())),
        };
        let key = |k: &str| format!("{arch_name}.{k}");
        let dim = |k: &str, max: u64| bounded(&key(k), meta.u64(&key(k))?, max);
        let opt_dim = |k: &str, max: u64| match meta.get(&key(k)) {
            Some(_) => dim(k, max).map(Some),
            None => Ok(None),
        };
        let vocab_size = bounded("vocabulary size", vocab_size as u64, MAX_VOCAB)?;
        let n_layers = dim("block_count", MAX_LAYERS)?;
        let n_embd = dim("embedding_length", MAX_EMBD)?;
        let n_ff = dim("feed_forward_length", MAX_FF)?;
        let n_heads = dim("attention.head_count", MAX_HEADS)?;
        let n_kv_heads = opt_dim("attention.head_count_kv", MAX_HEADS)?.unwrap_or(n_heads);
        let context_length = dim("context_length", MAX_CONTEXT)?;
        let head_dim = head_dim(arch_name, n_embd, n_heads, n_kv_heads)?;
        let rope_dim = opt_dim("rope.dimension_count", MAX_EMBD)?.unwrap_or(head_dim);
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(invalid(
                &key("rope.dimension_count"),
                rope_dim,
                format!("must be even and at most the head dimension {head_dim}"),
            ));
        }
        let rope_base = match meta.get(&key("rope.freq_base")) {
            Some(_) => meta.f64(&key("rope.freq_base"))? as f32,
            None => 10000.0,
        };
        positive_finite(&key("rope.freq_base"), rope_base)?;
        let rms_eps = meta.f64(&key("attention.layer_norm_rms_epsilon"))? as f32;
        if !(0.0..1.0).contains(&rms_eps) {
            return Err(invalid(
                &key("attention.layer_norm_rms_epsilon"),
                rms_eps,
                "must be in [0, 1)",
            ));
        }
        let (rope_mode, qkv_bias) = match arch {
            Architecture::Llama => (RopeMode::Normal, false),
            Architecture::Qwen2 => (RopeMode::Neox, true),
        };
        let config = ModelConfig {
            arch,
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
        config.check_derived_sizes()?;
        Ok(config)
    }

    /// Width of the K (and V) projection: `n_kv_heads * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Checks in u64 the sizes engines derive from the hyper-parameters: each weight matrix
    /// must be addressable as one buffer here (usize is 32 bits on wasm32), and the KV cache
    /// over the whole trained context must not overflow.
    fn check_derived_sizes(&self) -> Result<()> {
        let n = |v: usize| v as u64;
        let (d, kv) = (n(self.n_embd), n(self.kv_dim()));
        for (what, rows, cols) in [
            ("token embedding", n(self.vocab_size), d),
            ("feed-forward matrix", n(self.n_ff), d),
            ("attention matrix", d, d),
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

/// Head width: `n_embd` must split evenly into `n_heads` heads, grouped evenly by the KV heads.
fn head_dim(arch: &str, n_embd: usize, n_heads: usize, n_kv_heads: usize) -> Result<usize> {
    if !n_embd.is_multiple_of(n_heads) {
        let why = format!("is not a multiple of the {n_heads} attention heads");
        return Err(invalid(&format!("{arch}.embedding_length"), n_embd, why));
    }
    if n_kv_heads > n_heads || !n_heads.is_multiple_of(n_kv_heads) {
        let why = format!("is not a multiple of the {n_kv_heads} KV heads");
        return Err(invalid(
            &format!("{arch}.attention.head_count"),
            n_heads,
            why,
        ));
    }
    Ok(n_embd / n_heads)
}

/// `v` as a usize in `1..=max`.
fn bounded(what: &str, v: u64, max: u64) -> Result<usize> {
    if v == 0 {
        return Err(invalid(what, v, "must be at least 1"));
    }
    if v > max {
        let why = format!("is more than {max}, beyond any model this runtime runs");
        return Err(invalid(what, v, why));
    }
    usize::try_from(v).map_err(|_| invalid(what, v, "is more than this platform can address"))
}

fn positive_finite(what: &str, v: f32) -> Result<()> {
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

fn invalid(what: &str, value: impl std::fmt::Display, reason: impl Into<String>) -> ModelError {
    ModelError::InvalidHyperParameter {
        what: what.to_owned(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// GGUF tensor names of the llama/qwen2 families.
pub struct TensorNames;

impl TensorNames {
    pub const TOKEN_EMBD: &'static str = "token_embd.weight";
    pub const OUTPUT_NORM: &'static str = "output_norm.weight";
    /// Absent when the output projection is tied to the token embedding.
    pub const OUTPUT: &'static str = "output.weight";

    pub fn layer(i: usize, what: &str) -> String {
        format!("blk.{i}.{what}")
    }
}
