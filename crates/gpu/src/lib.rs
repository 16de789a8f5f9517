//! The model's forward pass as WGSL compute shaders over wgpu: natively on Vulkan/Metal/DX12
//! and in the browser on WebGPU, with one code path and no blocking call on wasm.
//!
//! Scope: tokens in, logits (or per-row argmax) out, through [`runahead_model::LanguageModel`].
//! Weights stay in their GGUF block formats on the GPU and are decoded inside the kernels.
//! Every row of every kernel reduces in an order fixed by the row alone, so a token's logits
//! are bit-identical whether it is computed alone or in a block (batch invariance), which is
//! what lets greedy speculative decoding equal plain decoding exactly.

#![forbid(unsafe_code)]

mod clock;
mod context;
mod error;
pub mod kernels;
mod model;
mod readback;
mod tensor;
pub mod testing;

pub use context::{required_limits, GpuContext, GpuOptions};
pub use error::GpuError;
#[cfg(not(target_arch = "wasm32"))]
pub use model::DispatchTime;
pub use model::WeightStream;
pub use model::{
    CountCalls, GpuModel, GpuStats, HostCost, MemoryPlan, HOST_WARMUP, MAX_HOST_REPS, MAX_ROWS,
    STEPS,
};
pub use tensor::GpuMatrix;
