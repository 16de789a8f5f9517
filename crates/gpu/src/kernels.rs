//! WGSL sources (one file per op under `shaders/`) and compiled pipelines. Kernels that read
//! quantized weights are specialized per block format by prepending the format's
//! decoder (`unit_head`, `quad`) from `shaders/formats/`.

use std::collections::HashMap;

use runahead_gguf::GgmlType;

/// A compute kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Matmul,
    Embed,
    RmsNorm,
    Rope,
    KvStore,
    Attention,
    SiluMul,
    AddBias,
    Argmax,
}

const COMMON: &str = include_str!("../../../shaders/formats/common.wgsl");

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

/// The full WGSL source of `op`, specialized to `format` for the weight-reading kernels.
pub fn source(op: Op, format: Option<GgmlType>) -> String {
    let body = match op {
        Op::Matmul => include_str!("../../../shaders/matmul.wgsl"),
        Op::Embed => include_str!("../../../shaders/embed.wgsl"),
        Op::RmsNorm => include_str!("../../../shaders/rms_norm.wgsl"),
        Op::Rope => include_str!("../../../shaders/rope.wgsl"),
        Op::KvStore => include_str!("../../../shaders/kv_store.wgsl"),
        Op::Attention => include_str!("../../../shaders/attention.wgsl"),
        Op::SiluMul => include_str!("../../../shaders/silu_mul.wgsl"),
        Op::AddBias => include_str!("../../../shaders/add_bias.wgsl"),
        Op::Argmax => include_str!("../../../shaders/argmax.wgsl"),
    };
    match format.and_then(format_source) {
        Some(f) => format!("{COMMON}\n{f}\n{body}"),
        None => body.to_owned(),
    }
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

/// How the matmul splits work: output rows per invocation and invocations per workgroup (the
/// kernel's `ROWS` and `WG` constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulShape {
    pub rows: u32,
    pub wg: u32,
}

impl MatmulShape {
    /// For GPUs emulated on a CPU (lavapipe, SwiftShader), where every load is a loop over the
    /// SIMD lanes and loads set the speed: one activation load serves 16 rows; small
    /// workgroups keep every CPU thread busy on 576-row matrices.
    pub const CPU: MatmulShape = MatmulShape { rows: 16, wg: 8 };
    /// For real GPUs, which need many invocations in flight (not yet measured on one).
    pub const GPU: MatmulShape = MatmulShape { rows: 2, wg: 64 };

    /// [`Self::CPU`] for a CPU device or a known software rasterizer, else [`Self::GPU`]; always
    /// [`Self::GPU`] in the browser. Chromium's SwiftShader compiles the 16-row kernel so slowly
    /// that it outweighs what the kernel saves: the first forward of a small generated model
    /// (where its pipelines compile) took 119 s with 16 rows, 27 s with 4 and 15 s with 2
    /// (`scripts/wasm.sh test`, headless Chromium on this 2-core machine).
    pub fn for_adapter(info: &wgpu::AdapterInfo) -> Self {
        let text = format!("{} {} {}", info.name, info.driver, info.driver_info).to_lowercase();
        if info.backend == wgpu::Backend::BrowserWebGpu {
            Self::GPU
        } else if info.device_type == wgpu::DeviceType::Cpu
            || ["llvmpipe", "lavapipe", "swiftshader"]
                .iter()
                .any(|s| text.contains(s))
        {
            Self::CPU
        } else {
            Self::GPU
        }
    }

    /// Workgroups of a matmul over `n` weight rows for `m` tokens: rows * wg rows per
    /// workgroup (x, then y past 65535 workgroups), one tile of tokens per z.
    pub fn grid(self, n: usize, m: usize) -> (u32, u32, u32) {
        let groups = n.div_ceil((self.rows * self.wg) as usize);
        let tile = MATMUL_TILES[matmul_variant(m)] as usize;
        (
            groups.min(65535) as u32,
            groups.div_ceil(65535) as u32,
            m.div_ceil(tile) as u32,
        )
    }
}

/// Workgroups of the attention kernel for `heads` query heads and `m` tokens: one invocation
/// per (token, head), 4 per workgroup.
pub fn attention_grid(heads: usize, m: usize) -> (u32, u32, u32) {
    ((heads * m).div_ceil(4) as u32, 1, 1)
}

/// The pipeline variant `op` runs with uniform parameters `params` for a block of `m` tokens:
/// the matmul's index into [`MATMUL_TILES`], the attention's head dimension (its `HD`).
pub fn variant(op: Op, params: &[u32], m: usize) -> usize {
    match op {
        Op::Matmul => matmul_variant(m),
        Op::Attention => params.get(2).copied().unwrap_or(0) as usize,
        _ => 0,
    }
}

/// Compiled pipelines of one device, keyed by op, weight format, variant (see [`variant`]) and
/// matmul shape. Shared by every model on the device (a target and its draft model, which use
/// the same formats, compile each pipeline once): compiling is the slow part of loading on
/// CPU-emulated GPUs, several seconds for one 16-row matmul variant on lavapipe.
#[derive(Default)]
pub struct Pipelines {
    map: HashMap<(Op, Option<GgmlType>, usize, MatmulShape), wgpu::ComputePipeline>,
}

impl Pipelines {
    /// The pipeline of `op` in `variant` (see [`variant`]) for matmuls split as `shape`.
    pub fn get_or_create(
        &mut self,
        device: &wgpu::Device,
        shape: MatmulShape,
        op: Op,
        format: Option<GgmlType>,
        variant: usize,
    ) -> wgpu::ComputePipeline {
        // Other ops do not depend on the shape: one key for all shapes.
        let key_shape = match op {
            Op::Matmul => shape,
            _ => MatmulShape::GPU,
        };
        let entry = self.map.entry((op, format, variant, key_shape));
        entry
            .or_insert_with(|| {
                let label = format!(
                    "{op:?}{}",
                    format.map(|f| format!("_{f}")).unwrap_or_default()
                );
                let tile = [
                    ("TILE", MATMUL_TILES[variant.min(2)] as f64),
                    ("ROWS", shape.rows as f64),
                    ("WG", shape.wg as f64),
                ];
                let head_dim = [("HD", variant as f64)];
                let constants: &[(&str, f64)] = match op {
                    Op::Matmul => &tile,
                    Op::Attention => &head_dim,
                    _ => &[],
                };
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(source(op, format).into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants,
                        ..Default::default()
                    },
                    cache: None,
                })
            })
            .clone()
    }
}

/// Uniform parameters: eight 32-bit words, f32 values stored by their bits.
pub fn params(words: &[u32]) -> [u32; 8] {
    let mut p = [0u32; 8];
    p[..words.len()].copy_from_slice(words);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel, in every format it is built for, is valid WGSL (parsed and validated by
    /// naga without a device).
    #[test]
    fn all_sources_validate() {
        let mut cases: Vec<(Op, Option<GgmlType>)> = [
            Op::RmsNorm,
            Op::Rope,
            Op::KvStore,
            Op::Attention,
            Op::SiluMul,
            Op::AddBias,
            Op::Argmax,
        ]
        .iter()
        .map(|&op| (op, None))
        .collect();
        for f in GgmlType::all().filter(|t| t.is_supported()) {
            cases.push((Op::Matmul, Some(f)));
            cases.push((Op::Embed, Some(f)));
        }
        for (op, f) in cases {
            let src = source(op, f);
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{op:?} {f:?}: {}", e.emit_to_string(&src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::empty(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{op:?} {f:?}: {e:?}"));
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
    fn matmul_shape_follows_the_adapter() {
        use wgpu::{Backend, DeviceType};
        let lavapipe = adapter("llvmpipe (LLVM 19)", Backend::Vulkan, DeviceType::Cpu);
        assert_eq!(MatmulShape::for_adapter(&lavapipe), MatmulShape::CPU);
        let named = adapter("SwiftShader Device", Backend::Vulkan, DeviceType::Other);
        assert_eq!(MatmulShape::for_adapter(&named), MatmulShape::CPU);
        let gpu = adapter("NVIDIA H100", Backend::Vulkan, DeviceType::DiscreteGpu);
        assert_eq!(MatmulShape::for_adapter(&gpu), MatmulShape::GPU);
        // In the browser even a CPU adapter (SwiftShader) gets the quick-to-compile shape.
        let browser = adapter("", Backend::BrowserWebGpu, DeviceType::Cpu);
        assert_eq!(MatmulShape::for_adapter(&browser), MatmulShape::GPU);
    }
}
