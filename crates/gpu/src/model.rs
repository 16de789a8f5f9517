//! The forward pass on the GPU: buffers, bind groups and the list of dispatches are built once
//! at load; a forward writes the block's tokens and positions, encodes the list into one
//! command encoder, submits once, and reads back logits or per-row argmax.

mod build;
#[cfg(not(target_arch = "wasm32"))]
mod profile;

#[cfg(not(target_arch = "wasm32"))]
pub use profile::DispatchTime;

use std::cell::Cell;

use runahead_gguf::GgufFile;
use runahead_model::{Batch, LanguageModel, Logits, ModelConfig, ModelError, Result};

use crate::GpuContext;
use crate::{kernels, readback};

/// Most tokens one forward pass processes; longer causal blocks are split (batch invariance
/// makes that exact).
pub const MAX_ROWS: usize = 64;

/// Default KV cache size when the caller gives none (the model's context can be 32k tokens,
/// which would take gigabytes of cache).
pub const DEFAULT_CONTEXT: usize = 4096;

/// How many workgroups a dispatch needs for a block of `m` tokens.
#[derive(Clone, Copy, Debug)]
enum Grid {
    /// Matmul over `n` weight rows, a tile of tokens per workgroup
    /// ([`kernels::MatmulShape::grid`]).
    Matmul {
        n: usize,
        shape: kernels::MatmulShape,
    },
    /// One workgroup per token.
    PerToken,
    /// One invocation per element, `per_token` elements per token, 64 per workgroup.
    Elements { per_token: usize },
    /// Attention over `heads` query heads ([`kernels::AttentionShape::grid`]).
    Attention {
        heads: usize,
        shape: kernels::AttentionShape,
    },
}

impl Grid {
    fn size(self, m: usize) -> (u32, u32, u32) {
        match self {
            Grid::Matmul { n, shape } => shape.grid(n, m),
            Grid::PerToken => (m as u32, 1, 1),
            Grid::Elements { per_token } => ((m * per_token).div_ceil(64) as u32, 1, 1),
            Grid::Attention { heads, shape } => shape.grid(heads, m),
        }
    }

    /// Which of a dispatch's pipelines (see `Builder::make`) a block of `m` tokens runs.
    fn variant(self, m: usize) -> usize {
        match self {
            Grid::Matmul { .. } => kernels::matmul_variant(m),
            _ => 0,
        }
    }
}

/// One recorded dispatch.
struct Dispatch {
    /// Op, format and shape, for profiles.
    label: String,
    /// Per variant (see [`Grid::variant`]): auto-layout bind groups belong to one pipeline.
    variants: Vec<(wgpu::ComputePipeline, wgpu::BindGroup)>,
    grid: Grid,
}

impl Dispatch {
    fn encode(&self, pass: &mut wgpu::ComputePass, m: usize) {
        let (pipeline, bind_group) =
            &self.variants[self.grid.variant(m).min(self.variants.len() - 1)];
        let (x, y, z) = self.grid.size(m);
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

/// Buffers whose contents change with every forward.
struct StepBuffers {
    step: wgpu::Buffer,      // uniform { m, base }
    tokens: wgpu::Buffer,    // [MAX_ROWS] u32
    positions: wgpu::Buffer, // [MAX_ROWS] u32
    visible: wgpu::Buffer,   // [MAX_ROWS, 1 + MAX_ROWS] u32: count, then block indices
    logits: wgpu::Buffer,    // [MAX_ROWS, vocab] f32
    argmax: wgpu::Buffer,    // [MAX_ROWS] u32
    logits_read: wgpu::Buffer,
    argmax_read: wgpu::Buffer,
}

/// Per-layer KV cache buffers, `[capacity, kv_dim]` f32 each.
struct KvBuffers {
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    /// `[MAX_ROWS, kv_dim]` scratch for compaction.
    scratch: wgpu::Buffer,
}

/// Counters for the benchmark report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    pub forwards: u64,
    pub dispatches: u64,
    pub submits: u64,
}

/// A model on the GPU.
pub struct GpuModel {
    ctx: GpuContext,
    config: ModelConfig,
    capacity: usize,
    cache_len: usize,
    dispatches: Vec<Dispatch>,
    /// Appended to `dispatches` when only each row's argmax is read back.
    argmax_dispatch: Dispatch,
    io: StepBuffers,
    kv: KvBuffers,
    stats: Cell<GpuStats>,
}

#[derive(Clone, Copy)]
enum Want {
    Logits,
    Argmax,
}

impl GpuModel {
    /// Uploads the model and builds its pipelines. `context` sizes the KV cache (default
    /// [`DEFAULT_CONTEXT`], capped by the model's trained context).
    pub fn load(ctx: &GpuContext, file: &GgufFile, context: Option<usize>) -> Result<Self> {
        build::load(ctx, file, context)
    }

    pub fn stats(&self) -> GpuStats {
        self.stats.get()
    }

    /// Dispatches one forward encodes (for reports).
    pub fn dispatches_per_forward(&self) -> usize {
        self.dispatches.len()
    }

    /// Writes the block's step uniform, tokens, positions and visibility lists.
    fn write_step(&self, batch: &Batch) {
        let m = batch.len();
        let q = &self.ctx.queue;
        q.write_buffer(
            &self.io.step,
            0,
            bytemuck::cast_slice(&[m as u32, self.cache_len as u32, 0, 0]),
        );
        q.write_buffer(&self.io.tokens, 0, bytemuck::cast_slice(&batch.tokens));
        let positions: Vec<u32> = batch.positions.iter().map(|&p| p as u32).collect();
        q.write_buffer(&self.io.positions, 0, bytemuck::cast_slice(&positions));
        let visible = batch.visibility();
        let mut lists = vec![0u32; m * (1 + MAX_ROWS)];
        for i in 0..m {
            let row = &mut lists[i * (1 + MAX_ROWS)..(i + 1) * (1 + MAX_ROWS)];
            let seen: Vec<u32> = (0..m)
                .filter(|&j| visible[i * m + j])
                .map(|j| j as u32)
                .collect();
            row[0] = seen.len() as u32;
            row[1..1 + seen.len()].copy_from_slice(&seen);
        }
        q.write_buffer(&self.io.visible, 0, bytemuck::cast_slice(&lists));
    }

    async fn run(&mut self, batch: &Batch, want: Want) -> Result<(Vec<f32>, Vec<u32>)> {
        let c = &self.config;
        batch.validate(c.vocab_size, self.cache_len, self.capacity)?;
        self.ctx.check()?;
        if batch.len() > MAX_ROWS {
            return Err(ModelError::InvalidBatch(format!(
                "a block holds at most {MAX_ROWS} tokens"
            )));
        }
        let m = batch.len();
        self.write_step(batch);
        let q = &self.ctx.queue;

        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for d in self
                .dispatches
                .iter()
                .chain(matches!(want, Want::Argmax).then_some(&self.argmax_dispatch))
            {
                d.encode(&mut pass, m);
            }
        }
        let vocab = c.vocab_size;
        let (src, dst, bytes) = match want {
            Want::Logits => (
                &self.io.logits,
                &self.io.logits_read,
                (m * vocab * 4) as u64,
            ),
            Want::Argmax => (&self.io.argmax, &self.io.argmax_read, (m * 4) as u64),
        };
        encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
        q.submit([encoder.finish()]);
        let mut s = self.stats.get();
        s.forwards += 1;
        s.submits += 1;
        s.dispatches += (self.dispatches.len() + matches!(want, Want::Argmax) as usize) as u64;
        self.stats.set(s);

        let out = match want {
            Want::Logits => (
                readback::read_f32(&self.ctx, dst, m * vocab).await?,
                Vec::new(),
            ),
            Want::Argmax => (Vec::new(), readback::read_u32(&self.ctx, dst, m).await?),
        };
        self.cache_len += m;
        Ok(out)
    }

    /// Runs a block, splitting causal blocks longer than [`MAX_ROWS`].
    async fn run_chunked(&mut self, batch: &Batch, want: Want) -> Result<(Vec<f32>, Vec<u32>)> {
        if batch.len() <= MAX_ROWS || batch.mask != runahead_model::Mask::Causal {
            return self.run(batch, want).await;
        }
        batch.validate(self.config.vocab_size, self.cache_len, self.capacity)?;
        let (mut logits, mut ids) = (Vec::new(), Vec::new());
        for (i, chunk) in batch.tokens.chunks(MAX_ROWS).enumerate() {
            let sub = Batch::causal(chunk, batch.positions[i * MAX_ROWS]);
            let (l, a) = self.run(&sub, want).await?;
            logits.extend(l);
            ids.extend(a);
        }
        Ok((logits, ids))
    }
}

impl LanguageModel for GpuModel {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn cache_len(&self) -> usize {
        self.cache_len
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    async fn forward(&mut self, batch: &Batch) -> Result<Logits> {
        let (data, _) = self.run_chunked(batch, Want::Logits).await?;
        Ok(Logits {
            data,
            vocab: self.config.vocab_size,
        })
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        Ok(self.run_chunked(batch, Want::Argmax).await?.1)
    }

    fn truncate(&mut self, len: usize) {
        self.cache_len = self.cache_len.min(len);
    }

    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        let len = self.cache_len;
        if base > len
            || keep.len() > MAX_ROWS
            || keep.windows(2).any(|w| w[0] >= w[1])
            || keep.last().is_some_and(|&k| base + k >= len)
        {
            return Err(ModelError::InvalidBatch(format!(
                "cannot keep {keep:?} after slot {base} of a cache of {len}"
            )));
        }
        let row = (self.config.kv_dim() * 4) as u64;
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        // Through a scratch buffer: a kept row may be read after another kept row overwrote
        // its slot if copied in place.
        for buf in self.kv.k.iter().chain(&self.kv.v) {
            for (i, &src) in keep.iter().enumerate() {
                encoder.copy_buffer_to_buffer(
                    buf,
                    (base + src) as u64 * row,
                    &self.kv.scratch,
                    i as u64 * row,
                    row,
                );
            }
            encoder.copy_buffer_to_buffer(
                &self.kv.scratch,
                0,
                buf,
                base as u64 * row,
                keep.len() as u64 * row,
            );
        }
        self.ctx.queue.submit([encoder.finish()]);
        self.cache_len = base + keep.len();
        Ok(())
    }
}
