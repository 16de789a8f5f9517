//! The GPU engine on the real default model (SmolLM2-135M, fetched by scripts/fetch-models.sh):
//! logits against the CPU reference, llama.cpp's greedy tokens teacher-forced, weight tensors
//! split across bindings, and limits that are too small.

mod common;

use std::path::PathBuf;

use common::{ctx, gpu_shape_ctx, max_rel_diff};
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::GpuContext;
use runahead_gpu::{GpuError, GpuModel};
use runahead_model::{Batch, CpuModel, LanguageModel, ModelError};

fn smollm2() -> GgufFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}\nrun scripts/fetch-models.sh"))
}

/// The first llama.cpp greedy fixture: prompt ids, generated ids, top-2 margins.
fn fixture() -> (Vec<u32>, Vec<u32>, Vec<f32>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/smollm2-135m/greedy.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let case = &v["cases"][0];
    let ids = |x: &serde_json::Value| {
        x.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as u32)
            .collect::<Vec<_>>()
    };
    let margins = case["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t[0][1].as_f64().unwrap() - t[1][1].as_f64().unwrap()) as f32)
        .collect();
    (ids(&case["prompt_ids"]), ids(&case["tokens"]), margins)
}

#[test]
fn smollm2_on_the_gpu() {
    let file = smollm2();
    let (prompt, tokens, margins) = fixture();
    let n = 12;
    let mut input = prompt.clone();
    input.extend_from_slice(&tokens[..n - 1]);
    let batch = Batch::causal(&input, 0);

    let mut cpu = CpuModel::load(&file, Some(256)).unwrap();
    let want = block_on(cpu.forward(&batch)).unwrap();
    let next = [tokens[n - 1]];
    let pos = input.len();
    let cpu_next = block_on(cpu.forward(&Batch::causal(&next, pos))).unwrap();
    // The kernels this device gets, and the ones a real GPU gets.
    let check = |ctx: &GpuContext, shape: &str| {
        let mut gpu = GpuModel::load(ctx, &file, Some(256)).unwrap();
        let got = block_on(gpu.forward(&batch)).unwrap();
        let (d, i) = max_rel_diff(&got.data, &want.data);
        assert!(
            d < 2e-3,
            "{shape}: logits differ from the CPU reference by {d} at row {} token {}",
            i / want.vocab,
            i % want.vocab
        );

        // llama.cpp's greedy tokens, teacher-forced: same argmax wherever its margin is clear.
        let p = prompt.len();
        for i in 0..n {
            if margins[i] >= 0.5 {
                assert_eq!(got.argmax(p - 1 + i), tokens[i], "{shape}: position {i}");
            }
        }

        // Decoding on from there: the on-device argmax equals the CPU's.
        let ids = block_on(gpu.forward_argmax(&Batch::causal(&next, pos))).unwrap();
        assert_eq!(ids, vec![cpu_next.argmax(0)], "{shape}");
        assert_eq!(gpu.stats().submits, 2, "{shape}: one submit per forward");
        // 30 layers of 7 dispatches with the norms and SiLU fused into the products, else 10;
        // then the embedding, the output product and (unfused) the final norm. The argmax is
        // one more where only it is read back.
        let expected = match ctx.shape.fused_inputs {
            true => 30 * 7 + 2,
            false => 30 * 10 + 3,
        };
        assert_eq!(gpu.dispatches_per_forward(), expected, "{shape}");
        got
    };
    let got = check(&ctx(), "adapter's kernels");
    check(&gpu_shape_ctx(), "GPU kernels");

    // A 16 MiB binding limit splits the 30 MiB token embedding (also the output matrix) in two;
    // the logits stay bit-identical.
    let mut small = ctx();
    small.max_binding_size = 16 << 20;
    let mut split = GpuModel::load(&small, &file, Some(256)).unwrap();
    let got_split = block_on(split.forward(&batch)).unwrap();
    assert_eq!(
        got_split.data, got.data,
        "tensor splitting changed the result"
    );
}

#[test]
fn limits_too_small_are_a_clear_error() {
    let file = smollm2();
    let mut tiny = ctx();
    tiny.max_binding_size = 1024;
    let err = GpuModel::load(&tiny, &file, Some(64))
        .err()
        .expect("a 1 KiB binding limit cannot hold the model");
    let ModelError::Backend(inner) = &err else {
        panic!("{err}")
    };
    let gpu_err = inner.downcast_ref::<GpuError>().expect("a GpuError");
    assert!(
        matches!(gpu_err, GpuError::LimitTooSmall { .. }),
        "{gpu_err}"
    );
    assert!(
        err.to_string().contains("maxStorageBufferBindingSize"),
        "{err}"
    );
}
