//! The forward pass on the GPU: buffers, bind groups and the list of dispatches are built once
//! at load; a forward writes the block's tokens and positions, encodes the list into one
//! command encoder, submits once, and reads back logits or per-row argmax.

mod build;
mod fill;
mod host_cost;
mod memory;
#[cfg(not(target_arch = "wasm32"))]
mod profile;
mod upload;
mod weights;

#[cfg(not(target_arch = "wasm32"))]
pub use profile::DispatchTime;

pub use build::STEPS;
pub use fill::WeightStream;
pub use host_cost::{CountCalls, HostCost, HOST_WARMUP, MAX_HOST_REPS};
pub use memory::MemoryPlan;

use std::cell::Cell;

use runahead_gguf::{Gguf, GgufFile};
use runahead_model::{
    Batch, LanguageModel, Logits, ModelConfig, ModelError, Result, RingLimits, TopLogits,
};

use crate::clock::Clock;
use crate::GpuContext;
use crate::{kernels, readback};

/// Most tokens one forward pass processes; longer causal blocks are split (batch invariance
/// makes that exact).
pub const MAX_ROWS: usize = 64;

/// Most logits per row the device selects ([`LanguageModel::forward_top_k`]); a larger `k`
/// reads the whole rows back and selects on the CPU.
pub const MAX_TOP_K: usize = 64;

/// Words per row of the top-k output: the log-normalizer, 64 ids, 64 logits.
const TOP_K_ROW_WORDS: usize = 1 + 2 * MAX_TOP_K;

/// Default KV cache size when the caller gives none (the model's context can be 32k tokens,
/// which would take gigabytes of cache).
pub const DEFAULT_CONTEXT: usize = 4096;

/// How many workgroups a dispatch needs for a block of `m` tokens.
#[derive(Clone, Copy, Debug)]
enum Grid {
    /// Matmul over `n` weight rows of `k` weights, a tile of tokens per workgroup
    /// ([`kernels::MatmulShape::grid`]).
    Matmul {
        n: usize,
        k: usize,
        shape: kernels::MatmulShape,
    },
    /// One workgroup per token.
    PerToken,
    /// One invocation per element, `per_token` elements per token, 64 per workgroup.
    Elements { per_token: usize },
    /// The attention's first half over `heads` query heads in chunks of `chunk` slots
    /// ([`kernels::AttentionShape::grid`]).
    Attention {
        heads: usize,
        chunk: usize,
        shape: kernels::AttentionShape,
    },
}

impl Grid {
    /// Workgroups for a block of `m` tokens, the longest-seeing of which sees `slots` slots.
    fn size(self, m: usize, slots: usize) -> (u32, u32, u32) {
        match self {
            Grid::Matmul { n, k, shape } => shape.grid(n, k, m),
            Grid::PerToken => (m as u32, 1, 1),
            Grid::Elements { per_token } => ((m * per_token).div_ceil(64) as u32, 1, 1),
            Grid::Attention {
                heads,
                chunk,
                shape,
            } => shape.grid(heads, m, slots, chunk),
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
    /// Encodes the dispatch for a block of `m` tokens, the longest-seeing of which sees `slots`
    /// slots.
    fn encode(&self, pass: &mut wgpu::ComputePass, m: usize, slots: usize) {
        let (pipeline, bind_group) =
            &self.variants[self.grid.variant(m).min(self.variants.len() - 1)];
        let (x, y, z) = self.grid.size(m, slots);
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
    top_k: wgpu::Buffer,     // [MAX_ROWS, TOP_K_ROW_WORDS] u32 (see shaders/top_k.wgsl)
    logits_read: wgpu::Buffer,
    argmax_read: wgpu::Buffer,
    top_k_read: wgpu::Buffer,
}

/// Per-layer KV cache buffers, `[slots, kv_dim]` f16 each, two to a word: `capacity` slots, or
/// a sliding-window layer's ring (see [`runahead_model::kv_ring`]); cache index `i` is in slot
/// `i % slots`.
struct KvBuffers {
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    /// `[MAX_ROWS, kv_dim]` scratch for compaction.
    scratch: wgpu::Buffer,
    /// Per layer.
    slots: Vec<usize>,
}

/// Counters for the benchmark report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuStats {
    pub forwards: u64,
    pub dispatches: u64,
    pub submits: u64,
    /// Host time spent writing the step's inputs, encoding the dispatches and submitting
    /// (`clock.rs`: natively a monotonic clock, in a page `performance.now()`).
    pub encode_submit_nanos: u64,
    /// Host time from the submit until the results were read back: the device's work, as the
    /// host waits for it.
    pub wait_nanos: u64,
    /// Inputs written through `Queue::write_buffer` (a staging buffer each) because the reused
    /// upload buffer was still in flight; zero in the steady state natively.
    pub staging_writes: u64,
    /// Calls the host made (in a page: wasm -> JS) while encoding and submitting, and while
    /// waiting, in forwards run with a call counter ([`GpuModel::host_costs`]).
    pub calls_encode_submit: u64,
    pub calls_wait: u64,
}

/// Host-side scratch reused by every forward.
#[derive(Default)]
struct HostScratch {
    positions: Vec<u32>,
    visible: Vec<u32>,
}

/// A model on the GPU.
pub struct GpuModel {
    ctx: GpuContext,
    config: ModelConfig,
    capacity: usize,
    cache_len: usize,
    /// What the sliding-window layers' rings still hold.
    rings: RingLimits,
    dispatches: Vec<Dispatch>,
    /// Appended to `dispatches` when only each row's argmax is read back.
    argmax_dispatch: Dispatch,
    /// Appended to `dispatches` when only each row's largest logits are read back.
    top_k_dispatch: Dispatch,
    io: StepBuffers,
    upload: upload::Upload,
    host: HostScratch,
    kv: KvBuffers,
    /// Device memory by kind, as planned (and checked) before the first buffer was created.
    memory: MemoryPlan,
    stats: Cell<GpuStats>,
}

#[derive(Clone, Copy)]
enum Want {
    Logits,
    Argmax,
    /// The `k` (at most [`MAX_TOP_K`]) largest logits of each row.
    TopK(usize),
}

impl GpuModel {
    /// The device memory this model took, by kind (decided before loading).
    pub fn memory(&self) -> MemoryPlan {
        self.memory
    }

    /// Uploads the model and builds its pipelines. `context` sizes the KV cache (default
    /// [`DEFAULT_CONTEXT`], capped by the model's trained context).
    pub fn load(ctx: &GpuContext, file: &GgufFile, context: Option<usize>) -> Result<Self> {
        let uploads = fill::Uploads::now(&ctx.queue, file);
        Ok(build::load(ctx, &file.header, uploads, context)?.0)
    }

    /// Like [`GpuModel::load`] from the file's header alone: every buffer is made and every
    /// pipeline built now, and the weights are written as the file's bytes are given to the
    /// returned [`WeightStream`] (in a page, straight from the downloaded chunks, so the file
    /// is never held whole).
    pub fn stream(ctx: &GpuContext, header: Gguf, context: Option<usize>) -> Result<WeightStream> {
        let uploads = fill::Uploads::later(&ctx.queue, &header);
        let (model, uploads) = build::load(ctx, &header, uploads, context)?;
        let recorded = uploads.into_recorded();
        WeightStream::new(model, header, recorded)
    }

    pub fn stats(&self) -> GpuStats {
        self.stats.get()
    }

    /// Dispatches one forward encodes (for reports).
    pub fn dispatches_per_forward(&self) -> usize {
        self.dispatches.len()
    }

    /// Records the block's step uniform (`k`: entries per row for the top-k kernel), tokens,
    /// positions and visibility lists at the head of `encoder` (see `upload.rs`). Returns the
    /// most slots a token of the block sees (the attention's grid).
    fn write_step(&mut self, encoder: &mut wgpu::CommandEncoder, batch: &Batch, k: usize) -> usize {
        let m = batch.len();
        let positions = &mut self.host.positions;
        positions.clear();
        positions.extend(batch.positions.iter().map(|&p| p as u32));
        let visible = batch.visibility();
        let lists = &mut self.host.visible;
        lists.clear();
        lists.resize(m * (1 + MAX_ROWS), 0);
        for (i, row) in lists.chunks_mut(1 + MAX_ROWS).enumerate() {
            let mut seen = 0;
            for j in (0..m).filter(|&j| visible[i * m + j]) {
                seen += 1;
                row[seen] = j as u32;
            }
            row[0] = seen as u32;
        }
        let slots = self.cache_len
            + lists
                .chunks(1 + MAX_ROWS)
                .map(|r| r[0] as usize)
                .max()
                .unwrap_or(0);
        let fell_back = self.upload.write(
            &self.ctx.queue,
            encoder,
            upload::InputBuffers {
                step: &self.io.step,
                tokens: &self.io.tokens,
                positions: &self.io.positions,
                visible: &self.io.visible,
            },
            upload::Inputs {
                step: [m as u32, self.cache_len as u32, k as u32, slots as u32],
                tokens: &batch.tokens,
                positions: &self.host.positions,
                visible: &self.host.visible,
            },
        );
        if fell_back {
            let mut s = self.stats.get();
            s.staging_writes += 4;
            self.stats.set(s);
        }
        slots
    }

    /// Runs a block and returns the bytes of what `want` reads back: `[m, vocab]` f32 logits,
    /// `[m]` u32 argmax, or `[m, TOP_K_ROW_WORDS]` u32 words of the top-k kernel.
    async fn run(&mut self, batch: &Batch, want: Want) -> Result<Vec<u8>> {
        self.run_counted(batch, want, None).await
    }

    /// [`Self::run`], reading `calls` (when given) where it reads its clock.
    async fn run_counted(
        &mut self,
        batch: &Batch,
        want: Want,
        calls: Option<host_cost::CallCounter<'_>>,
    ) -> Result<Vec<u8>> {
        batch.validate(self.config.vocab_size, self.cache_len, self.capacity)?;
        self.ctx.check()?;
        if batch.len() > MAX_ROWS {
            return Err(ModelError::InvalidBatch(format!(
                "a block holds at most {MAX_ROWS} tokens"
            )));
        }
        let m = batch.len();
        // Recorded first: a forward that fails after its submit has written its rows.
        self.rings.wrote(self.cache_len + m);
        let k = match want {
            Want::TopK(k) => k,
            _ => 0,
        };
        let calls_start = calls.map(|c| c.read());
        let host = Clock::start();
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        let slots = self.write_step(&mut encoder, batch, k);
        let q = &self.ctx.queue;

        let last = match want {
            Want::Logits => None,
            Want::Argmax => Some(&self.argmax_dispatch),
            Want::TopK(_) => Some(&self.top_k_dispatch),
        };
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for d in self.dispatches.iter().chain(last) {
                d.encode(&mut pass, m, slots);
            }
        }
        let vocab = self.config.vocab_size;
        let (src, dst, row_words) = match want {
            Want::Logits => (&self.io.logits, &self.io.logits_read, vocab),
            Want::Argmax => (&self.io.argmax, &self.io.argmax_read, 1),
            Want::TopK(_) => (&self.io.top_k, &self.io.top_k_read, TOP_K_ROW_WORDS),
        };
        // Only the rows asked for come back; a block that wants none still reads its last row,
        // the wait that says the forward is done.
        let first = batch.first_output.min(m - 1);
        let words = (m - first) * row_words;
        let offset = (first * row_words * 4) as u64;
        encoder.copy_buffer_to_buffer(src, offset, dst, 0, (words * 4) as u64);
        q.submit([encoder.finish()]);
        let encode_submit = host.nanos();
        let calls_submitted = calls.map(|c| c.read());
        let wait = Clock::start();
        let out = readback::read_bytes(&self.ctx, dst, (words * 4) as u64).await;
        let wait_nanos = wait.nanos();
        let calls_end = calls.map(|c| c.read());
        let mut s = self.stats.get();
        if let (Some(c), Some(a), Some(b), Some(e)) =
            (calls, calls_start, calls_submitted, calls_end)
        {
            s.calls_encode_submit += c.between(a, b);
            s.calls_wait += c.between(b, e);
        }
        s.forwards += 1;
        s.submits += 1;
        s.dispatches += (self.dispatches.len() + last.is_some() as usize) as u64;
        s.encode_submit_nanos += encode_submit;
        s.wait_nanos += wait_nanos;
        self.stats.set(s);
        let mut out = out?;
        self.cache_len += m;
        if batch.n_outputs() == 0 {
            out.clear();
        }
        Ok(out)
    }

    /// Runs a block, splitting causal blocks longer than [`MAX_ROWS`] (the chunks' rows are
    /// concatenated), and reads its output back as `T`s.
    async fn run_chunked<T: bytemuck::Pod>(&mut self, batch: &Batch, want: Want) -> Result<Vec<T>> {
        if batch.len() <= MAX_ROWS || batch.mask != runahead_model::Mask::Causal {
            return Ok(bytemuck::pod_collect_to_vec(&self.run(batch, want).await?));
        }
        batch.validate(self.config.vocab_size, self.cache_len, self.capacity)?;
        let mut all = Vec::new();
        for (i, chunk) in batch.tokens.chunks(MAX_ROWS).enumerate() {
            let skip = batch
                .first_output
                .saturating_sub(i * MAX_ROWS)
                .min(chunk.len());
            let sub = Batch::causal(chunk, batch.positions[i * MAX_ROWS])
                .logits_for_last(chunk.len() - skip);
            all.extend(bytemuck::pod_collect_to_vec::<u8, T>(
                &self.run(&sub, want).await?,
            ));
        }
        Ok(all)
    }
}

/// Parses the top-k kernel's rows (see shaders/top_k.wgsl), keeping `k` entries per row.
fn parse_top_k(words: &[u32], k: usize, vocab: usize) -> TopLogits {
    let rows = words.chunks(TOP_K_ROW_WORDS);
    TopLogits {
        log_norm: rows.clone().map(|r| f32::from_bits(r[0])).collect(),
        rows: rows
            .map(|r| {
                let (ids, values) = r[1..].split_at(MAX_TOP_K);
                ids.iter()
                    .zip(values)
                    .take(k)
                    .take_while(|(&id, _)| id != u32::MAX)
                    .map(|(&id, &v)| (id, f32::from_bits(v)))
                    .collect()
            })
            .collect(),
        vocab,
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
        Ok(Logits {
            data: self.run_chunked(batch, Want::Logits).await?,
            vocab: self.config.vocab_size,
        })
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        let ids: Vec<u32> = self.run_chunked(batch, Want::Argmax).await?;
        // argmax.wgsl marks a row with nothing to pick (all NaN or -inf).
        match ids.iter().position(|&id| id == u32::MAX) {
            Some(row) => Err(ModelError::NoUsableLogit { row }),
            None => Ok(ids),
        }
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        if k == 0 || k > MAX_TOP_K {
            let logits = self.forward(batch).await?;
            return Ok(TopLogits::of(&logits, k));
        }
        let words = self.run_chunked(batch, Want::TopK(k)).await?;
        Ok(parse_top_k(&words, k, self.config.vocab_size))
    }

    fn truncate_floor(&self) -> usize {
        self.rings.floor()
    }

    fn truncate(&mut self, len: usize) {
        self.cache_len = self.rings.truncate(self.cache_len, len);
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
        // f16, two to a word (shaders/kv_f16.wgsl).
        let row = (self.config.kv_dim() * 2) as u64;
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        // Through a scratch buffer: a kept row may be read after another kept row overwrote
        // its slot if copied in place. Index `i` is in slot `i % slots`: a ring's kept rows
        // go back one at a time where they wrap.
        let layers = self.kv.k.iter().zip(&self.kv.slots);
        for (buf, &slots) in layers.chain(self.kv.v.iter().zip(&self.kv.slots)) {
            let slot = |index: usize| (index % slots) as u64 * row;
            for (i, &src) in keep.iter().enumerate() {
                let (from, to) = (slot(base + src), i as u64 * row);
                encoder.copy_buffer_to_buffer(buf, from, &self.kv.scratch, to, row);
            }
            let (start, end) = (base % slots, base % slots + keep.len());
            let first = end.min(slots) - start;
            let scratch = &self.kv.scratch;
            encoder.copy_buffer_to_buffer(scratch, 0, buf, slot(base), first as u64 * row);
            if first < keep.len() {
                let rest = (keep.len() - first) as u64 * row;
                encoder.copy_buffer_to_buffer(scratch, first as u64 * row, buf, 0, rest);
            }
        }
        self.ctx.queue.submit([encoder.finish()]);
        self.cache_len = base + keep.len();
        Ok(())
    }
}
