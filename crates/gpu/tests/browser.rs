//! The GPU engine in headless Chromium on WebGPU (SwiftShader on CI): real WGSL kernels on
//! generated models that use every block format, against the CPU reference running in the same
//! wasm instance. Run with `scripts/wasm.sh test`.

#![cfg(target_arch = "wasm32")]

use runahead_gguf::GgufFile;
use runahead_gpu::kernels::KernelShape;
use runahead_gpu::{GpuContext, GpuModel, GpuOptions};
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, TopLogits};
use wasm_bindgen_test::{console_log, wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

const PROMPT: [u32; 5] = [5, 77, 120, 3, 260];

/// The shape this adapter gets (logged: which one SwiftShader is given is worth seeing).
#[wasm_bindgen_test]
async fn the_adapter_gets_a_kernel_shape() {
    let ctx = GpuContext::new(GpuOptions::default())
        .await
        .expect("WebGPU adapter");
    console_log!("adapter {} gets {:?}", ctx.adapter_info, ctx.shape);
    assert!(
        [KernelShape::EMULATED_QUICK_COMPILE, KernelShape::GPU].contains(&ctx.shape),
        "{:?}",
        ctx.shape
    );
}

/// Both browser shapes (the software adapter's and a real GPU's) on this adapter.
#[wasm_bindgen_test]
async fn tiny_models_match_the_cpu_reference_in_the_browser() {
    for shape in [KernelShape::EMULATED_QUICK_COMPILE, KernelShape::GPU] {
        let ctx = GpuContext::new(GpuOptions {
            shape: Some(shape),
            ..GpuOptions::default()
        })
        .await
        .expect("WebGPU adapter");
        tiny_models_match(&ctx).await;
    }
}

async fn tiny_models_match(ctx: &GpuContext) {
    let shape = ctx.shape;
    // Every architecture. The engines reduce in different orders and use different exp/cos:
    // a key within that of an f16 rounding boundary is cached one f16 step apart, which moves
    // a logit of the architectures with more steps by up to 2.1e-3 (crates/gpu/tests/arch_forward.rs).
    for (spec, tol) in [
        (TinyModel::llama(), 2e-3),
        (TinyModel::qwen2(), 2e-3),
        (TinyModel::llama3(), 5e-3),
        (TinyModel::qwen3(), 5e-3),
        (TinyModel::phi3(), 5e-3),
        (TinyModel::gemma3(), 5e-3),
    ] {
        let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
        let mut cpu = CpuModel::load(&file, Some(32)).unwrap();
        let mut gpu = GpuModel::load(ctx, &file, Some(32)).unwrap();
        let batch = Batch::causal(&PROMPT, 0);
        let want = cpu.forward(&batch).await.unwrap();
        let got = gpu.forward(&batch).await.unwrap();
        let scale = want.data.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        for (i, (g, w)) in got.data.iter().zip(&want.data).enumerate() {
            assert!(
                (g - w).abs() <= tol * scale,
                "{:?} {shape:?}: index {i}: gpu {g} vs cpu {w}",
                spec.arch
            );
        }
        // Batch invariance on WebGPU: a decode step equals the same row computed in a block.
        let ids = gpu
            .forward_argmax(&Batch::causal(&[17, 18], PROMPT.len()))
            .await
            .unwrap();
        gpu.truncate(PROMPT.len());
        let one = gpu
            .forward(&Batch::causal(&[17], PROMPT.len()))
            .await
            .unwrap();
        let two = gpu
            .forward(&Batch::causal(&[18], PROMPT.len() + 1))
            .await
            .unwrap();
        assert_eq!(
            ids,
            vec![one.argmax(0), two.argmax(0)],
            "{:?} {shape:?}",
            spec.arch
        );
        // Top-k on the device lists what selecting from the same logits lists.
        gpu.truncate(0);
        let top = gpu.forward_top_k(&batch, 8).await.unwrap();
        assert_eq!(
            top.rows,
            TopLogits::of(&got, 8).rows,
            "{:?} {shape:?}: top-8",
            spec.arch
        );
    }
}
