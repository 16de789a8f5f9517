//! The engine on generated models (every block format in every forward): logits against the
//! f32 reference, batch invariance, tree masks, cache truncation and compaction, errors.

use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions, Isa, STEPS};
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, Logits, ModelError, Step};

fn file(spec: &TinyModel) -> Arc<GgufFile> {
    Arc::new(GgufFile::from_bytes(spec.to_gguf()).unwrap())
}

fn options(isa: Isa, threads: usize) -> CpuOptions {
    CpuOptions {
        context: None,
        threads: Some(threads),
        isa: Some(isa),
    }
}

/// Every instruction set this machine has, each with 1 and 2 threads (each one of this target
/// it lacks is said on `test`'s output).
fn setups(test: &str) -> Vec<CpuOptions> {
    Isa::kernels_for_test(test, &Isa::ALL)
        .into_iter()
        .flat_map(|k| [options(k.isa(), 1), options(k.isa(), 2)])
        .collect()
}

fn load(spec: &TinyModel, o: &CpuOptions) -> CpuEngine {
    CpuEngine::load(file(spec), o).unwrap()
}

/// Tied and separate outputs for llama and qwen2, and the architectures whose plans add steps:
/// llama with `rope_freqs`, qwen3 (head dim 128, Q/K norms), phi3 (fused QKV and gate/up,
/// partial LongRoPE), gemma3 (a sliding-window layer of window 8 with its own RoPE base, Q/K
/// norms, post-norms, GELU-tanh, a scaled embedding, soft-capped logits).
fn models() -> Vec<(&'static str, TinyModel)> {
    vec![
        ("llama", TinyModel::llama()),
        ("qwen2", TinyModel::qwen2()),
        (
            "llama, separate output",
            TinyModel {
                separate_output: true,
                seed: 3,
                ..TinyModel::llama()
            },
        ),
        (
            "qwen2, tied output",
            TinyModel {
                separate_output: false,
                seed: 4,
                ..TinyModel::qwen2()
            },
        ),
        ("llama, rope_freqs", TinyModel::llama3()),
        ("qwen3", TinyModel::qwen3()),
        ("phi3", TinyModel::phi3()),
        ("gemma3", TinyModel::gemma3()),
    ]
}

/// The engine runs every step a plan may hold.
#[test]
fn every_plan_step_is_implemented() {
    for step in Step::ALL {
        assert!(STEPS.contains(step), "{step:?}: {}", step.describe());
    }
}

/// The tiny gemma3 with its sliding window set to `window` (the key's u32 value patched in the
/// file the generator writes: its 8 is fixed there).
fn gemma3_with_window(window: u32) -> Arc<GgufFile> {
    let mut bytes = TinyModel::gemma3().to_gguf();
    let key = b"gemma3.attention.sliding_window";
    let mut entry = (key.len() as u64).to_le_bytes().to_vec();
    entry.extend_from_slice(key);
    let at = bytes
        .windows(entry.len())
        .position(|w| w == entry)
        .expect("the generator writes the window key");
    // The key, its type (u32: 4), its value.
    let value = at + entry.len() + 4;
    assert_eq!(bytes[value - 4..value], 4u32.to_le_bytes());
    assert_eq!(bytes[value..value + 4], 8u32.to_le_bytes());
    bytes[value..value + 4].copy_from_slice(&window.to_le_bytes());
    Arc::new(GgufFile::from_bytes(bytes).unwrap())
}

const PROMPT: [u32; 9] = [5, 77, 120, 3, 260, 42, 199, 7, 8];

fn rows(l: &Logits) -> Vec<Vec<f32>> {
    (0..l.n_rows()).map(|i| l.row(i).to_vec()).collect()
}

/// Row-by-row forward of `tokens` after the current cache.
fn one_by_one<M: LanguageModel>(m: &mut M, tokens: &[u32]) -> Vec<Vec<f32>> {
    tokens
        .iter()
        .map(|&t| {
            let pos = m.cache_len();
            block_on(m.forward(&Batch::causal(&[t], pos)))
                .unwrap()
                .row(0)
                .to_vec()
        })
        .collect()
}

/// 8-bit activations against exact f32, relative to the rms of the reference's logits (13.9
/// for tied outputs, whose random embeddings make large logits; about 3 otherwise): the
/// largest difference measured is 0.06 of it (0.82 of 13.9), a broken block decoder moves
/// logits by about the whole rms.
const TINY_TOLERANCE: f32 = 0.1;
/// Top-2 margin of the reference, relative to the rms, above which the argmax must agree.
const CLEAR_MARGIN: f32 = 0.2;

#[test]
fn logits_follow_the_reference_within_tolerance() {
    let setups = setups("logits_follow_the_reference_within_tolerance");
    for (name, spec) in models() {
        let f = file(&spec);
        let mut reference = CpuModel::load(&f, None).unwrap();
        let want = block_on(reference.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        let rms = (want.data.iter().map(|v| v * v).sum::<f32>() / want.data.len() as f32).sqrt();
        let mut outputs = Vec::new();
        for o in setups.iter().cloned() {
            let mut m = CpuEngine::load(f.clone(), &o).unwrap();
            let got = block_on(m.forward(&Batch::causal(&PROMPT, 0))).unwrap();
            let mut worst = 0f32;
            for (i, (a, b)) in got.data.iter().zip(&want.data).enumerate() {
                let d = (a - b).abs();
                worst = worst.max(d);
                assert!(
                    d <= TINY_TOLERANCE * rms,
                    "{name} {o:?}: logit {} of row {}: {a} vs reference {b}",
                    i % want.vocab,
                    i / want.vocab
                );
            }
            for row in 0..PROMPT.len() {
                let top = runahead_model::top_k_of(want.row(row), 2);
                if top[0].1 - top[1].1 > CLEAR_MARGIN * rms {
                    assert_eq!(
                        got.argmax(row),
                        top[0].0,
                        "{name} {o:?}: argmax of row {row}"
                    );
                }
            }
            eprintln!("{name} {o:?}: largest difference {worst}, rms of the logits {rms}");
            outputs.push((o, got));
        }
        // Every instruction set and thread count gives the same bits.
        for (o, got) in &outputs[1..] {
            assert!(
                got.data
                    .iter()
                    .zip(&outputs[0].1.data)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: {o:?} differs from {:?}",
                outputs[0].0
            );
        }
    }
}

#[test]
fn block_forward_is_bit_identical_to_one_token_at_a_time() {
    let setups = setups("block_forward_is_bit_identical_to_one_token_at_a_time");
    for (name, spec) in models().into_iter().take(2) {
        for o in &setups {
            let mut a = load(&spec, o);
            let block = rows(&block_on(a.forward(&Batch::causal(&PROMPT, 0))).unwrap());
            let single = one_by_one(&mut load(&spec, o), &PROMPT);
            assert_eq!(block, single, "{name} {o:?}: batch invariance");
            // Blocks of every size after a cached prefix.
            for split in 1..PROMPT.len() {
                let mut c = load(&spec, o);
                block_on(c.forward(&Batch::causal(&PROMPT[..split], 0))).unwrap();
                let tail =
                    rows(&block_on(c.forward(&Batch::causal(&PROMPT[split..], split))).unwrap());
                assert_eq!(tail, single[split..], "{name} {o:?}: block after {split}");
            }
        }
    }
}

/// A block asked for the logits of its last rows only (a prompt: its last row) gives exactly
/// those rows of the whole block, and the same cache: the next token's logits do not change.
#[test]
fn a_block_asked_for_its_last_rows_gives_them_and_the_same_cache() {
    let setups = setups("a_block_asked_for_its_last_rows_gives_them_and_the_same_cache");
    let next = [11u32];
    for (name, spec) in models() {
        let f = file(&spec);
        for o in &setups {
            let mut whole = CpuEngine::load(f.clone(), o).unwrap();
            let all = rows(&block_on(whole.forward(&Batch::causal(&PROMPT, 0))).unwrap());
            let after =
                rows(&block_on(whole.forward(&Batch::causal(&next, PROMPT.len()))).unwrap());
            for last in [0, 1, 3, PROMPT.len()] {
                let mut m = CpuEngine::load(f.clone(), o).unwrap();
                let batch = Batch::causal(&PROMPT, 0).logits_for_last(last);
                let got = rows(&block_on(m.forward(&batch)).unwrap());
                assert_eq!(got, all[PROMPT.len() - last..], "{name} {o:?}: last {last}");
                assert_eq!(m.cache_len(), PROMPT.len());
                let got_after =
                    rows(&block_on(m.forward(&Batch::causal(&next, PROMPT.len()))).unwrap());
                assert_eq!(
                    got_after, after,
                    "{name} {o:?}: the cache after last {last}"
                );
                m.truncate(0);
                let ids = block_on(m.forward_argmax(&batch)).unwrap();
                assert_eq!(ids.len(), last, "{name} {o:?}: argmax of the last {last}");
            }
        }
        // The f32 reference honours it too.
        let mut reference = CpuModel::load(&f, None).unwrap();
        let all = rows(&block_on(reference.forward(&Batch::causal(&PROMPT, 0))).unwrap());
        reference.truncate(0);
        let batch = Batch::causal(&PROMPT, 0).logits_for_last(2);
        let got = rows(&block_on(reference.forward(&batch)).unwrap());
        assert_eq!(got, all[PROMPT.len() - 2..], "{name}: reference");
    }
}

/// A block long enough for the element-wise work between the products to be split among the
/// threads (SiLU, the products' transposes) gives the bits of one thread and of one token at a
/// time, on every instruction set (x86's attention widens a KV head's rows once a unit of
/// pairs: three KV heads on two threads are two whole units and a halved one, two on three
/// threads four halves).
#[test]
fn a_long_block_gives_the_same_bits_on_any_thread_count() {
    let long: Vec<u32> = (0..41u32).map(|i| (i * 53 + 9) % 250).collect();
    let three_kv_heads = TinyModel {
        n_embd: 768,
        n_heads: 12,
        n_kv_heads: 3,
        ..TinyModel::llama()
    };
    let test = "a_long_block_gives_the_same_bits_on_any_thread_count";
    let isas: Vec<Isa> = Isa::kernels_for_test(test, &Isa::ALL)
        .into_iter()
        .map(|k| k.isa())
        .collect();
    let specs = models().into_iter().take(2);
    for (name, spec) in specs.chain([("llama, 3 KV heads", three_kv_heads)]) {
        let f = file(&spec);
        for &isa in &isas {
            let run = |threads: usize| {
                let mut m = CpuEngine::load(f.clone(), &options(isa, threads)).unwrap();
                // The block behind a prompt: the cache's chunks and the block's slots both.
                block_on(m.forward(&Batch::causal(&long[..29], 0))).unwrap();
                rows(&block_on(m.forward(&Batch::causal(&long[29..], 29))).unwrap())
            };
            let one = run(1);
            for threads in [2, 3] {
                assert_eq!(run(threads), one, "{name}, {isa:?}: {threads} threads");
            }
        }
        let run = |threads: usize| {
            let mut m = CpuEngine::load(f.clone(), &options(Isa::Scalar, threads)).unwrap();
            rows(&block_on(m.forward(&Batch::causal(&long, 0))).unwrap())
        };
        let one = run(1);
        for threads in [2, 3] {
            assert_eq!(run(threads), one, "{name}: {threads} threads");
        }
        let mut m = CpuEngine::load(f.clone(), &options(Isa::Scalar, 1)).unwrap();
        assert_eq!(
            one_by_one(&mut m, &long),
            one,
            "{name}: one token at a time"
        );
    }
}

#[test]
fn tree_rows_equal_their_chains_and_compact_keeps_a_path() {
    for (name, spec) in models().into_iter().take(2) {
        let o = &options(Isa::Scalar, 1);
        let prefix = &PROMPT[..3];
        // a(10) -> b(11) -> c(12); a -> d(13); e(14)
        let tokens = [10, 11, 12, 13, 14];
        let parents = [None, Some(0), Some(1), Some(0), None];
        let mut m = load(&spec, o);
        block_on(m.forward(&Batch::causal(prefix, 0))).unwrap();
        let tree = block_on(m.forward(&Batch::tree(&tokens, &parents, 3).unwrap())).unwrap();
        let chain = |path: &[u32]| {
            let mut c = load(&spec, o);
            block_on(c.forward(&Batch::causal(prefix, 0))).unwrap();
            rows(&block_on(c.forward(&Batch::causal(path, 3))).unwrap())
        };
        let (abc, ad, e) = (chain(&[10, 11, 12]), chain(&[10, 13]), chain(&[14]));
        assert_eq!(tree.row(0), abc[0], "{name}: a");
        assert_eq!(tree.row(1), abc[1], "{name}: b");
        assert_eq!(tree.row(2), abc[2], "{name}: c");
        assert_eq!(tree.row(3), ad[1], "{name}: d");
        assert_eq!(tree.row(4), e[0], "{name}: e");

        // Keep a -> d, then continue: as if a, d had been decoded as a chain.
        m.compact(3, &[0, 3]).unwrap();
        assert_eq!(m.cache_len(), 5);
        let next = one_by_one(&mut m, &[20, 21]);
        let mut c = load(&spec, o);
        block_on(c.forward(&Batch::causal(
            &[PROMPT[0], PROMPT[1], PROMPT[2], 10, 13],
            0,
        )))
        .unwrap();
        assert_eq!(
            next,
            one_by_one(&mut c, &[20, 21]),
            "{name}: after compaction"
        );

        assert!(m.compact(3, &[1, 0]).is_err());
        assert!(m.compact(3, &[9]).is_err());
        assert!(m.compact(3, &[usize::MAX]).is_err());
        assert!(m.compact(99, &[]).is_err());
    }
}

#[test]
fn truncate_leaves_no_stale_entries() {
    let o = &options(Isa::Scalar, 1);
    let spec = TinyModel::qwen2();
    let mut m = load(&spec, o);
    let reference = one_by_one(&mut m, &PROMPT);
    m.truncate(4);
    block_on(m.forward(&Batch::causal(&[9, 9, 9], 4))).unwrap();
    m.truncate(4);
    assert_eq!(m.cache_len(), 4);
    assert_eq!(one_by_one(&mut m, &PROMPT[4..]), reference[4..]);
}

#[test]
fn bad_batches_and_options_are_typed_errors() {
    let o = &options(Isa::Scalar, 1);
    let mut m = load(&TinyModel::llama(), o);
    let vocab = m.config().vocab_size as u32;
    let err = block_on(m.forward(&Batch::causal(&[vocab], 0))).unwrap_err();
    assert!(matches!(err, ModelError::TokenOutOfRange { .. }), "{err}");
    assert!(matches!(
        block_on(m.forward(&Batch::causal(&[], 0))),
        Err(ModelError::InvalidBatch(_))
    ));
    let long = vec![1u32; m.capacity() + 1];
    let err = block_on(m.forward(&Batch::causal(&long, 0))).unwrap_err();
    assert!(matches!(err, ModelError::ContextFull { .. }), "{err}");
    assert_eq!(
        m.cache_len(),
        0,
        "a failed forward leaves the cache as it was"
    );

    let f = file(&TinyModel::llama());
    let capped = CpuOptions {
        context: Some(8),
        ..o.clone()
    };
    let mut m = CpuEngine::load(f.clone(), &capped).unwrap();
    block_on(m.forward(&Batch::causal(&[1; 8], 0))).unwrap();
    assert!(matches!(
        block_on(m.forward(&Batch::causal(&[1], 8))),
        Err(ModelError::ContextFull {
            needed: 9,
            context: 8
        })
    ));
    assert!(CpuEngine::load(
        f.clone(),
        &CpuOptions {
            context: Some(0),
            ..o.clone()
        }
    )
    .is_err());
    assert!(CpuEngine::load(
        f,
        &CpuOptions {
            threads: Some(0),
            ..o.clone()
        }
    )
    .is_err());
}

#[test]
fn unsupported_tensor_type_is_refused() {
    // IQ4_NL has Q4_0's block size (32 elements in 18 bytes), so the file stays consistent.
    let mut bytes = TinyModel::llama().to_gguf();
    let name = b"blk.0.attn_q.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let ty_at = at + 4 + 16;
    assert_eq!(
        bytes[ty_at..ty_at + 4],
        2u32.to_le_bytes(),
        "attn_q is Q4_0"
    );
    bytes[ty_at..ty_at + 4].copy_from_slice(&20u32.to_le_bytes());
    let f = Arc::new(GgufFile::from_bytes(bytes).unwrap());
    let err = CpuEngine::load(f, &options(Isa::Scalar, 1)).err().unwrap();
    assert!(
        matches!(err, ModelError::UnsupportedTensorType { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("IQ4_NL"), "{err}");
}

#[test]
fn a_nan_weight_gives_no_usable_logit() {
    let bytes = TinyModel::llama().to_gguf_with_nan("output_norm.weight");
    let f = Arc::new(GgufFile::from_bytes(bytes).unwrap());
    for o in setups("a_nan_weight_gives_no_usable_logit") {
        let mut m = CpuEngine::load(f.clone(), &o).unwrap();
        let err = block_on(m.forward_argmax(&Batch::causal(&[3, 4], 0))).unwrap_err();
        assert!(
            matches!(err, ModelError::NoUsableLogit { row: 0 }),
            "{o:?}: {err}"
        );
    }
}

/// Behind a cache longer than attention's chunks of widened keys and values (64 slots), blocks
/// whose entries straddle a chunk's end give the bits of one token at a time, and of every
/// instruction set (the scalar kernels read the f16 cache whole, never widened nor chunked),
/// causal and tree-masked.
#[test]
fn attention_across_chunks_keeps_the_bits() {
    let spec = TinyModel::llama();
    let prompt: Vec<u32> = (0..140u32).map(|i| 3 + i * 37 % 200).collect();
    // a(10) -> b(11) -> c(12); a -> d(13); e(14)
    let tokens = [10, 11, 12, 13, 14];
    let parents = [None, Some(0), Some(1), Some(0), None];
    let mut first: Option<Vec<Vec<Vec<f32>>>> = None;
    let setups = setups("attention_across_chunks_keeps_the_bits");
    for o in &setups {
        let mut got = Vec::new();
        for prefix in [60, 126] {
            let mut m = load(&spec, o);
            block_on(m.forward(&Batch::causal(&prompt[..prefix], 0))).unwrap();
            let block = rows(
                &block_on(m.forward(&Batch::causal(&prompt[prefix..prefix + 8], prefix))).unwrap(),
            );
            let mut c = load(&spec, o);
            block_on(c.forward(&Batch::causal(&prompt[..prefix], 0))).unwrap();
            let single = one_by_one(&mut c, &prompt[prefix..prefix + 8]);
            assert!(block == single, "{o:?}: block after {prefix}");
            let mut t = load(&spec, o);
            block_on(t.forward(&Batch::causal(&prompt[..prefix], 0))).unwrap();
            let tree = rows(
                &block_on(t.forward(&Batch::tree(&tokens, &parents, prefix).unwrap())).unwrap(),
            );
            let mut chain = load(&spec, o);
            block_on(chain.forward(&Batch::causal(&prompt[..prefix], 0))).unwrap();
            let abc =
                rows(&block_on(chain.forward(&Batch::causal(&[10, 11, 12], prefix))).unwrap());
            assert!(tree[..3] == abc[..], "{o:?}: tree after {prefix}");
            got.extend([block, tree]);
        }
        match &first {
            None => first = Some(got),
            Some(want) => assert!(&got == want, "{o:?} differs from {:?}", setups[0]),
        }
    }
}

/// 8-bit activations against exact f32 over the 208 positions of a long prompt, relative to
/// the rms of the reference's logits (12.1): the largest difference of any logit (measured 1.5
/// with window 8, 0.12 of it; 0.58 with window 100), and the rms of all differences (measured
/// 0.063 and 0.056, 0.005 of it). Without the window, the logits' rms difference from the
/// reference's is 0.1 to 3.7 a row.
const LONG_TOLERANCE: f32 = 0.2;
const LONG_RMS_TOLERANCE: f32 = 0.01;

/// Gemma3's sliding-window layer (its window 8, and 100: longer than attention's chunks of 64
/// slots, so that a chunk of the cache is seen whole by some queries, in part by others, not at
/// all by the rest): the logits of a long prompt follow the reference, which ignoring the
/// window would leave by whole units; its rows are the bits of a block behind its prefix and
/// of one token at a time, a tree's rows the bits of their chains, on every instruction set
/// and thread count.
#[test]
fn sliding_window_follows_the_reference_and_keeps_the_bits() {
    let prompt: Vec<u32> = (0..208u32).map(|i| 3 + i * 37 % 200).collect();
    let tokens = [10, 11, 12, 13, 14];
    let parents = [None, Some(0), Some(1), Some(0), None];
    let setups = setups("sliding_window_follows_the_reference_and_keeps_the_bits");
    for window in [8, 100] {
        let f = gemma3_with_window(window);
        let mut reference = CpuModel::load(&f, None).unwrap();
        let want = block_on(reference.forward(&Batch::causal(&prompt, 0))).unwrap();
        let rms = (want.data.iter().map(|v| v * v).sum::<f32>() / want.data.len() as f32).sqrt();
        let mut first: Option<Vec<Vec<Vec<f32>>>> = None;
        for o in &setups {
            let mut m = CpuEngine::load(f.clone(), o).unwrap();
            let all = block_on(m.forward(&Batch::causal(&prompt, 0))).unwrap();
            let (mut worst, mut sum_sq) = (0f32, 0f64);
            for (a, b) in all.data.iter().zip(&want.data) {
                worst = worst.max((a - b).abs());
                sum_sq += f64::from((a - b) * (a - b));
            }
            let diff_rms = (sum_sq / all.data.len() as f64).sqrt() as f32;
            let what = format!("window {window} {o:?}: largest difference {worst}, rms {diff_rms}");
            eprintln!("{what} (the logits' rms {rms})");
            assert!(
                worst <= LONG_TOLERANCE * rms && diff_rms <= LONG_RMS_TOLERANCE * rms,
                "{what}: too far from the reference (the logits' rms {rms})"
            );
            let all = rows(&all);
            let mut got = vec![];
            // Longest first: each truncation leaves the prompt's entries before it.
            for prefix in [200, 126, 60] {
                let (block, want) = (&prompt[prefix..prefix + 8], &all[prefix..prefix + 8]);
                m.truncate(prefix);
                let rows_b = rows(&block_on(m.forward(&Batch::causal(block, prefix))).unwrap());
                m.truncate(prefix);
                let single = one_by_one(&mut m, block);
                assert!(
                    rows_b == want && single == want,
                    "window {window} {o:?}: after {prefix}"
                );
                m.truncate(prefix);
                let tree = rows(
                    &block_on(m.forward(&Batch::tree(&tokens, &parents, prefix).unwrap())).unwrap(),
                );
                m.truncate(prefix);
                let abc =
                    rows(&block_on(m.forward(&Batch::causal(&[10, 11, 12], prefix))).unwrap());
                assert!(
                    tree[..3] == abc[..],
                    "window {window} {o:?}: tree after {prefix}"
                );
                got.push(tree);
            }
            got.push(all);
            match &first {
                None => first = Some(got),
                Some(want) => assert!(
                    &got == want,
                    "window {window} {o:?} differs from {:?}",
                    setups[0]
                ),
            }
        }
    }
}
