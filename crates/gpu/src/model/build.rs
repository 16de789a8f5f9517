//! Loading: uploads weights, allocates activations and the KV cache, compiles pipelines,
//! and records the forward pass as a list of dispatches with their bind groups.

use std::cell::Cell;

use wgpu::util::DeviceExt;
use wgpu::BufferUsages as U;

use runahead_gguf::{widen_to_q8_0, widens_to_q8_0, GgmlType, GgufFile};
use runahead_model::{check_tensors, ModelConfig, ModelError, Result, RopeMode, TensorNames};

use super::memory::BufferSizes;
use super::{Dispatch, GpuModel, Grid, KvBuffers, StepBuffers, DEFAULT_CONTEXT, MAX_ROWS};
use crate::kernels::{self, params, Op, MATMUL_TILES};
use crate::{GpuContext, GpuError, GpuMatrix};

struct Builder<'a> {
    ctx: &'a GpuContext,
    dispatches: Vec<Dispatch>,
    step: wgpu::Buffer,
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

    fn f32_storage(&self, label: &str, data: &[f32]) -> wgpu::Buffer {
        self.ctx
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::cast_slice(data),
                usage: U::STORAGE,
            })
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

/// The tensor `name`, checked to be a `rows x cols` matrix.
fn matrix_info<'f>(
    file: &'f GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<&'f runahead_gguf::TensorInfo> {
    let info = file.tensor_info(name)?;
    if info.shape != [cols as u64, rows as u64] {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: vec![cols as u64, rows as u64],
            found: info.shape.clone(),
        });
    }
    Ok(info)
}

/// Matrices `parts` (name, rows), each `cols` wide, whose products a layer writes side by side
/// into one output row: each run of neighbours that share a block format stacked by rows into
/// one matrix (one dispatch), with the first output column of each. Each output value is its
/// row's product either way (the kernels reduce every row alone).
fn stacked(
    ctx: &GpuContext,
    file: &GgufFile,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<Vec<(GpuMatrix, usize)>> {
    let infos = parts
        .iter()
        .map(|(name, rows)| matrix_info(file, name, *rows, cols))
        .collect::<Result<Vec<_>>>()?;
    if widens(&infos) {
        let mut bytes = Vec::new();
        for info in &infos {
            bytes.extend(widen_to_q8_0(info.ty, file.tensor_bytes(info))?);
        }
        let rows = parts.iter().map(|(_, r)| r).sum();
        let w = GpuMatrix::upload(ctx, &parts[0].0, GgmlType::Q8_0, &bytes, rows, cols)?;
        return Ok(vec![(w, 0)]);
    }
    let mut out = Vec::new();
    let (mut first, mut col0) = (0, 0);
    while first < parts.len() {
        let ty = infos[first].ty;
        let end = (first..parts.len())
            .find(|&i| infos[i].ty != ty)
            .unwrap_or(parts.len());
        let rows: usize = parts[first..end].iter().map(|(_, r)| r).sum();
        let w = match end - first {
            1 => matrix(ctx, file, &parts[first].0, rows, cols)?,
            _ => {
                let bytes: Vec<u8> = infos[first..end]
                    .iter()
                    .flat_map(|i| file.tensor_bytes(i).iter().copied())
                    .collect();
                GpuMatrix::upload(ctx, &parts[first].0, ty, &bytes, rows, cols)?
            }
        };
        out.push((w, col0));
        col0 += rows;
        first = end;
    }
    Ok(out)
}

/// The matrices a layer stacks into one product ([`stacked`]): q/k/v, and gate/up.
const QKV: [&str; 3] = ["attn_q.weight", "attn_k.weight", "attn_v.weight"];
const GATE_UP: [&str; 2] = ["ffn_gate.weight", "ffn_up.weight"];

/// Whether matrices stacked into one product mix block formats that all re-encode as Q8_0
/// value for value (Q4_0, Q5_0, Q8_0: `runahead_gguf::widen_to_q8_0`): then they go up as one
/// Q8_0 matrix, one dispatch instead of one per format, with the same values.
fn widens(infos: &[&runahead_gguf::TensorInfo]) -> bool {
    infos.windows(2).any(|w| w[0].ty != w[1].ty) && infos.iter().all(|i| widens_to_q8_0(i.ty))
}

/// Bytes the Q8_0 re-encoding of [`widens`] adds to the weights as stored in the file, over
/// every layer's q/k/v and gate/up (the memory plan counts weights by their file size).
fn widening_growth(file: &GgufFile, c: &ModelConfig) -> Result<u64> {
    let mut growth = 0u64;
    for l in 0..c.n_layers {
        let name = |w: &str| TensorNames::layer(l, w);
        for group in [QKV.as_slice(), GATE_UP.as_slice()] {
            let infos = group
                .iter()
                .map(|w| file.tensor_info(&name(w)))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            if widens(&infos) {
                for info in infos {
                    let elements: u64 = info.shape.iter().product();
                    let wide = GgmlType::Q8_0.bytes_for(elements).unwrap_or(u64::MAX);
                    growth = growth.saturating_add(wide.saturating_sub(info.size));
                }
            }
        }
    }
    Ok(growth)
}

fn matrix(
    ctx: &GpuContext,
    file: &GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<GpuMatrix> {
    let info = matrix_info(file, name, rows, cols)?;
    Ok(GpuMatrix::upload(
        ctx,
        name,
        info.ty,
        file.tensor_bytes(info),
        rows,
        cols,
    )?)
}

fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let info = file.tensor_info(name)?;
    if info.shape != [len as u64] {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: vec![len as u64],
            found: info.shape.clone(),
        });
    }
    if !info.ty.is_supported() {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_owned(),
            ty: info.ty,
        });
    }
    Ok(file.tensor_f32(name)?)
}

pub(super) fn load(ctx: &GpuContext, file: &GgufFile, context: Option<usize>) -> Result<GpuModel> {
    // Checks every hyper-parameter, and the tokenizer against the embedding's rows.
    let config = ModelConfig::from_file(file)?;
    let vocab = config.vocab_size;
    let c = &config;
    let capacity = context.unwrap_or(DEFAULT_CONTEXT).min(c.context_length);
    if capacity == 0 {
        return Err(ModelError::Config("context size must be at least 1".into()));
    }
    let (d, kv_dim, ff, r) = (c.n_embd, c.kv_dim(), c.n_ff, MAX_ROWS);
    if c.head_dim > 128 || c.head_dim % 4 != 0 || c.rope_dim % 2 != 0 {
        return Err(ModelError::Config(format!(
            "head dimension {} (RoPE dimension {}): the GPU engine takes multiples of 4 up to 128",
            c.head_dim, c.rope_dim
        )));
    }
    // Everything is decided before the first buffer: every tensor's presence, shape and type,
    // then every buffer's size against the device's limits and the memory budget.
    let mut tensors = check_tensors(file, c)?;
    tensors.file_bytes = tensors.file_bytes.saturating_add(widening_growth(file, c)?);
    let size = BufferSizes::of(c, capacity)?;
    let memory = size.check(ctx, c, tensors)?;

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
    };

    // Activations, [MAX_ROWS, width] each.
    let x = b.storage("x", size.width)?;
    let h = b.storage("h", size.width)?;
    let q = b.storage("q", size.width)?;
    let qkv = b.storage("qkv", size.qkv)?;
    let attn = b.storage("attn", size.width)?;
    let gate_up = b.storage("gate_up", size.gate_up)?;
    let act = b.storage("ffn_act", size.ffn)?;
    let scores = b.storage("scores", size.scores)?;
    let partials = b.storage("attention_partials", size.partials)?;
    let read = U::MAP_READ | U::COPY_DST;
    let io = StepBuffers {
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
    };
    let kv = KvBuffers {
        k: (0..c.n_layers)
            .map(|l| b.storage(&format!("k_cache.{l}"), size.kv_cache_layer))
            .collect::<Result<_>>()?,
        v: (0..c.n_layers)
            .map(|l| b.storage(&format!("v_cache.{l}"), size.kv_cache_layer))
            .collect::<Result<_>>()?,
        scratch: b.storage("kv_scratch", size.kv_rows)?,
    };

    // Embedding lookup, one dispatch per piece of the table.
    let token_embd = matrix(ctx, file, TensorNames::TOKEN_EMBD, vocab, d)?;
    for piece in &token_embd.pieces {
        let p = [
            d as u32,
            piece.row_start as u32,
            (piece.row_start + piece.rows) as u32,
            token_embd.row_bytes as u32,
        ];
        b.push(
            Op::Embed,
            Some(token_embd.ty),
            &[&piece.buffer, &io.tokens, &x],
            &p,
            Grid::Elements { per_token: d / 32 },
        );
    }

    let theta_scale = c.rope_base.powf(-2.0 / c.rope_dim as f32).to_bits();
    let neox = (c.rope_mode == RopeMode::Neox) as u32;
    let qkv_width = d + 2 * kv_dim;
    // Seven dispatches a layer where the kernel shape fuses inputs: q/k/v product (reading the
    // norm), biases + RoPE + cache store, attention (per chunk, then the chunks merged), output
    // product (+ residual), gate/up product (reading the norm), down product (reading SiLU, +
    // residual); ten otherwise (both norms and the SiLU step on their own). A product whose
    // matrices differ in block format takes one dispatch per run of equal ones.
    for l in 0..c.n_layers {
        let name = |w: &str| TensorNames::layer(l, w);
        let attn_norm = b.f32_storage("attn_norm", &vector(file, &name("attn_norm.weight"), d)?);
        let normed = b.normed(&x, &attn_norm, &h, d, c.rms_eps);
        let qkv_parts = [
            (name(QKV[0]), d),
            (name(QKV[1]), kv_dim),
            (name(QKV[2]), kv_dim),
        ];
        for (w, col0) in stacked(ctx, file, &qkv_parts, d)? {
            b.product(normed, &w, &qkv, qkv_width, col0, false);
        }
        let bias = match c.qkv_bias {
            true => {
                let mut all = vector(file, &name("attn_q.bias"), d)?;
                all.extend(vector(file, &name("attn_k.bias"), kv_dim)?);
                all.extend(vector(file, &name("attn_v.bias"), kv_dim)?);
                b.f32_storage("attn_qkv.bias", &all)
            }
            false => b.f32_storage("no_bias", &[0.0]),
        };
        let p = [
            c.n_heads as u32,
            c.n_kv_heads as u32,
            c.head_dim as u32,
            c.rope_dim as u32,
            neox,
            theta_scale,
            c.qkv_bias as u32,
        ];
        b.push(
            Op::QkvRopeStore,
            None,
            &[&qkv, &bias, &io.positions, &q, &kv.k[l], &kv.v[l]],
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
            (1.0 / (c.head_dim as f32).sqrt()).to_bits(),
            chunk as u32,
            kernels::attention_chunks(capacity) as u32,
        ];
        b.push(
            Op::Attention,
            None,
            &[&q, &kv.k[l], &kv.v[l], &scores, &partials, &io.visible],
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
            &[&partials, &attn, &io.visible],
            &p,
            Grid::Elements {
                per_token: c.n_heads * c.head_dim / 4,
            },
        );
        let wo = matrix(ctx, file, &name("attn_output.weight"), d, d)?;
        b.matmul(&wo, &attn, &x, d, true);

        let ffn_norm = b.f32_storage("ffn_norm", &vector(file, &name("ffn_norm.weight"), d)?);
        let normed = b.normed(&x, &ffn_norm, &h, d, c.rms_eps);
        let gate_up_parts = [(name(GATE_UP[0]), ff), (name(GATE_UP[1]), ff)];
        for (w, col0) in stacked(ctx, file, &gate_up_parts, d)? {
            b.product(normed, &w, &gate_up, 2 * ff, col0, false);
        }
        let input = b.silu_mul(&gate_up, &act, ff);
        let w_down = matrix(ctx, file, &name("ffn_down.weight"), d, ff)?;
        b.product(input, &w_down, &x, d, 0, true);
    }

    let output_norm = b.f32_storage("output_norm", &vector(file, TensorNames::OUTPUT_NORM, d)?);
    let normed = b.normed(&x, &output_norm, &h, d, c.rms_eps);
    let output = match file.header.tensor(TensorNames::OUTPUT) {
        Some(_) => matrix(ctx, file, TensorNames::OUTPUT, vocab, d)?,
        None => token_embd,
    };
    b.product(normed, &output, &io.logits, vocab, 0, false);
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
    ctx.check()?;

    Ok(GpuModel {
        ctx: ctx.clone(),
        config,
        capacity,
        cache_len: 0,
        dispatches: b.dispatches,
        argmax_dispatch,
        top_k_dispatch,
        io,
        upload: super::upload::Upload::new(&ctx.device),
        host: Default::default(),
        kv,
        memory,
        stats: Cell::new(Default::default()),
    })
}
