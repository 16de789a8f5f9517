#![allow(dead_code)]

use std::sync::OnceLock;

use pollster::block_on;
use runahead_gpu::kernels::{KernelShape, MatmulShape};
use runahead_gpu::{GpuContext, GpuOptions};

/// One device for the whole test binary (lavapipe on CI; any Vulkan GPU elsewhere), with the
/// matmul shape the engine picks for it.
pub fn ctx() -> GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| open(GpuOptions::default())).clone()
}

/// A context with the 2-row matmul shape, for the generated models that put every block format
/// into one model: lavapipe's shader compiler spends seconds on each 16-row matmul pipeline (11
/// formats x 3 token tiles per model), the 2-row ones compile far faster. The 16-row kernels are
/// tested per format by kernels.rs and in a whole model by smollm2.rs.
pub fn tiny_ctx() -> GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        open(GpuOptions {
            shape: Some(KernelShape::EMULATED_QUICK_COMPILE),
            ..GpuOptions::default()
        })
    })
    .clone()
}

/// A context with the kernels real GPUs get ([`KernelShape::GPU`]), run here on whatever
/// device there is.
pub fn gpu_shape_ctx() -> GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        open(GpuOptions {
            shape: Some(KernelShape::GPU),
            ..GpuOptions::default()
        })
    })
    .clone()
}

/// The generated-model test contexts: the quick-to-compile emulated shape and the GPU shape.
pub fn shape_ctxs() -> [(&'static str, GpuContext); 2] {
    [("emulated", tiny_ctx()), ("gpu", gpu_shape_ctx())]
}

fn open(options: GpuOptions) -> GpuContext {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    block_on(GpuContext::new(options)).unwrap_or_else(|e| {
        panic!("{e}\nThe GPU tests need a Vulkan device; on a machine without a GPU install lavapipe: apt-get install mesa-vulkan-drivers")
    })
}

/// Largest |a - b| relative to the largest |b|, and where it is.
pub fn max_rel_diff(a: &[f32], b: &[f32]) -> (f32, usize) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    let mut worst = (0f32, 0usize);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let d = (x - y).abs() / scale;
        if d.is_nan() || d > worst.0 {
            worst = (d, i);
        }
    }
    worst
}

/// Every matmul shape the engine picks for some adapter.
pub const MATMUL_SHAPES: [MatmulShape; 3] = [
    KernelShape::EMULATED.matmul,
    KernelShape::EMULATED_QUICK_COMPILE.matmul,
    KernelShape::GPU.matmul,
];

/// `got` equals `want` within `rel` of `want`'s largest magnitude, with the failing index in the
/// message.
pub fn close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: index {i}: gpu {g} vs cpu {w} (scale {scale})"
        );
    }
}
