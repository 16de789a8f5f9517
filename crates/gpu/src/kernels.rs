//! WGSL sources (one file per op under `shaders/`) and compiled pipelines. Kernels that read
//! quantized weights are specialized per block format by prepending the format's
//! decoder (`unit_head`, `quad`) from `shaders/formats/`.

use std::collections::HashMap;

use runahead_gguf::GgmlType;

/// A compute kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// y (+)= W x (`matmul.wgsl` or `matmul_split_k.wgsl`, per [`MatmulShape`], with
    /// `matmul_input.wgsl`).
    Matmul,
    /// y (+)= W rms_norm(x) * g: the norm fused into the product that follows it
    /// (`matmul_input_rms_norm.wgsl`; the norm's weights g bound after the step uniform).
    MatmulRmsNorm,
    /// y (+)= W (silu(gate) * up) from the gate/up product's rows: the FFN's elementwise step
    /// fused into the down product (`matmul_input_silu_mul.wgsl`).
    MatmulSiluMul,
    Embed,
    RmsNorm,
    /// q/k/v biases, RoPE, q out and k/v into the f16 cache (`qkv_rope_store.wgsl`).
    QkvRopeStore,
    /// Attention's first half: one partial result per chunk of each (token, head) pair's slots
    /// (`attention.wgsl` or `attention_split_kv.wgsl`, per [`AttentionShape`]).
    Attention,
    /// Attention's second half: each pair's partials merged in chunk order
    /// (`attention_combine.wgsl`, the same in every shape).
    AttentionCombine,
    SiluMul,
    /// gelu_tanh(gate) * up (`gelu_mul.wgsl`), Gemma 3's gated FFN step.
    GeluMul,
    /// `cap * tanh(logit / cap)` on the logits in place (`softcap.wgsl`).
    Softcap,
    Argmax,
    TopK,
}

impl Op {
    /// A matrix product (one pipeline per token tile, shaped by [`MatmulShape`]).
    pub fn is_matmul(self) -> bool {
        matches!(self, Op::Matmul | Op::MatmulRmsNorm | Op::MatmulSiluMul)
    }

    /// How many of the op's storage bindings come after its uniforms (the parameters, then the
    /// step): the last ones of the buffers a dispatch is given. Bindings added to an op go there,
    /// so that every product keeps the bindings the plain one has and the attention those it
    /// had before its window.
    pub fn bindings_after_step(self) -> usize {
        match self {
            // The fused norm's weights; the attention's block positions (its sliding window).
            Op::MatmulRmsNorm | Op::Attention => 1,
            _ => 0,
        }
    }
}

const COMMON: &str = include_str!("../../../shaders/formats/common.wgsl");
/// `f16_to_f32`, which both the format decoders and the f16 KV cache read with.
const F16_TO_F32: &str = include_str!("../../../shaders/f16_to_f32.wgsl");

/// The decoder source (`unit_head`, `quad`) of a block format, or `None` when the GPU engine lacks it.
pub fn format_source(ty: GgmlType) -> Option<&'static str> {
    Some(match ty {
        GgmlType::F32 => include_str!("../../../shaders/formats/f32.wgsl"),
        GgmlType::F16 => include_str!("../../../shaders/formats/f16.wgsl"),
        GgmlType::BF16 => include_str!("../../../shaders/formats/bf16.wgsl"),
        GgmlType::Q4_0 => include_str!("../../../shaders/formats/q4_0.wgsl"),
        GgmlType::Q4_1 => include_str!("../../../shaders/formats/q4_1.wgsl"),
        GgmlType::Q5_0 => include_str!("../../../shaders/formats/q5_0.wgsl"),
        GgmlType::Q5_1 => include_str!("../../../shaders/formats/q5_1.wgsl"),
        GgmlType::Q8_0 => include_str!("../../../shaders/formats/q8_0.wgsl"),
        GgmlType::Q4_K => include_str!("../../../shaders/formats/q4_k.wgsl"),
        GgmlType::Q5_K => include_str!("../../../shaders/formats/q5_k.wgsl"),
        GgmlType::Q6_K => include_str!("../../../shaders/formats/q6_k.wgsl"),
        _ => return None,
    })
}

/// The full WGSL source of `op` in `shape`, specialized to `format` for the weight-reading
/// kernels: the format's decoder, the parameters and bindings two shapes of an op share, then
/// the kernel.
pub fn source(op: Op, format: Option<GgmlType>, shape: KernelShape) -> String {
    const MATMUL_IO: &str = include_str!("../../../shaders/matmul_io.wgsl");
    const ATTENTION_IO: &str = include_str!("../../../shaders/attention_io.wgsl");
    let matmul_io = |input: &str| format!("{MATMUL_IO}\n{input}");
    let (io, body) = match op {
        Op::Matmul | Op::MatmulRmsNorm | Op::MatmulSiluMul => (
            matmul_io(match op {
                Op::MatmulRmsNorm => include_str!("../../../shaders/matmul_input_rms_norm.wgsl"),
                Op::MatmulSiluMul => include_str!("../../../shaders/matmul_input_silu_mul.wgsl"),
                _ => include_str!("../../../shaders/matmul_input.wgsl"),
            }),
            match shape.matmul {
                MatmulShape::Rows { .. } => include_str!("../../../shaders/matmul.wgsl"),
                MatmulShape::SplitK => include_str!("../../../shaders/matmul_split_k.wgsl"),
            },
        ),
        Op::Embed => (String::new(), include_str!("../../../shaders/embed.wgsl")),
        Op::RmsNorm => (
            String::new(),
            include_str!("../../../shaders/rms_norm.wgsl"),
        ),
        Op::QkvRopeStore => (
            String::new(),
            include_str!("../../../shaders/qkv_rope_store.wgsl"),
        ),
        Op::Attention => (
            ATTENTION_IO.to_owned(),
            match shape.attention {
                AttentionShape::PerHead => include_str!("../../../shaders/attention.wgsl"),
                AttentionShape::SplitKv => {
                    include_str!("../../../shaders/attention_split_kv.wgsl")
                }
            },
        ),
        Op::AttentionCombine => (
            String::new(),
            include_str!("../../../shaders/attention_combine.wgsl"),
        ),
        Op::SiluMul => (
            String::new(),
            include_str!("../../../shaders/silu_mul.wgsl"),
        ),
        Op::GeluMul => (
            String::new(),
            include_str!("../../../shaders/gelu_mul.wgsl"),
        ),
        Op::Softcap => (String::new(), include_str!("../../../shaders/softcap.wgsl")),
        Op::Argmax => (String::new(), include_str!("../../../shaders/argmax.wgsl")),
        Op::TopK => (String::new(), include_str!("../../../shaders/top_k.wgsl")),
    };
    let decoder = match format.and_then(format_source) {
        Some(f) => format!("{F16_TO_F32}\n{COMMON}\n{f}\n"),
        // The KV cache's f16 words.
        None if matches!(op, Op::QkvRopeStore | Op::Attention) => format!(
            "{F16_TO_F32}\n{}\n",
            include_str!("../../../shaders/kv_f16.wgsl")
        ),
        None => String::new(),
    };
    format!("{decoder}{io}\n{body}")
}

/// Tokens per invocation the matmul kernel is compiled for (its `TILE` constant).
pub const MATMUL_TILES: [u32; 3] = [1, 4, 8];

/// The matmul variant (index into [`MATMUL_TILES`]) for a block of `m` tokens: each tile
/// decodes the weights once, so fewer, wider tiles are cheaper, but a slot past the block is
/// computed for nothing.
pub fn matmul_variant(m: usize) -> usize {
    match m {
        0 | 1 => 0,
        2..=4 => 1,
        _ => 2,
    }
}

/// How a device's kernels split their work: which matmul and attention shader run, with which
/// constants. Chosen per adapter ([`KernelShape::for_adapter`]); every shape computes the same
/// values up to rounding, and each is batch-invariant on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelShape {
    pub matmul: MatmulShape,
    pub attention: AttentionShape,
    /// The RMS norms and the FFN's SiLU step run inside the products that read their output
    /// ([`Op::MatmulRmsNorm`], [`Op::MatmulSiluMul`]): 7 dispatches a layer instead of 10.
    pub fused_inputs: bool,
}

/// How the matmul splits its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulShape {
    /// `matmul.wgsl`: `rows` whole output rows per invocation, `wg` invocations per workgroup,
    /// no workgroup memory and no barrier.
    Rows { rows: u32, wg: u32 },
    /// `matmul_split_k.wgsl`: each row split over 8 to 64 invocations ([`split_k_index`]) in
    /// workgroups of 256, partial sums added in workgroup memory.
    SplitK,
}

/// How the attention splits its work. Both shapes divide each (token, head) pair's visible
/// slots into chunks of [`attention_chunk`] slots, each chunk's partial result merged by
/// `attention_combine.wgsl` in chunk order, so a decoding step's work items grow with the
/// context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionShape {
    /// `attention.wgsl`: one invocation per (token, head, chunk) walks the chunk's slots.
    PerHead,
    /// `attention_split_kv.wgsl`: one workgroup of 64 per (token, head, chunk) splits the
    /// chunk's slots.
    SplitKv,
}

/// Slots per attention chunk for a cache of `capacity` slots: 64, or more past
/// [`MAX_ATTENTION_CHUNKS`] chunks, so that the partials stay about as large as the score
/// scratch. The chunking depends on the cache only, never on the block: batch-invariant.
pub fn attention_chunk(capacity: usize) -> usize {
    const SLOTS: usize = 64;
    SLOTS * capacity.div_ceil(SLOTS * MAX_ATTENTION_CHUNKS).max(1)
}

/// Most chunks a (token, head) pair's slots are split into.
pub const MAX_ATTENTION_CHUNKS: usize = 256;

/// Chunks of a full cache of `capacity` slots (the stride of the partials).
pub fn attention_chunks(capacity: usize) -> usize {
    capacity.div_ceil(attention_chunk(capacity))
}

/// Invocations a row of the split-K matmul may take (its `SPLIT` constant).
pub const SPLIT_K_SPLITS: [u32; 4] = [8, 16, 32, 64];

/// Invocations of a split-K matmul workgroup: `256 / SPLIT` rows.
const SPLIT_K_WORKGROUP: usize = 256;

/// Invocations a product's rows may take in all before a wider split costs more than it saves:
/// on an H200, SmolLM2's 3,072-row gate/up product took 9 us with 32 a row (98,304 in all) and
/// 14 us with 64; its 49,152-row output projection 39 us with 8, 70 with 32.
const SPLIT_K_MOST_INVOCATIONS: usize = 1 << 17;

/// The split (index into [`SPLIT_K_SPLITS`]) of a product of `n` rows of `k` weights: the widest
/// whose invocations each still read a unit at least (`SPLIT / 8` units at once) and whose rows
/// take at most [`SPLIT_K_MOST_INVOCATIONS`]; 8 at least. Depends on the matrix alone, so a
/// product's bits do not depend on the block.
pub fn split_k_index(n: usize, k: usize) -> usize {
    let units = k / 32;
    SPLIT_K_SPLITS
        .iter()
        .rposition(|&split| {
            let split = split as usize;
            split / 8 <= units && n.saturating_mul(split) <= SPLIT_K_MOST_INVOCATIONS
        })
        .unwrap_or(0)
}

/// The pipeline variant of a product with parameters `params` (`[k, n, ..]`) for token tile
/// `tile` (index into [`MATMUL_TILES`]): tile and split (see [`split_k_index`]; shapes other
/// than split-K ignore it, [`Pipelines::get_or_create`]).
pub fn matmul_pipeline_variant(tile: usize, params: &[u32]) -> usize {
    let (k, n) = (params.first(), params.get(1));
    let split = split_k_index(
        n.copied().unwrap_or(0) as usize,
        k.copied().unwrap_or(0) as usize,
    );
    tile + MATMUL_TILES.len() * split
}

impl KernelShape {
    /// For GPUs emulated on a CPU (lavapipe), where every load is a loop over the SIMD lanes
    /// and a barrier switches coroutines: one activation load serves 16 rows, small workgroups
    /// keep every CPU thread busy on 576-row matrices, and no kernel waits on a barrier.
    pub const EMULATED: KernelShape = KernelShape {
        matmul: MatmulShape::Rows { rows: 16, wg: 8 },
        attention: AttentionShape::PerHead,
        fused_inputs: false,
    };
    /// For Chromium's SwiftShader: as [`Self::EMULATED`] with 2 rows per invocation, because
    /// SwiftShader compiles the 16-row kernel so slowly that it outweighs what the kernel
    /// saves: the first forward of a small generated model (where its pipelines compile) took
    /// 119 s with 16 rows, 27 s with 4 and 15 s with 2 (`scripts/wasm.sh test`, headless
    /// Chromium on a 2-core machine).
    pub const EMULATED_QUICK_COMPILE: KernelShape = KernelShape {
        matmul: MatmulShape::Rows { rows: 2, wg: 64 },
        attention: AttentionShape::PerHead,
        fused_inputs: false,
    };
    /// For real GPUs, which need thousands of invocations in flight and coalesced reads: rows
    /// split over invocations, and one workgroup per (token, head) in the attention. Correct and
    /// batch-invariant on every device the tests run (lavapipe, SwiftShader, an H200); on the
    /// H200 SmolLM2 decodes at 385-389 tok/s in this shape, 27 in the emulated one.
    pub const GPU: KernelShape = KernelShape {
        matmul: MatmulShape::SplitK,
        attention: AttentionShape::SplitKv,
        fused_inputs: true,
    };

    /// How reports name the shape.
    pub fn name(self) -> &'static str {
        match self {
            s if s == Self::EMULATED => "emulated",
            s if s == Self::EMULATED_QUICK_COMPILE => "emulated, 2-row matmul",
            s if s == Self::GPU => "gpu",
            _ => "custom",
        }
    }

    /// [`Self::EMULATED`] for a CPU device or a known software rasterizer, else [`Self::GPU`];
    /// in the browser, [`Self::EMULATED_QUICK_COMPILE`] for a fallback (software) adapter or
    /// SwiftShader, else [`Self::GPU`].
    pub fn for_adapter(info: &wgpu::AdapterInfo) -> Self {
        let text = format!("{} {} {}", info.name, info.driver, info.driver_info).to_lowercase();
        let software = info.device_type == wgpu::DeviceType::Cpu
            || ["llvmpipe", "lavapipe", "swiftshader"]
                .iter()
                .any(|s| text.contains(s));
        match (software, info.backend == wgpu::Backend::BrowserWebGpu) {
            (false, _) => Self::GPU,
            (true, false) => Self::EMULATED,
            (true, true) => Self::EMULATED_QUICK_COMPILE,
        }
    }

    /// The part of the shape `op` depends on: pipelines of ops that do not depend on it are
    /// shared by every shape.
    fn for_op(self, op: Op) -> KernelShape {
        KernelShape {
            matmul: match op.is_matmul() {
                true => self.matmul,
                false => MatmulShape::SplitK,
            },
            attention: match op {
                Op::Attention => self.attention,
                _ => AttentionShape::SplitKv,
            },
            // Decides which ops a model runs, not how one is compiled.
            fused_inputs: false,
        }
    }
}

impl MatmulShape {
    /// Output rows of one workgroup of a product of `n` rows of `k` weights.
    fn rows_per_group(self, n: usize, k: usize) -> usize {
        match self {
            MatmulShape::Rows { rows, wg } => (rows * wg) as usize,
            MatmulShape::SplitK => SPLIT_K_WORKGROUP / SPLIT_K_SPLITS[split_k_index(n, k)] as usize,
        }
    }

    /// Workgroups of a matmul over `n` weight rows of `k` weights for `m` tokens: x, then y
    /// past 65535 workgroups, over the rows; one tile of tokens per z.
    pub fn grid(self, n: usize, k: usize, m: usize) -> (u32, u32, u32) {
        let groups = n.div_ceil(self.rows_per_group(n, k));
        let tile = MATMUL_TILES[matmul_variant(m)] as usize;
        (
            groups.min(65535) as u32,
            groups.div_ceil(65535) as u32,
            m.div_ceil(tile) as u32,
        )
    }
}

impl AttentionShape {
    /// Workgroups of the attention's first half for `heads` query heads and `m` tokens, the
    /// longest-seeing of which sees `slots` slots, in chunks of `chunk` slots (the kernels
    /// compute the same count from the step uniform's `slots`).
    pub fn grid(self, heads: usize, m: usize, slots: usize, chunk: usize) -> (u32, u32, u32) {
        let chunks = slots.div_ceil(chunk.max(1)).max(1);
        match self {
            // One invocation per (token, head, chunk), 4 per workgroup.
            AttentionShape::PerHead => ((heads * m * chunks).div_ceil(4) as u32, 1, 1),
            AttentionShape::SplitKv => ((heads * m) as u32, chunks as u32, 1),
        }
    }
}

/// The pipeline variant `op` runs with uniform parameters `params` for a block of `m` tokens:
/// the matmul's tile and split ([`matmul_pipeline_variant`]), the attention's head dimension
/// (its `HD`).
pub fn variant(op: Op, params: &[u32], m: usize) -> usize {
    match op {
        _ if op.is_matmul() => matmul_pipeline_variant(matmul_variant(m), params),
        Op::Attention => params.get(2).copied().unwrap_or(0) as usize,
        _ => 0,
    }
}

/// Compiled pipelines of one device, keyed by op, weight format, variant (see [`variant`]) and
/// the part of the kernel shape the op depends on. Shared by every model on the device (a
/// target and its draft model, which use the same formats, compile each pipeline once):
/// compiling is the slow part of loading on CPU-emulated GPUs, several seconds for one 16-row
/// matmul variant on lavapipe.
#[derive(Default)]
pub struct Pipelines {
    map: HashMap<(Op, Option<GgmlType>, usize, KernelShape), wgpu::ComputePipeline>,
}

impl Pipelines {
    /// The pipeline of `op` in `variant` (see [`variant`]) for kernels shaped as `shape`.
    pub fn get_or_create(
        &mut self,
        device: &wgpu::Device,
        shape: KernelShape,
        op: Op,
        format: Option<GgmlType>,
        variant: usize,
    ) -> wgpu::ComputePipeline {
        let shape = shape.for_op(op);
        // Only the split-K matmul has splits: other shapes' products compile once a tile.
        let variant = match shape.matmul {
            MatmulShape::Rows { .. } if op.is_matmul() => variant % MATMUL_TILES.len(),
            _ => variant,
        };
        let entry = self.map.entry((op, format, variant, shape));
        entry
            .or_insert_with(|| {
                let label = format!(
                    "{op:?}{}",
                    format.map(|f| format!("_{f}")).unwrap_or_default()
                );
                let tile = MATMUL_TILES[variant % MATMUL_TILES.len()] as f64;
                let split = (variant / MATMUL_TILES.len()).min(SPLIT_K_SPLITS.len() - 1);
                let constants: Vec<(&str, f64)> = match (op, shape.matmul) {
                    (_, MatmulShape::Rows { rows, wg }) if op.is_matmul() => {
                        vec![("TILE", tile), ("ROWS", rows as f64), ("WG", wg as f64)]
                    }
                    (_, MatmulShape::SplitK) if op.is_matmul() => {
                        vec![("TILE", tile), ("SPLIT", SPLIT_K_SPLITS[split] as f64)]
                    }
                    (Op::Attention, _) => vec![("HD", variant as f64)],
                    _ => Vec::new(),
                };
                let mut src = source(op, format, shape);
                if op == Op::Attention {
                    // The query and value arrays hold one head: HD / 4 vectors.
                    let hd4 = format!("const HD4: u32 = {}u;", (variant / 4).max(1));
                    src = src.replace(ATTENTION_HD4, &hd4);
                }
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &constants,
                        ..Default::default()
                    },
                    cache: None,
                })
            })
            .clone()
    }
}

/// The attention's array length as `attention_io.wgsl` declares it (128 / 4), replaced per head
/// dimension when its pipeline is compiled.
const ATTENTION_HD4: &str = "const HD4: u32 = 32u;";

/// Words of every op's uniform parameters.
pub const PARAM_WORDS: usize = 16;

/// Uniform parameters: [`PARAM_WORDS`] 32-bit words (zero past `words`), f32 values stored by
/// their bits.
pub fn params(words: &[u32]) -> [u32; PARAM_WORDS] {
    let mut p = [0u32; PARAM_WORDS];
    p[..words.len()].copy_from_slice(words);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel, in every format and shape it is built for, is valid WGSL (parsed and
    /// validated by naga without a device).
    #[test]
    fn all_sources_validate() {
        let shapes = [
            KernelShape::EMULATED,
            KernelShape::EMULATED_QUICK_COMPILE,
            KernelShape::GPU,
        ];
        let mut cases: Vec<(Op, Option<GgmlType>)> = [
            Op::RmsNorm,
            Op::QkvRopeStore,
            Op::Attention,
            Op::AttentionCombine,
            Op::SiluMul,
            Op::GeluMul,
            Op::Softcap,
            Op::Argmax,
            Op::TopK,
        ]
        .iter()
        .map(|&op| (op, None))
        .collect();
        for f in GgmlType::all().filter(|t| t.is_supported()) {
            cases.push((Op::Matmul, Some(f)));
            cases.push((Op::MatmulRmsNorm, Some(f)));
            cases.push((Op::MatmulSiluMul, Some(f)));
            cases.push((Op::Embed, Some(f)));
        }
        for (op, f) in cases {
            for shape in shapes {
                let src = source(op, f, shape);
                let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
                    panic!("{op:?} {f:?} {shape:?}: {}", e.emit_to_string(&src))
                });
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{op:?} {f:?} {shape:?}: {e:?}"));
            }
        }
    }

    fn adapter(
        name: &str,
        backend: wgpu::Backend,
        device_type: wgpu::DeviceType,
    ) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: name.into(),
            ..wgpu::AdapterInfo::new(device_type, backend)
        }
    }

    #[test]
    fn kernel_shape_follows_the_adapter() {
        use wgpu::{Backend, DeviceType};
        let lavapipe = adapter("llvmpipe (LLVM 19)", Backend::Vulkan, DeviceType::Cpu);
        assert_eq!(KernelShape::for_adapter(&lavapipe), KernelShape::EMULATED);
        let named = adapter("SwiftShader Device", Backend::Vulkan, DeviceType::Other);
        assert_eq!(KernelShape::for_adapter(&named), KernelShape::EMULATED);
        let gpu = adapter("NVIDIA H100", Backend::Vulkan, DeviceType::DiscreteGpu);
        assert_eq!(KernelShape::for_adapter(&gpu), KernelShape::GPU);
        // In the browser a software adapter gets the quick-to-compile shape, a GPU the GPU one.
        let fallback = adapter("", Backend::BrowserWebGpu, DeviceType::Cpu);
        assert_eq!(
            KernelShape::for_adapter(&fallback),
            KernelShape::EMULATED_QUICK_COMPILE
        );
        let swiftshader = adapter("SwiftShader", Backend::BrowserWebGpu, DeviceType::Other);
        assert_eq!(
            KernelShape::for_adapter(&swiftshader),
            KernelShape::EMULATED_QUICK_COMPILE
        );
        let browser_gpu = adapter("", Backend::BrowserWebGpu, DeviceType::Other);
        assert_eq!(KernelShape::for_adapter(&browser_gpu), KernelShape::GPU);
    }

    /// The splits the H200 measured best: SmolLM2's down product and small products eight
    /// units at once, its gate/up product four, its output projection (and Qwen's) one.
    #[test]
    fn split_k_widens_small_products_only() {
        let split = |n, k| SPLIT_K_SPLITS[split_k_index(n, k)];
        assert_eq!(split(576, 1536), 64);
        assert_eq!(split(576, 576), 64);
        assert_eq!(split(3072, 576), 32);
        assert_eq!(split(49_152, 576), 8);
        assert_eq!(split(151_936, 896), 8);
        // No invocation without a unit to read: rows of one to three units.
        assert_eq!((split(37, 32), split(37, 64), split(37, 96)), (8, 16, 16));
        assert_eq!(split(1, 0), 8);
    }

    #[test]
    fn grids_cover_every_row_and_token() {
        for shape in [
            KernelShape::EMULATED,
            KernelShape::EMULATED_QUICK_COMPILE,
            KernelShape::GPU,
        ] {
            for (n, k, m) in [
                (1, 32, 1),
                (37, 96, 3),
                (576, 1536, 16),
                (3072, 576, 8),
                (151_936, 896, 64),
                (70_000_000, 32, 1),
            ] {
                let per_group = shape.matmul.rows_per_group(n, k);
                let (x, y, z) = shape.matmul.grid(n, k, m);
                assert!(x as usize * y as usize * per_group >= n, "{shape:?} n={n}");
                assert!(x <= 65535 && y <= 65535);
                let tile = MATMUL_TILES[matmul_variant(m)] as usize;
                assert!(z as usize * tile >= m && (z as usize - 1) * tile < m);
            }
        }
        // 3 tokens after 1,022 cached: the last sees 1,025 slots, 17 chunks of 64.
        assert_eq!(AttentionShape::SplitKv.grid(9, 3, 1025, 64), (27, 17, 1));
        assert_eq!(AttentionShape::PerHead.grid(9, 3, 1025, 64), (115, 1, 1));
        // Decoding at 1,024 cached tokens: 16 chunks, 144 workgroups of 64 or 36 of 4.
        assert_eq!(AttentionShape::SplitKv.grid(9, 1, 1024, 64), (9, 16, 1));
        assert_eq!(AttentionShape::PerHead.grid(9, 1, 1024, 64), (36, 1, 1));
        // The first token: one chunk of one slot.
        assert_eq!(AttentionShape::SplitKv.grid(9, 1, 1, 64), (9, 1, 1));
    }

    #[test]
    fn attention_chunks_cover_the_cache_in_bounded_number() {
        for cap in [1, 63, 64, 65, 4096, 16_384, 16_385, 32_768, 131_072] {
            let (chunk, chunks) = (attention_chunk(cap), attention_chunks(cap));
            assert!(chunk % 64 == 0 && chunks * chunk >= cap && chunks <= MAX_ATTENTION_CHUNKS);
        }
        assert_eq!(attention_chunk(4096), 64);
    }
}
