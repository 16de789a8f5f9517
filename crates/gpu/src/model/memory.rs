//! What a model will allocate on the device, decided before any buffer exists: every size in
//! u64 with checked arithmetic (a file's metadata is untrusted, and `usize` is 32 bits on
//! wasm32), each buffer against the adapter's limits, the total against the caller's budget.

use runahead_model::{ModelConfig, TensorTotals};

use super::{MAX_ROWS, TOP_K_ROW_WORDS};
use crate::{GpuContext, GpuError};

/// Bytes of each buffer of the forward pass (all f32 or u32 words), checked.
#[derive(Clone, Copy, Debug)]
pub(super) struct BufferSizes {
    /// `[MAX_ROWS, n_embd]`: x, h.
    pub width: u64,
    /// `[MAX_ROWS, n_heads * head_dim]`: q, attn.
    pub q_width: u64,
    /// `[MAX_ROWS, kv_dim]`: the compaction scratch.
    pub kv_rows: u64,
    /// `[MAX_ROWS, q_dim + 2 kv_dim]`: the q/k/v product.
    pub qkv: u64,
    /// `[MAX_ROWS, n_ff]`: the gated activation.
    pub ffn: u64,
    /// `[MAX_ROWS, 2 n_ff]`: the gate/up product.
    pub gate_up: u64,
    /// `[MAX_ROWS, n_heads, capacity]`: attention scores.
    pub scores: u64,
    /// `[MAX_ROWS, n_heads, chunks, 4 + head_dim]`: the attention's partial result per chunk
    /// (`shaders/attention_io.wgsl`).
    pub partials: u64,
    /// `[MAX_ROWS, vocab]`: logits on the device and their readback copy.
    pub logits: u64,
    /// `[capacity, kv_dim]` f16: one full layer's keys (or values); a sliding-window layer that
    /// keeps a ring holds `[ring, kv_dim]` (see [`runahead_model::kv_ring`]).
    pub kv_cache_layer: u64,
    /// Every layer's keys and values, rings counted.
    pub kv_cache: u64,
    /// `[MAX_ROWS, 1 + MAX_ROWS]`: each row's visible block indices.
    pub visible: u64,
    /// `[MAX_ROWS, TOP_K_ROW_WORDS]`.
    pub top_k: u64,
    /// `[MAX_ROWS]`: tokens, positions, argmax.
    pub per_row: u64,
}

/// The whole model's device memory, by kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryPlan {
    /// Weight matrices as stored in the file, plus the vectors as f32.
    pub weights: u64,
    /// Keys and values of every layer for `capacity` tokens (a sliding-window layer's ring
    /// where it is smaller).
    pub kv_cache: u64,
    /// Activations, logits, readback and parameter buffers.
    pub activations: u64,
}

impl MemoryPlan {
    pub fn total(&self) -> u64 {
        self.weights
            .saturating_add(self.kv_cache)
            .saturating_add(self.activations)
    }
}

fn overflow(what: &str) -> GpuError {
    GpuError::Validation(format!("the model's {what} overflows 64 bits"))
}

/// `a * b * c * 4` bytes, or an error naming `what`.
fn words(what: &str, a: usize, b: usize, c: usize) -> Result<u64, GpuError> {
    (a as u64)
        .checked_mul(b as u64)
        .and_then(|n| n.checked_mul(c as u64))
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| overflow(what))
}

impl BufferSizes {
    /// The sizes for `c` with a cache of `capacity` entries, each layer keeping `kv_rows` of
    /// them ([`runahead_model::Plan::kv_rows`]).
    pub fn of(c: &ModelConfig, capacity: usize, kv_rows: &[usize]) -> Result<Self, GpuError> {
        let r = MAX_ROWS;
        let mut kv_cache = 0u64;
        for &rows in kv_rows {
            let layer = Self::kv_layer(c, rows)?;
            kv_cache = layer
                .checked_mul(2)
                .and_then(|b| b.checked_add(kv_cache))
                .ok_or_else(|| overflow("KV cache"))?;
        }
        Ok(BufferSizes {
            width: words("activation width", r, c.n_embd, 1)?,
            q_width: words("query width", r, c.q_dim(), 1)?,
            kv_rows: words("KV width", r, c.kv_dim(), 1)?,
            qkv: words(
                "q/k/v width",
                r,
                c.q_dim().saturating_add(c.kv_dim().saturating_mul(2)),
                1,
            )?,
            ffn: words("feed-forward width", r, c.n_ff, 1)?,
            gate_up: words("gate/up width", r, c.n_ff.saturating_mul(2), 1)?,
            scores: words("attention scores", r, c.n_heads, capacity)?,
            partials: words(
                "attention partials",
                r,
                c.n_heads,
                crate::kernels::attention_chunks(capacity)
                    .saturating_mul(c.head_dim.saturating_add(4)),
            )?,
            logits: words("logits", r, c.vocab_size, 1)?,
            // f16, two to a word (kv_dim is a multiple of 4).
            kv_cache_layer: Self::kv_layer(c, capacity)?,
            kv_cache,
            visible: words("visibility lists", r, 1 + r, 1)?,
            top_k: words("top-k output", r, TOP_K_ROW_WORDS, 1)?,
            per_row: words("row inputs", r, 1, 1)?,
        })
    }

    /// Bytes of one layer's keys (or values) for `rows` entries: f16, two to a word (kv_dim is a
    /// multiple of 4).
    pub fn kv_layer(c: &ModelConfig, rows: usize) -> Result<u64, GpuError> {
        words("KV cache", rows, c.kv_dim() / 2, 1)
    }

    /// The storage buffers whose size depends on the model: one binding must hold each.
    fn bindings(&self) -> [u64; 11] {
        [
            self.width,
            self.q_width,
            self.kv_rows,
            self.qkv,
            self.ffn,
            self.gate_up,
            self.scores,
            self.partials,
            self.logits,
            self.kv_cache_layer,
            self.visible,
        ]
    }

    /// Checks every buffer against the device's binding and buffer limits, then the whole model
    /// (with `tensors`, the weights the file holds) against the context's memory budget.
    pub fn check(&self, ctx: &GpuContext, tensors: TensorTotals) -> Result<MemoryPlan, GpuError> {
        for bytes in self.bindings() {
            if bytes > ctx.max_binding_size {
                return Err(GpuError::LimitTooSmall {
                    limit: "maxStorageBufferBindingSize",
                    needed: bytes,
                    available: ctx.max_binding_size,
                });
            }
        }
        let plan = self.plan(tensors)?;
        if let Some(budget) = ctx.memory_budget {
            if plan.total() > budget {
                return Err(GpuError::OverMemoryBudget {
                    needed: plan.total(),
                    budget,
                    weights: plan.weights,
                    kv_cache: plan.kv_cache,
                    activations: plan.activations,
                });
            }
        }
        Ok(plan)
    }

    fn plan(&self, tensors: TensorTotals) -> Result<MemoryPlan, GpuError> {
        // Sum of count x bytes, checked: the sizes come from an untrusted file.
        let sum = |what: &str, parts: &[(u64, u64)]| {
            parts
                .iter()
                .try_fold(0u64, |acc, &(n, bytes)| {
                    n.checked_mul(bytes).and_then(|b| acc.checked_add(b))
                })
                .ok_or_else(|| overflow(what))
        };
        let kv_cache = self.kv_cache;
        let activations = sum(
            "activations",
            &[
                (2, self.width),
                (2, self.q_width),
                (1, self.qkv),
                (1, self.kv_rows),
                (1, self.ffn),
                (1, self.gate_up),
                (1, self.scores),
                (1, self.partials),
                (2, self.logits),
                (1, self.visible),
                (2, self.top_k),
                (5, self.per_row),
                (1, super::upload::UPLOAD_BYTES),
            ],
        )?;
        // Vectors are uploaded as f32 whatever their stored type.
        let weights = sum(
            "weights",
            &[(1, tensors.file_bytes), (4, tensors.vector_elements)],
        )?;
        Ok(MemoryPlan {
            weights,
            kv_cache,
            activations,
        })
    }
}
