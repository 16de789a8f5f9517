//! WGSL sources (one file per op under `shaders/`) and compiled pipelines. Kernels that read
//! quantized weights are specialized per block format by prepending the format's
//! `load_unit` from `shaders/formats/`.

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

/// The `load_unit` source of a block format, or `None` when the GPU engine lacks it.
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

/// Compiled pipelines, keyed by op and weight format; built at load, looked up per forward.
#[derive(Default)]
pub struct Pipelines {
    map: HashMap<(Op, Option<GgmlType>), wgpu::ComputePipeline>,
}

impl Pipelines {
    pub fn get_or_create(
        &mut self,
        device: &wgpu::Device,
        op: Op,
        format: Option<GgmlType>,
    ) -> &wgpu::ComputePipeline {
        self.map.entry((op, format)).or_insert_with(|| {
            let label = format!(
                "{op:?}{}",
                format.map(|f| format!("_{f}")).unwrap_or_default()
            );
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(source(op, format).into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        })
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
}
