//! Loading: uploads weights, allocates activations and the KV cache, compiles pipelines,
//! and records the forward pass as a list of dispatches with their bind groups.

use std::cell::Cell;

use wgpu::util::DeviceExt;
use wgpu::BufferUsages as U;

use runahead_gguf::{Gguf, TensorData};
use runahead_model::{
    Activation, ModelConfig, ModelError, Plan, Result, RingLimits, RopeFactors, RopeMode, Step,
    Tensor,
};

use super::fill::Uploads;
use super::memory::BufferSizes;
use super::weights::{gate_up_parts, matrix, qkv_parts, stacked, vector, widening_growth};
use super::{Dispatch, GpuModel, Grid, KvBuffers, StepBuffers, DEFAULT_CONTEXT, MAX_ROWS};
use crate::kernels::{self, params, Op, MATMUL_TILES};
use crate::{GpuContext, GpuError, GpuMatrix};

struct Builder<'a> {
    ctx: &'a GpuContext,
    dispatches: Vec<Dispatch>,
    step: wgpu::Buffer,
    up: Uploads<'a>,
}

impl Builder<'_> {
    fn buffer(&self, label: &str, bytes: u64, usage: U) -> Result<wgpu::Buffer> {
        let size = bytes.max(4);
        if usage.contains(U::STORAGE) && size > self.ctx.max_binding_size {
            return Err(GpuError::LimitTooSmall {
                limit: "maxStorageBufferBindingSize",
                needed: size,
                available: self.ctx.max_binding_size,
            }
            .into());
        }
        Ok(self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        }))
    }

    fn storage(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        self.buffer(label, bytes, U::STORAGE | U::COPY_SRC | U::COPY_DST)
    }

    fn uniform(&self, words: &[u32]) -> wgpu::Buffer {
        self.ctx
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::cast_slice(&params(words)),
                usage: U::UNIFORM,
            })
    }

    /// A buffer of `words` f32s that `make` computes from the tensors `needs` names.
    fn f32_buffer(
        &mut self,
        label: &str,
        words: usize,
        needs: Vec<String>,
        make: impl FnOnce(&dyn TensorData) -> Result<Vec<f32>> + 'static,
    ) -> Result<wgpu::Buffer> {
        let buffer = self.buffer(label, 4 * words as u64, U::STORAGE | U::COPY_DST)?;
        let make = move |data: &dyn TensorData| -> Result<Vec<u8>> {
            Ok(bytemuck::cast_slice(&make(data)?).to_vec())
        };
        self.up.make(&buffer, needs, Box::new(make))?;
        Ok(buffer)
    }

    /// The f32 vector `name` of `len` values in a buffer of its own.
    fn vector(&mut self, label: &str, name: String, len: usize) -> Result<wgpu::Buffer> {
        let needs = vec![name.clone()];
        self.f32_buffer(label, len, needs, move |data| vector(data, &name, len))
    }

    /// A dispatch of `op` whose bindings are `buffers` in binding order, then the op's
    /// uniform parameters, then the step uniform.
    fn make(
        &mut self,
        op: Op,
        format: Option<runahead_gguf::GgmlType>,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        grid: Grid,
    ) -> Dispatch {
        // The matmul has one pipeline per token tile (and its matrix's split); other ops one
        // (the attention's is specialized to the head dimension).
        let variants: Vec<usize> = match op.is_matmul() {
            true => (0..MATMUL_TILES.len())
                .map(|tile| kernels::matmul_pipeline_variant(tile, params))
                .collect(),
            false => vec![kernels::variant(op, params, 1)],
        };
        let uniform = self.uniform(params);
        let (before, after) = buffers.split_at(buffers.len() - op.bindings_after_step());
        let mut all: Vec<&wgpu::Buffer> = before.to_vec();
        all.push(&uniform);
        all.push(&self.step);
        all.extend(after);
        let entries: Vec<wgpu::BindGroupEntry> = all
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let variants = variants
            .into_iter()
            .map(|v| {
                let pipeline = self.ctx.pipeline(op, format, v);
                let bind_group = self
                    .ctx
                    .device
                    .create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(&format!("{op:?}")),
                        layout: &pipeline.get_bind_group_layout(0),
                        entries: &entries,
                    });
                (pipeline, bind_group)
            })
            .collect();
        Dispatch {
            label: format!(
                "{op:?}{} {grid:?}",
                format.map(|f| format!(" {f}")).unwrap_or_default()
            ),
            variants,
            grid,
        }
    }

    fn push(
        &mut self,
        op: Op,
        format: Option<runahead_gguf::GgmlType>,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        grid: Grid,
    ) {
        let d = self.make(op, format, buffers, params, grid);
        self.dispatches.push(d);
    }

    /// y = rms_norm(x) * w, one workgroup per token.
    fn rms_norm(
        &mut self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        n: usize,
        eps: f32,
    ) {
        self.push(
            Op::RmsNorm,
            None,
            &[x, w, y],
            &[n as u32, eps.to_bits()],
            Grid::PerToken,
        );
    }

    /// y (+)= W x, one dispatch per piece of W.
    fn matmul(
        &mut self,
        w: &GpuMatrix,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        y_stride: usize,
        accumulate: bool,
    ) {
        self.product(Input::Plain(x), w, y, y_stride, 0, accumulate);
    }

    /// y[:, col0..col0 + rows] (+)= W input, one dispatch per piece of W.
    fn product(
        &mut self,
        input: Input,
        w: &GpuMatrix,
        y: &wgpu::Buffer,
        y_stride: usize,
        col0: usize,
        accumulate: bool,
    ) {
        let (op, x, norm, eps) = match input {
            Input::Plain(x) => (Op::Matmul, x, None, 0.0),
            Input::RmsNorm { x, weights, eps } => (Op::MatmulRmsNorm, x, Some(weights), eps),
            Input::SiluMul(gate_up) => (Op::MatmulSiluMul, gate_up, None, 0.0),
        };
        for piece in &w.pieces {
            let p = [
                w.cols as u32,
                piece.rows as u32,
                w.row_bytes as u32,
                (col0 + piece.row_start) as u32,
                y_stride as u32,
                accumulate as u32,
                f32::to_bits(eps),
            ];
            let mut buffers = vec![&piece.buffer, x, y];
            buffers.extend(norm);
            self.push(
                op,
                Some(w.ty),
                &buffers,
                &p,
                Grid::Matmul {
                    n: piece.rows,
                    k: w.cols,
                    shape: self.ctx.shape.matmul,
                },
            );
            if let Some(d) = self.dispatches.last_mut() {
                d.label = format!("{op:?} {} {}x{}", w.ty, piece.rows, w.cols);
            }
        }
    }

    /// The input of a product that reads `x` RMS-normalized with `weights`: read through the
    /// norm where the kernel shape fuses inputs, else normalized into `scratch` first (one
    /// dispatch, whatever number of products read it).
    fn normed<'b>(
        &mut self,
        x: &'b wgpu::Buffer,
        weights: &'b wgpu::Buffer,
        scratch: &'b wgpu::Buffer,
        n: usize,
        eps: f32,
    ) -> Input<'b> {
        match self.ctx.shape.fused_inputs {
            true => Input::RmsNorm { x, weights, eps },
            false => {
                self.rms_norm(x, weights, scratch, n, eps);
                Input::Plain(scratch)
            }
        }
    }

    /// The input of a down product: silu(gate) * up read from `gate_up` where the kernel
    /// shape fuses inputs, else computed into `scratch` first.
    fn silu_mul<'b>(
        &mut self,
        gate_up: &'b wgpu::Buffer,
        scratch: &'b wgpu::Buffer,
        ff: usize,
    ) -> Input<'b> {
        match self.ctx.shape.fused_inputs {
            true => Input::SiluMul(gate_up),
            false => {
                self.push(
                    Op::SiluMul,
                    None,
                    &[gate_up, scratch],
                    &[ff as u32],
                    Grid::Elements { per_token: ff },
                );
                Input::Plain(scratch)
            }
        }
    }
}

/// What a product reads.
#[derive(Clone, Copy)]
enum Input<'b> {
    /// `x` as stored.
    Plain(&'b wgpu::Buffer),
    /// `x` RMS-normalized with `weights` as it is read.
    RmsNorm {
        x: &'b wgpu::Buffer,
        weights: &'b wgpu::Buffer,
        eps: f32,
    },
    /// silu(gate) * up from a gate/up product's rows.
    SiluMul(&'b wgpu::Buffer),
}

/// The steps of a [`Plan`] this engine executes: all of them.
pub const STEPS: &[Step] = Step::ALL;

/// Builds the model described by `header`, its weights written through `up` (at once, or
/// recorded for a stream), which is handed back with the model.
pub(super) fn load<'a>(
    ctx: &'a GpuContext,
    header: &Gguf,
    up: Uploads<'a>,
    context: Option<usize>,
) -> Result<(GpuModel, Uploads<'a>)> {
    // Checks every hyper-parameter; a step this engine does not run is refused by name.
    let plan = Plan::from_header(header)?;
    plan.require("the GPU engine", STEPS)?;
    let config = plan.config.clone();
    let c = &config;
    let capacity = checked_capacity(c, context)?;
    // Everything is decided before the first buffer: every tensor's presence, shape and type
    // (and no tensor the plan does not read), then every buffer's size against the device's
    // limits and the memory budget.
    let mut tensors = plan.check_header(header)?;
    let factors = rope_factors(&plan, capacity);
    tensors.file_bytes = tensors
        .file_bytes
        .saturating_add(widening_growth(header, &plan)?)
        .saturating_add(aux_growth(&plan, factors.as_ref()));
    // A sliding-window layer whose ring is smaller than the cache keeps only the ring.
    let rings = plan.rings(capacity);
    let kv_rows = plan.kv_rows(capacity);
    let size = BufferSizes::of(c, capacity, &kv_rows)?;
    let memory = size.check(ctx, tensors)?;

    let step = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("step"),
        size: 16,
        usage: U::UNIFORM | U::COPY_DST,
        mapped_at_creation: false,
    });
    let mut b = Builder {
        ctx,
        dispatches: Vec::new(),
        step,
        up,
    };
    let act = Activations::new(&b, &size)?;
    let io = step_buffers(&b, &size)?;
    let layer_bytes = (kv_rows.iter())
        .map(|&rows| BufferSizes::kv_layer(c, rows))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let kv = KvBuffers {
        k: (layer_bytes.iter().enumerate())
            .map(|(l, &bytes)| b.storage(&format!("k_cache.{l}"), bytes))
            .collect::<Result<_>>()?,
        v: (layer_bytes.iter().enumerate())
            .map(|(l, &bytes)| b.storage(&format!("v_cache.{l}"), bytes))
            .collect::<Result<_>>()?,
        scratch: b.storage("kv_scratch", size.kv_rows)?,
        slots: kv_rows,
    };

    let token_embd = embed(&mut b, &plan, &io, &act)?;
    // Seven dispatches a layer where the kernel shape fuses inputs: q/k/v product (reading the
    // norm), biases + Q/K norms + RoPE + cache store, attention (per chunk, then the chunks
    // merged), output product (+ residual), gate/up product (reading the norm), down product
    // (reading SiLU, + residual); ten otherwise (both norms and the SiLU step on their own).
    // A GELU FFN takes its elementwise step on its own, post-norms one dispatch each. A product
    // whose matrices differ in block format takes one dispatch per run of equal ones.
    for (l, ring) in rings.iter().enumerate() {
        let buffers = (&act, &io, &kv);
        let slots = (capacity, ring.unwrap_or(0));
        layer(&mut b, &plan, l, (slots, factors.as_ref()), buffers)?;
    }
    let (argmax_dispatch, top_k_dispatch) = logits(&mut b, &plan, token_embd, &act, &io)?;
    ctx.check()?;

    let model = GpuModel {
        ctx: ctx.clone(),
        config,
        capacity,
        cache_len: 0,
        rings: RingLimits::new(&plan, capacity),
        dispatches: b.dispatches,
        argmax_dispatch,
        top_k_dispatch,
        io,
        upload: super::upload::Upload::new(&ctx.device),
        host: Default::default(),
        kv,
        memory,
        stats: Cell::new(Default::default()),
    };
    Ok((model, b.up))
}

/// The KV cache's size in entries (`context`, default [`DEFAULT_CONTEXT`], at most the model's
/// trained context), once the model's heads are checked to be ones the kernels take.
fn checked_capacity(c: &ModelConfig, context: Option<usize>) -> Result<usize> {
    let capacity = context.unwrap_or(DEFAULT_CONTEXT).min(c.context_length);
    if capacity == 0 {
        return Err(ModelError::Config("context size must be at least 1".into()));
    }
    if c.head_dim > 256 || !c.head_dim.is_multiple_of(4) || !c.rope_dim.is_multiple_of(2) {
        return Err(ModelError::Config(format!(
            "head dimension {} (RoPE dimension {}): the GPU engine takes multiples of 4 up to 256",
            c.head_dim, c.rope_dim
        )));
    }
    Ok(capacity)
}

/// The activations a forward passes from dispatch to dispatch, `[MAX_ROWS, width]` each.
struct Activations {
    x: wgpu::Buffer,
    h: wgpu::Buffer,
    q: wgpu::Buffer,
    qkv: wgpu::Buffer,
    attn: wgpu::Buffer,
    gate_up: wgpu::Buffer,
    ffn_act: wgpu::Buffer,
    scores: wgpu::Buffer,
    partials: wgpu::Buffer,
}

impl Activations {
    fn new(b: &Builder, size: &BufferSizes) -> Result<Self> {
        Ok(Activations {
            x: b.storage("x", size.width)?,
            h: b.storage("h", size.width)?,
            q: b.storage("q", size.q_width)?,
            qkv: b.storage("qkv", size.qkv)?,
            attn: b.storage("attn", size.q_width)?,
            gate_up: b.storage("gate_up", size.gate_up)?,
            ffn_act: b.storage("ffn_act", size.ffn)?,
            scores: b.storage("scores", size.scores)?,
            partials: b.storage("attention_partials", size.partials)?,
        })
    }
}

/// What each forward writes in (its tokens, positions and visibility) and reads back.
fn step_buffers(b: &Builder, size: &BufferSizes) -> Result<StepBuffers> {
    let read = U::MAP_READ | U::COPY_DST;
    Ok(StepBuffers {
        step: b.step.clone(),
        tokens: b.storage("tokens", size.per_row)?,
        positions: b.storage("positions", size.per_row)?,
        visible: b.storage("visible", size.visible)?,
        logits: b.storage("logits", size.logits)?,
        argmax: b.storage("argmax", size.per_row)?,
        top_k: b.storage("top_k", size.top_k)?,
        logits_read: b.buffer("logits_read", size.logits, read)?,
        argmax_read: b.buffer("argmax_read", size.per_row, read)?,
        top_k_read: b.buffer("top_k_read", size.top_k, read)?,
    })
}

/// The embedding lookup into `x`, one dispatch per piece of the table; the table (the output
/// matrix too where the model ties them).
fn embed(b: &mut Builder, plan: &Plan, io: &StepBuffers, act: &Activations) -> Result<GpuMatrix> {
    let c = &plan.config;
    let d = c.n_embd;
    let name = Tensor::TokenEmbd.name(None);
    let token_embd = matrix(b.ctx, &mut b.up, &name, c.vocab_size, d)?;
    for piece in &token_embd.pieces {
        let p = [
            d as u32,
            piece.row_start as u32,
            (piece.row_start + piece.rows) as u32,
            token_embd.row_bytes as u32,
            plan.embd_scale.is_some() as u32,
            plan.embd_scale.unwrap_or(1.0).to_bits(),
        ];
        b.push(
            Op::Embed,
            Some(token_embd.ty),
            &[&piece.buffer, &io.tokens, &act.x],
            &p,
            Grid::Elements { per_token: d / 32 },
        );
    }
    Ok(token_embd)
}

/// The RoPE frequency factors the plan reads (`[rope_dim / 2]`), by tensor name: Llama 3's
/// `rope_freqs`, or LongRoPE's long factors where the context exceeds the original one and the
/// short ones otherwise (as [`Plan::ropes`] picks them for the reference).
fn rope_factors(plan: &Plan, capacity: usize) -> Option<(String, usize)> {
    let pairs = plan.config.rope_dim / 2;
    let tensor = match plan.rope_factors {
        RopeFactors::None => return None,
        RopeFactors::Freqs => Tensor::RopeFreqs,
        RopeFactors::LongShort { original_context } if capacity > original_context => {
            Tensor::RopeFactorsLong
        }
        RopeFactors::LongShort { .. } => Tensor::RopeFactorsShort,
    };
    Some((tensor.name(None), pairs))
}

/// What `qkv_rope_store.wgsl` reads besides the product, in one buffer: the q/k/v biases (zeros
/// where a later part needs the offset), the Q and K norms, the RoPE factors (`[pairs]`, by
/// tensor name).
#[derive(Clone)]
struct RopeAux {
    q: usize,
    kv: usize,
    head_dim: usize,
    biases: Option<[String; 3]>,
    norms: Option<[String; 2]>,
    factors: Option<(String, usize)>,
}

impl RopeAux {
    fn of(plan: &Plan, l: usize, factors: Option<&(String, usize)>) -> Self {
        let c = &plan.config;
        RopeAux {
            q: c.q_dim(),
            kv: c.kv_dim(),
            head_dim: c.head_dim,
            biases: c.qkv_bias.then(|| {
                [Tensor::AttnQBias, Tensor::AttnKBias, Tensor::AttnVBias].map(|t| t.at(l))
            }),
            norms: plan
                .qk_norm
                .then(|| [Tensor::AttnQNorm, Tensor::AttnKNorm].map(|t| t.at(l))),
            factors: factors.cloned(),
        }
    }

    fn needs(&self) -> Vec<String> {
        let mut names: Vec<String> = self.biases.iter().flatten().cloned().collect();
        names.extend(self.norms.iter().flatten().cloned());
        names.extend(self.factors.iter().map(|(name, _)| name.clone()));
        names
    }

    /// The buffer's values, each vector read by `get(name, len)`.
    fn values(&self, get: &mut dyn FnMut(&str, usize) -> Result<Vec<f32>>) -> Result<Vec<f32>> {
        let (q, kv, hd) = (self.q, self.kv, self.head_dim);
        let mut aux = Vec::new();
        if let Some([bq, bk, bv]) = &self.biases {
            aux.extend(get(bq, q)?);
            aux.extend(get(bk, kv)?);
            aux.extend(get(bv, kv)?);
        }
        if self.norms.is_some() || self.factors.is_some() {
            aux.resize(q + 2 * kv, 0.0);
        }
        if let Some([nq, nk]) = &self.norms {
            aux.extend(get(nq, hd)?);
            aux.extend(get(nk, hd)?);
        }
        if let Some((name, pairs)) = &self.factors {
            aux.resize(q + 2 * kv + 2 * hd, 0.0);
            aux.extend(get(name, *pairs)?);
        }
        if aux.is_empty() {
            aux.push(0.0);
        }
        Ok(aux)
    }

    /// The buffer's length in f32s (the layout does not depend on the values).
    fn words(&self) -> Result<usize> {
        Ok(self.values(&mut |_, len| Ok(vec![0.0; len]))?.len())
    }
}

/// Bytes the layers' [`RopeAux`] buffers hold beyond the file's vectors (the memory plan counts
/// those once, as f32): the zeros before the norms or factors, and each layer's copy of the
/// RoPE factors.
fn aux_growth(plan: &Plan, factors: Option<&(String, usize)>) -> u64 {
    let c = &plan.config;
    let mut words = 0usize;
    if !c.qkv_bias && (plan.qk_norm || factors.is_some()) {
        words += c.q_dim() + 2 * c.kv_dim();
    }
    if let Some((_, pairs)) = factors {
        words += if plan.qk_norm { 0 } else { 2 * c.head_dim };
        words += pairs;
    }
    (words as u64).saturating_mul(4 * c.n_layers as u64)
}

/// `x += rms_norm(o) * w`: a post-norm added to the residual stream.
fn post_norm(
    b: &mut Builder,
    o: &wgpu::Buffer,
    w: &wgpu::Buffer,
    x: &wgpu::Buffer,
    c: &ModelConfig,
) {
    b.push(
        Op::RmsNorm,
        None,
        &[o, w, x],
        &[c.n_embd as u32, c.rms_eps.to_bits(), 1],
        Grid::PerToken,
    );
}

/// Layer `l`'s dispatches: attention (q/k/v product, biases + Q/K norms + RoPE + cache store,
/// attention by chunk and the chunks combined, output product, its post-norm), then the
/// feed-forward block. `factors`: the RoPE frequency factors ([`rope_factors`]).
fn layer(
    b: &mut Builder,
    plan: &Plan,
    l: usize,
    ((capacity, ring), factors): ((usize, usize), Option<&(String, usize)>),
    (act, io, kv): (&Activations, &StepBuffers, &KvBuffers),
) -> Result<()> {
    let ctx = b.ctx;
    let c = &plan.config;
    let a = plan.layers[l].attention;
    let (d, q_dim, kv_dim, ff, r) = (c.n_embd, c.q_dim(), c.kv_dim(), c.n_ff, MAX_ROWS);
    let qkv_width = q_dim + 2 * kv_dim;
    let name = |t: Tensor| t.at(l);
    let attn_norm = b.vector("attn_norm", name(Tensor::AttnNorm), d)?;
    let normed = b.normed(&act.x, &attn_norm, &act.h, d, c.rms_eps);
    for (w, col0) in stacked(ctx, &mut b.up, &qkv_parts(plan, l), d)? {
        b.product(normed, &w, &act.qkv, qkv_width, col0, false);
    }
    let aux_layout = RopeAux::of(plan, l, factors);
    let words = aux_layout.words()?;
    let aux = b.f32_buffer("attn_qkv.aux", words, aux_layout.needs(), move |data| {
        aux_layout.values(&mut |name, len| vector(data, name, len))
    })?;
    let theta_scale = a.rope_base.powf(-2.0 / c.rope_dim as f32).to_bits();
    let neox = (c.rope_mode == RopeMode::Neox) as u32;
    let scaled = a.rope_freq_scale != 1.0 || plan.rope_attn_factor != 1.0 || factors.is_some();
    let p = [
        c.n_heads as u32,
        c.n_kv_heads as u32,
        c.head_dim as u32,
        c.rope_dim as u32,
        neox,
        theta_scale,
        c.qkv_bias as u32,
        plan.qk_norm as u32,
        c.rms_eps.to_bits(),
        scaled as u32,
        a.rope_freq_scale.to_bits(),
        plan.rope_attn_factor.to_bits(),
        factors.is_some() as u32,
        ring as u32,
    ];
    b.push(
        Op::QkvRopeStore,
        None,
        &[&act.qkv, &aux, &io.positions, &act.q, &kv.k[l], &kv.v[l]],
        &p,
        Grid::Elements {
            per_token: qkv_width / 2,
        },
    );
    let chunk = kernels::attention_chunk(capacity);
    let p = [
        c.n_heads as u32,
        c.n_kv_heads as u32,
        c.head_dim as u32,
        capacity as u32,
        r as u32,
        a.scale.to_bits(),
        chunk as u32,
        kernels::attention_chunks(capacity) as u32,
        a.window.map_or(0, |w| w.min(u32::MAX as usize) as u32),
        ring as u32,
    ];
    let attention_buffers = [
        &act.q,
        &kv.k[l],
        &kv.v[l],
        &act.scores,
        &act.partials,
        &io.visible,
        &io.positions,
    ];
    b.push(
        Op::Attention,
        None,
        &attention_buffers,
        &p,
        Grid::Attention {
            heads: c.n_heads,
            chunk,
            shape: ctx.shape.attention,
        },
    );
    b.push(
        Op::AttentionCombine,
        None,
        &[&act.partials, &act.attn, &io.visible],
        &p,
        Grid::Elements {
            per_token: c.n_heads * c.head_dim / 4,
        },
    );
    let wo = matrix(ctx, &mut b.up, &name(Tensor::AttnOutput), d, q_dim)?;
    let post_norms = match plan.post_norms {
        true => Some((
            b.vector("post_attention_norm", name(Tensor::PostAttnNorm), d)?,
            b.vector("post_ffw_norm", name(Tensor::PostFfnNorm), d)?,
        )),
        false => None,
    };
    match &post_norms {
        // The product into `h` (free once the q/k/v product has read it), then normed into x.
        Some((post_attn, _)) => {
            b.matmul(&wo, &act.attn, &act.h, d, false);
            post_norm(b, &act.h, post_attn, &act.x, c);
        }
        None => b.matmul(&wo, &act.attn, &act.x, d, true),
    }

    let ffn_norm = b.vector("ffn_norm", name(Tensor::FfnNorm), d)?;
    let normed = b.normed(&act.x, &ffn_norm, &act.h, d, c.rms_eps);
    for (w, col0) in stacked(ctx, &mut b.up, &gate_up_parts(plan, l), d)? {
        b.product(normed, &w, &act.gate_up, 2 * ff, col0, false);
    }
    let input = match plan.activation {
        Activation::Silu => b.silu_mul(&act.gate_up, &act.ffn_act, ff),
        Activation::GeluTanh => {
            b.push(
                Op::GeluMul,
                None,
                &[&act.gate_up, &act.ffn_act],
                &[ff as u32],
                Grid::Elements { per_token: ff },
            );
            Input::Plain(&act.ffn_act)
        }
    };
    let w_down = matrix(ctx, &mut b.up, &name(Tensor::FfnDown), d, ff)?;
    match &post_norms {
        Some((_, post_ffn)) => {
            b.product(input, &w_down, &act.h, d, 0, false);
            post_norm(b, &act.h, post_ffn, &act.x, c);
        }
        None => b.product(input, &w_down, &act.x, d, 0, true),
    }
    Ok(())
}

/// The output norm and product into the logits (through `token_embd` where the model has no
/// output matrix of its own), and the argmax and top-k dispatches that read them.
fn logits(
    b: &mut Builder,
    plan: &Plan,
    token_embd: GpuMatrix,
    act: &Activations,
    io: &StepBuffers,
) -> Result<(Dispatch, Dispatch)> {
    let c = &plan.config;
    let (d, vocab) = (c.n_embd, c.vocab_size);
    let output_norm = b.vector("output_norm", Tensor::OutputNorm.name(None), d)?;
    let normed = b.normed(&act.x, &output_norm, &act.h, d, c.rms_eps);
    let output = match plan.separate_output {
        true => matrix(b.ctx, &mut b.up, &Tensor::Output.name(None), vocab, d)?,
        false => token_embd,
    };
    b.product(normed, &output, &io.logits, vocab, 0, false);
    if let Some(cap) = plan.logit_softcap {
        b.push(
            Op::Softcap,
            None,
            &[&io.logits],
            &[vocab as u32, cap.to_bits()],
            Grid::PerToken,
        );
    }
    let argmax_dispatch = b.make(
        Op::Argmax,
        None,
        &[&io.logits, &io.argmax],
        &[vocab as u32],
        Grid::PerToken,
    );
    let top_k_dispatch = b.make(
        Op::TopK,
        None,
        &[&io.logits, &io.top_k],
        &[vocab as u32],
        Grid::PerToken,
    );
    Ok((argmax_dispatch, top_k_dispatch))
}
