//! Tensor names, as llama.cpp's `LLM_TENSOR_NAMES` (llama-arch.cpp) writes them: the one place
//! engines and checks read them from.

/// A tensor of a model, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tensor {
    TokenEmbd,
    OutputNorm,
    /// Absent when the output projection is tied to the token embedding.
    Output,
    /// Llama 3's RoPE frequency factors.
    RopeFreqs,
    RopeFactorsLong,
    RopeFactorsShort,
    AttnNorm,
    AttnQ,
    AttnK,
    AttnV,
    /// Q, K and V in one matrix (rows: Q's, then K's, then V's).
    AttnQkv,
    AttnQBias,
    AttnKBias,
    AttnVBias,
    AttnQNorm,
    AttnKNorm,
    AttnOutput,
    PostAttnNorm,
    FfnNorm,
    FfnGate,
    /// The up projection, or gate and up in one matrix of twice the rows (gate first).
    FfnUp,
    FfnDown,
    PostFfnNorm,
}

impl Tensor {
    /// The name without the layer prefix.
    pub const fn base_name(self) -> &'static str {
        match self {
            Tensor::TokenEmbd => "token_embd.weight",
            Tensor::OutputNorm => "output_norm.weight",
            Tensor::Output => "output.weight",
            Tensor::RopeFreqs => "rope_freqs.weight",
            Tensor::RopeFactorsLong => "rope_factors_long.weight",
            Tensor::RopeFactorsShort => "rope_factors_short.weight",
            Tensor::AttnNorm => "attn_norm.weight",
            Tensor::AttnQ => "attn_q.weight",
            Tensor::AttnK => "attn_k.weight",
            Tensor::AttnV => "attn_v.weight",
            Tensor::AttnQkv => "attn_qkv.weight",
            Tensor::AttnQBias => "attn_q.bias",
            Tensor::AttnKBias => "attn_k.bias",
            Tensor::AttnVBias => "attn_v.bias",
            Tensor::AttnQNorm => "attn_q_norm.weight",
            Tensor::AttnKNorm => "attn_k_norm.weight",
            Tensor::AttnOutput => "attn_output.weight",
            Tensor::PostAttnNorm => "post_attention_norm.weight",
            Tensor::FfnNorm => "ffn_norm.weight",
            Tensor::FfnGate => "ffn_gate.weight",
            Tensor::FfnUp => "ffn_up.weight",
            Tensor::FfnDown => "ffn_down.weight",
            Tensor::PostFfnNorm => "post_ffw_norm.weight",
        }
    }

    /// The GGUF name: `blk.{layer}.{base}` for a layer's tensor, the base name otherwise.
    pub fn name(self, layer: Option<usize>) -> String {
        match layer {
            Some(l) => format!("blk.{l}.{}", self.base_name()),
            None => self.base_name().to_owned(),
        }
    }

    /// The name of layer `l`'s tensor.
    pub fn at(self, l: usize) -> String {
        self.name(Some(l))
    }
}
