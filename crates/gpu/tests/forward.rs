//! The GPU forward pass against the CPU reference on generated models (every block format),
//! and the GPU engine's own batch invariance, tree masks and cache rollback.

mod common;

use common::{max_rel_diff, shape_ctxs, tiny_ctx};
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::kernels::KernelShape;
use runahead_gpu::{GpuContext, GpuError, GpuModel, GpuOptions};
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, Logits, ModelError, TopLogits};

const PROMPT: [u32; 7] = [5, 77, 120, 3, 260, 42, 199];
/// GPU and CPU reduce in different orders and use different exp/cos implementations.
const TOL: f32 = 2e-3;

/// Each generated model on each kernel shape, named.
fn cases() -> Vec<(String, TinyModel, GpuContext)> {
    let mut out = Vec::new();
    for (shape, ctx) in shape_ctxs() {
        for (arch, spec) in [("llama", TinyModel::llama()), ("qwen2", TinyModel::qwen2())] {
            out.push((format!("{arch} ({shape} kernels)"), spec, ctx.clone()));
        }
    }
    out
}

fn rows(l: &Logits) -> Vec<Vec<f32>> {
    (0..l.n_rows()).map(|i| l.row(i).to_vec()).collect()
}

fn gpu(ctx: &GpuContext, spec: &TinyModel) -> GpuModel {
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    GpuModel::load(ctx, &file, None).unwrap()
}

/// A file that mixes Q5_0 and Q8_0 within q/k/v and within gate/up, as Qwen2.5 files do
/// (`attn_v` in Q8_0 beside Q5_0 `attn_q`/`attn_k`): each group goes up re-encoded as one Q8_0
/// matrix with the same values (`runahead_gguf::widen_to_q8_0`), so the layer keeps one product
/// per group (7 dispatches with fused inputs, 10 without), and the logits stay the CPU
/// reference's.
#[test]
fn products_mixing_q5_0_and_q8_0_take_one_dispatch() {
    use runahead_gguf::GgmlType::{Q4_1, Q5_0, Q8_0};
    let spec = TinyModel {
        // q, k, v, output, gate, up, down, then the output matrix.
        formats: &[Q5_0, Q5_0, Q8_0, Q4_1, Q8_0, Q5_0, Q4_1],
        ..TinyModel::qwen2()
    };
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let mut cpu = CpuModel::load(&file, None).unwrap();
    let want = block_on(cpu.forward(&Batch::causal(&PROMPT, 0))).unwrap();
    for (shape, ctx) in shape_ctxs() {
        let mut g = GpuModel::load(&ctx, &file, None).unwrap();
        let got = block_on(g.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        let (d, i) = max_rel_diff(&got.data, &want.data);
        assert!(d < TOL, "{shape}: logits differ by {d} at {i}");
        // Per layer as in a file of one format, then the embedding, the output product and
        // (unfused) the final norm.
        let expected = match ctx.shape.fused_inputs {
            true => 7 * spec.n_layers + 2,
            false => 10 * spec.n_layers + 3,
        };
        assert_eq!(g.dispatches_per_forward(), expected, "{shape}");
    }
}

#[test]
fn gpu_logits_match_the_cpu_reference() {
    for (name, spec, ctx) in cases() {
        let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
        let mut cpu = CpuModel::load(&file, None).unwrap();
        let mut g = GpuModel::load(&ctx, &file, None).unwrap();
        let want = block_on(cpu.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        let got = block_on(g.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        let (d, i) = max_rel_diff(&got.data, &want.data);
        assert!(
            d < TOL,
            "{name}: prefill logits differ by {d} at row {} token {}",
            i / want.vocab,
            i % want.vocab
        );
        // A decode step after the prefill.
        let want = block_on(cpu.forward(&Batch::causal(&[17], 7))).unwrap();
        let got = block_on(g.forward(&Batch::causal(&[17], 7))).unwrap();
        let (d, i) = max_rel_diff(&got.data, &want.data);
        assert!(d < TOL, "{name}: decode logits differ by {d} at {i}");
        let ids = block_on(g.forward_argmax(&Batch::causal(&[18, 19], 8))).unwrap();
        let want = block_on(cpu.forward(&Batch::causal(&[18, 19], 8))).unwrap();
        assert_eq!(ids, vec![want.argmax(0), want.argmax(1)], "{name}: argmax");
    }
}

/// The device's top-k selection lists exactly what selecting from the same engine's logits
/// lists (and k past the device's limit falls back to that).
#[test]
fn top_k_on_the_device_equals_selecting_from_the_logits() {
    for (name, spec, ctx) in cases() {
        let mut g = gpu(&ctx, &spec);
        let logits = block_on(g.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        for k in [1, 7, 64, 100] {
            g.truncate(0);
            let top = block_on(g.forward_top_k(&Batch::causal(&PROMPT, 0), k)).unwrap();
            let want = TopLogits::of(&logits, k);
            assert_eq!(top.rows, want.rows, "{name}: top-{k}");
            for (r, (a, b)) in top.log_norm.iter().zip(&want.log_norm).enumerate() {
                assert!(
                    (a - b).abs() < 1e-4 * b.abs().max(1.0),
                    "{name}: row {r}: {a} vs {b}"
                );
            }
        }
    }
}

/// A block asked for its last rows' logits only reads back exactly those rows of the whole
/// block (logits, argmax, top-k; a long block split in chunks too), and leaves the same cache.
#[test]
fn a_block_asked_for_its_last_rows_gives_them_and_the_same_cache() {
    // Longer than a chunk, so the chunked path splits it.
    let long: Vec<u32> = (0..70u32).map(|i| (i * 37 + 5) % 256).collect();
    for (name, spec, ctx) in cases() {
        for prompt in [&PROMPT[..], &long[..]] {
            let n = prompt.len();
            let mut g = gpu(&ctx, &spec);
            let all = block_on(g.forward(&Batch::causal(prompt, 0))).unwrap();
            let next = rows(&block_on(g.forward(&Batch::causal(&[11], n))).unwrap());
            for last in [0, 1, 3, n] {
                let batch = Batch::causal(prompt, 0).logits_for_last(last);
                g.truncate(0);
                let got = rows(&block_on(g.forward(&batch)).unwrap());
                assert_eq!(got, rows(&all)[n - last..], "{name}, {n} rows: last {last}");
                let after = rows(&block_on(g.forward(&Batch::causal(&[11], n))).unwrap());
                assert_eq!(after, next, "{name}, {n} rows: the cache after last {last}");
                g.truncate(0);
                let ids = block_on(g.forward_argmax(&batch)).unwrap();
                let want: Vec<u32> = (n - last..n).map(|r| all.argmax(r)).collect();
                assert_eq!(ids, want, "{name}, {n} rows: argmax of the last {last}");
                g.truncate(0);
                let top = block_on(g.forward_top_k(&batch, 4)).unwrap();
                assert_eq!(
                    top.rows.len(),
                    last,
                    "{name}, {n} rows: top-k of the last {last}"
                );
            }
        }
    }
}

#[test]
fn gpu_is_batch_invariant_bit_for_bit() {
    for (name, spec, ctx) in cases() {
        let mut a = gpu(&ctx, &spec);
        let block = rows(&block_on(a.forward(&Batch::causal(&PROMPT, 0))).unwrap());
        let mut b = gpu(&ctx, &spec);
        let single: Vec<Vec<f32>> = PROMPT
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                block_on(b.forward(&Batch::causal(&[t], i)))
                    .unwrap()
                    .row(0)
                    .to_vec()
            })
            .collect();
        assert_eq!(block, single, "{name}");
    }
}

#[test]
fn gpu_tree_rows_equal_chains_and_rollback_is_clean() {
    for (name, spec, ctx) in cases() {
        let prefix = &PROMPT[..3];
        let tokens = [10, 11, 12, 13, 14];
        let parents = [None, Some(0), Some(1), Some(0), None];
        let mut m = gpu(&ctx, &spec);
        block_on(m.forward(&Batch::causal(prefix, 0))).unwrap();
        let tree = block_on(m.forward(&Batch::tree(&tokens, &parents, 3).unwrap())).unwrap();
        let chain = |path: &[u32]| {
            let mut c = gpu(&ctx, &spec);
            block_on(c.forward(&Batch::causal(prefix, 0))).unwrap();
            rows(&block_on(c.forward(&Batch::causal(path, 3))).unwrap())
        };
        let abc = chain(&[10, 11, 12]);
        let ad = chain(&[10, 13]);
        assert_eq!(tree.row(2), abc[2], "{name}: c");
        assert_eq!(tree.row(3), ad[1], "{name}: d");
        assert_eq!(tree.row(4), chain(&[14])[0], "{name}: e");

        // Keep a -> d; continuing equals the chain that decoded a, d.
        m.compact(3, &[0, 3]).unwrap();
        let next = rows(&block_on(m.forward(&Batch::causal(&[20], 5))).unwrap());
        let mut c = gpu(&ctx, &spec);
        block_on(c.forward(&Batch::causal(
            &[PROMPT[0], PROMPT[1], PROMPT[2], 10, 13],
            0,
        )))
        .unwrap();
        assert_eq!(
            next,
            rows(&block_on(c.forward(&Batch::causal(&[20], 5))).unwrap()),
            "{name}: compact"
        );

        // Truncate after writing junk: no stale entry leaks.
        m.truncate(4);
        block_on(m.forward(&Batch::causal(&[9, 9, 9], 4))).unwrap();
        m.truncate(4);
        let again = rows(&block_on(m.forward(&Batch::causal(&[13, 20], 4))).unwrap());
        let mut c = gpu(&ctx, &spec);
        block_on(c.forward(&Batch::causal(&[PROMPT[0], PROMPT[1], PROMPT[2], 10], 0))).unwrap();
        assert_eq!(
            again,
            rows(&block_on(c.forward(&Batch::causal(&[13, 20], 4))).unwrap()),
            "{name}: truncate"
        );
    }
}

/// A lost device (destroyed on purpose here; in a page: a driver reset, a GPU process crash)
/// is a typed error on every later call, not a panic or a hang; a new device then loads the
/// same file and gives the same results.
#[test]
fn a_lost_device_is_a_typed_error() {
    // Its own device: destroying the shared one would break the other tests.
    let ctx = block_on(GpuContext::new(GpuOptions {
        shape: Some(KernelShape::EMULATED_QUICK_COMPILE),
        ..GpuOptions::default()
    }))
    .unwrap();
    let spec = TinyModel {
        n_layers: 1,
        ..TinyModel::llama()
    };
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let mut m = GpuModel::load(&ctx, &file, None).unwrap();
    let before = block_on(m.forward_argmax(&Batch::causal(&PROMPT, 0))).unwrap();
    ctx.device.destroy();
    for step in 0..2 {
        let at = m.cache_len();
        let err = block_on(m.forward_argmax(&Batch::causal(&[17], at)))
            .expect_err("a forward on a destroyed device");
        let lost = match &err {
            ModelError::Backend(e) => e.downcast_ref::<GpuError>(),
            _ => None,
        };
        assert!(
            matches!(lost, Some(GpuError::DeviceLost(_))),
            "step {step}: {err:?}"
        );
    }
    // What a page does next: a new device, the same file loaded again, the same results.
    let fresh = block_on(GpuContext::new(GpuOptions {
        shape: Some(KernelShape::EMULATED_QUICK_COMPILE),
        ..GpuOptions::default()
    }))
    .unwrap();
    let mut reloaded = GpuModel::load(&fresh, &file, None).unwrap();
    let after = block_on(reloaded.forward_argmax(&Batch::causal(&PROMPT, 0))).unwrap();
    assert_eq!(after, before, "the reloaded model on a new device");
}

/// A model whose logits are all NaN (corrupt weights): the device argmax reports it as an
/// error instead of token 0, and the device top-k lists nothing, as the CPU selection does.
#[test]
fn nan_logits_are_an_error_not_token_zero() {
    let spec = TinyModel {
        n_layers: 1,
        ..TinyModel::llama()
    };
    let file = GgufFile::from_bytes(spec.to_gguf_with_nan("output_norm.weight")).unwrap();
    for (shape, ctx) in shape_ctxs() {
        let mut m = GpuModel::load(&ctx, &file, None).unwrap();
        let err = block_on(m.forward_argmax(&Batch::causal(&PROMPT, 0))).unwrap_err();
        assert!(
            matches!(err, ModelError::NoUsableLogit { row: 0 }),
            "{shape}: {err}"
        );
        m.truncate(0);
        let top = block_on(m.forward_top_k(&Batch::causal(&PROMPT, 0), 8)).unwrap();
        assert!(
            top.rows.iter().all(|r| r.is_empty()),
            "{shape}: {:?}",
            top.rows
        );
    }
}

fn gpu_error(err: &ModelError) -> Option<&GpuError> {
    match err {
        ModelError::Backend(e) => e.downcast_ref::<GpuError>(),
        _ => None,
    }
}

/// The memory a model takes is planned before the first buffer: the plan adds up what the
/// file's tensors and the KV cache really take, and a budget one byte short is refused with
/// the need named, while the exact budget loads.
#[test]
fn a_model_over_the_memory_budget_is_refused_naming_its_need() {
    let spec = TinyModel::llama();
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let context = 48;
    let plan = GpuModel::load(&tiny_ctx(), &file, Some(context))
        .unwrap()
        .memory();
    let kv_dim = spec.n_kv_heads * spec.n_embd / spec.n_heads;
    // f16 keys and values.
    assert_eq!(
        plan.kv_cache,
        (2 * spec.n_layers * context * kv_dim * 2) as u64
    );
    let tensor_bytes: u64 = file.header.tensors.iter().map(|t| t.size).sum();
    assert!(
        plan.weights >= tensor_bytes,
        "{plan:?} vs {tensor_bytes} bytes of tensors"
    );

    let mut tight = tiny_ctx();
    tight.memory_budget = Some(plan.total() - 1);
    let err = GpuModel::load(&tight, &file, Some(context))
        .err()
        .expect("one byte short of the plan");
    match gpu_error(&err) {
        Some(GpuError::OverMemoryBudget { needed, budget, .. }) => {
            assert_eq!((*needed, *budget), (plan.total(), plan.total() - 1))
        }
        _ => panic!("{err:?}"),
    }
    tight.memory_budget = Some(plan.total());
    GpuModel::load(&tight, &file, Some(context)).expect("the exact budget is enough");
}

/// A file whose metadata claims more layers than it holds fails at the first layer it lacks,
/// before anything is sized from the claim: under a budget that fits the two real layers, the
/// error is the missing tensor, not the 1000 claimed layers' KV cache (before, the KV cache of
/// every claimed layer was allocated first).
#[test]
fn a_file_claiming_more_layers_than_it_holds_is_refused() {
    let spec = TinyModel::llama();
    let real = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let mut tight = tiny_ctx();
    tight.memory_budget = Some(
        GpuModel::load(&tight, &real, None)
            .unwrap()
            .memory()
            .total(),
    );
    let key = format!("{}.block_count", spec.arch_name());
    let bytes = spec.to_gguf_with_meta(&[(&key, runahead_gguf::Value::U32(1000))]);
    let file = GgufFile::from_bytes(bytes).unwrap();
    let err = GpuModel::load(&tight, &file, None)
        .err()
        .expect("a model with 998 missing layers");
    let missing = format!("blk.{}.", spec.n_layers);
    assert!(err.to_string().contains(&missing), "{err}");
    assert!(
        gpu_error(&err).is_none(),
        "a model error, not a device one: {err:?}"
    );
}

/// A context whose KV cache or attention scores no binding can hold is refused before loading,
/// naming the limit, instead of allocating the activations first.
#[test]
fn a_context_larger_than_the_device_can_hold_is_a_limit_error() {
    let spec = TinyModel {
        context: 1 << 24,
        ..TinyModel::llama()
    };
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    let err = GpuModel::load(&tiny_ctx(), &file, Some(1 << 24))
        .err()
        .expect("16M tokens of attention scores exceed any binding");
    assert!(
        matches!(gpu_error(&err), Some(GpuError::LimitTooSmall { .. })),
        "{err:?}"
    );
}
