use runahead_gguf::Metadata;

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

impl ModelConfig {
    /// Reads the configuration; `vocab_size` comes from the token embedding's shape.
    pub fn from_metadata(meta: &Metadata, vocab_size: usize) -> Result<Self> {
        let arch_name = meta.str("general.architecture")?;
        let arch = match arch_name {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            other => return Err(ModelError::UnsupportedArchitecture(other.to_owned())),
        };
        let key = |k: &str| format!("{arch_name}.{k}");
        let usize_of = |k: &str| -> Result<usize> {
            let v = meta.u64(&key(k))?;
            usize::try_from(v)
                .map_err(|_| ModelError::Config(format!("{} = {v} is too large", key(k))))
        };
        let n_layers = usize_of("block_count")?;
        let n_embd = usize_of("embedding_length")?;
        let n_ff = usize_of("feed_forward_length")?;
        let n_heads = usize_of("attention.head_count")?;
        let n_kv_heads = match meta.get(&key("attention.head_count_kv")) {
            Some(_) => usize_of("attention.head_count_kv")?,
            None => n_heads,
        };
        if n_heads == 0 || n_kv_heads == 0 || n_embd % n_heads != 0 || n_heads % n_kv_heads != 0 {
            return Err(ModelError::Config(format!(
                "{n_heads} heads, {n_kv_heads} KV heads and width {n_embd} do not divide evenly"
            )));
        }
        let head_dim = n_embd / n_heads;
        let rope_dim = match meta.get(&key("rope.dimension_count")) {
            Some(_) => usize_of("rope.dimension_count")?,
            None => head_dim,
        };
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(ModelError::Config(format!(
                "RoPE dimension {rope_dim} vs head {head_dim}"
            )));
        }
        let rope_base = match meta.get(&key("rope.freq_base")) {
            Some(_) => meta.f64(&key("rope.freq_base"))? as f32,
            None => 10000.0,
        };
        let rms_eps = meta.f64(&key("attention.layer_norm_rms_epsilon"))? as f32;
        let context_length = usize_of("context_length")?;
        let (rope_mode, qkv_bias) = match arch {
            Architecture::Llama => (RopeMode::Normal, false),
            Architecture::Qwen2 => (RopeMode::Neox, true),
        };
        if n_layers == 0 || n_ff == 0 || context_length == 0 || vocab_size == 0 {
            return Err(ModelError::Config("a dimension is zero".into()));
        }
        Ok(ModelConfig {
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
        })
    }

    /// Width of the K (and V) projection: `n_kv_heads * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
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
