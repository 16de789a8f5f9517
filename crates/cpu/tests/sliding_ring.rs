//! A sliding-window layer that keeps only a ring of its entries: the tiny gemma3 (layer 0
//! sliding with a window of 8, layer 1 global) with a context of 1,024, so layer 0 keeps a ring
//! of 320 slots and runs past its wrap twice. Against the f32 reference, which keeps every
//! entry: a long prompt, a tree and its compaction across the wrap, truncation down to the
//! floor and past it, and greedy speculative decoding and cache reuse past the ring.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;

use common::random_trees::RandomTrees;
use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions, Isa};
use runahead_gguf::GgufFile;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{ring_slots, Batch, CpuModel, LanguageModel, Logits};
use runahead_speculate::{
    generate_cached, Depth, Drafter, GenerateOptions, Generation, KvTokens, ModelDrafter,
    NgramDrafter, SamplingParams,
};

const WINDOW: usize = 8;
const RING: usize = 320;
const CONTEXT: usize = 1024;

fn file() -> Arc<GgufFile> {
    let spec = TinyModel {
        context: CONTEXT,
        ..TinyModel::gemma3()
    };
    Arc::new(GgufFile::from_bytes(spec.to_gguf()).unwrap())
}

fn rows(l: &Logits) -> Vec<Vec<f32>> {
    (0..l.n_rows()).map(|i| l.row(i).to_vec()).collect()
}

fn forward<M: LanguageModel>(m: &mut M, batch: &Batch) -> Vec<Vec<f32>> {
    rows(&block_on(m.forward(batch)).unwrap())
}

fn one_by_one<M: LanguageModel>(m: &mut M, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    for &t in tokens {
        let pos = m.cache_len();
        out.extend(forward(m, &Batch::causal(&[t], pos)));
    }
    out
}

fn prompt(len: u32) -> Vec<u32> {
    (0..len).map(|i| 3 + i * 37 % 200).collect()
}

/// Within the tolerance of the engine's 8-bit activations over a long prompt (as in
/// tests/engine.rs): the largest difference from the reference's logits at most 0.2 of their
/// rms, the rms of all differences at most 0.01 of it (a ring read at the wrong slots, or a
/// window ignored, moves the logits of a row by 0.1 to 3.7 rms).
fn assert_close(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
    let (got, want) = (got.concat(), want.concat());
    assert_eq!(got.len(), want.len(), "{what}");
    let rms = (want.iter().map(|v| v * v).sum::<f32>() / want.len() as f32).sqrt();
    let pairs = || got.iter().zip(&want);
    let worst = pairs().fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    let sum_sq: f32 = pairs().map(|(a, b)| (a - b) * (a - b)).sum();
    let diff_rms = (sum_sq / want.len() as f32).sqrt();
    assert!(
        worst <= 0.2 * rms && diff_rms <= 0.01 * rms,
        "{what}: largest difference {worst}, rms {diff_rms}, the logits' rms {rms}"
    );
}

#[test]
fn a_ring_follows_the_reference_through_trees_compaction_and_truncation() {
    assert_eq!(ring_slots(WINDOW), RING);
    let f = file();
    let prompt = prompt(700);
    let mut reference = CpuModel::load(&f, None).unwrap();
    let want = forward(&mut reference, &Batch::causal(&prompt, 0));
    for o in [(Isa::Scalar, 1), (Isa::best(), 2)] {
        let o = CpuOptions {
            threads: Some(o.1),
            isa: Some(o.0),
            ..CpuOptions::default()
        };
        let mut m = CpuEngine::load(f.clone(), &o).unwrap();
        let kv_row = 4 * m.config().kv_dim();
        // In parts of 256 rows: three, past the ring's wrap twice.
        let all = forward(&mut m, &Batch::causal(&prompt, 0));
        assert_close(&all, &want, &format!("{o:?}"));
        // Layer 0 holds its ring, layer 1 the entries (grown by half at a time).
        let global = m.kv_cache_bytes() / kv_row - RING;
        assert!((700..=CONTEXT).contains(&global), "{o:?}: {global} rows");

        // A block's rows do not depend on the block: truncated back, one at a time.
        m.truncate(650);
        assert_eq!(m.cache_len(), 650);
        assert!(
            one_by_one(&mut m, &prompt[650..660]) == all[650..660],
            "{o:?}"
        );

        // A tree whose entries straddle the ring's wrap (indices 638..643, slots 318..3): its
        // rows are its chains', and the path kept by compaction continues as that chain.
        let tokens = [10, 11, 12, 13, 14];
        let parents = [None, Some(0), Some(1), Some(0), None];
        let base = 2 * RING - 2;
        m.truncate(base);
        let tree = forward(&mut m, &Batch::tree(&tokens, &parents, base).unwrap());
        m.truncate(base);
        let abc = forward(&mut m, &Batch::causal(&[10, 11, 12], base));
        m.truncate(base);
        let ad = forward(&mut m, &Batch::causal(&[10, 13], base));
        assert!(tree[..3] == abc[..] && tree[3] == ad[1], "{o:?}: tree rows");
        m.truncate(base);
        forward(&mut m, &Batch::tree(&tokens, &parents, base).unwrap());
        m.compact(base, &[0, 3]).unwrap();
        let next = one_by_one(&mut m, &[20, 21]);
        let mut path = prompt[..base].to_vec();
        path.extend([10, 13, 20, 21]);
        reference.truncate(0);
        let want_next = forward(&mut reference, &Batch::causal(&path, 0));
        assert_close(
            &next,
            &want_next[base + 2..],
            &format!("{o:?}: after compaction"),
        );
        let mut fresh = CpuEngine::load(f.clone(), &o).unwrap();
        let fresh_rows = forward(&mut fresh, &Batch::causal(&path, 0));
        assert!(
            next[..] == fresh_rows[base + 2..],
            "{o:?}: after compaction"
        );

        // The ring holds indices 380.. (700 written): a query at 387 sees 380..=387.
        let floor = m.truncate_floor();
        assert_eq!(floor, 700 + WINDOW - RING - 1);
        m.truncate(floor);
        assert_eq!(m.cache_len(), floor);
        let after = one_by_one(&mut m, &prompt[floor..floor + 3]);
        assert!(after == all[floor..floor + 3], "{o:?}: at the floor");
        // Below the floor: emptied, and computed again from the start.
        m.truncate(floor - 1);
        assert_eq!((m.cache_len(), m.truncate_floor()), (0, 0));
        let again = forward(&mut m, &Batch::causal(&prompt[..floor + 3], 0));
        assert!(
            again[floor - 8..] == all[floor - 8..floor + 3],
            "{o:?}: again"
        );
    }
}

fn generate(
    m: &mut CpuEngine,
    d: Option<&mut dyn Drafter>,
    cached: &mut KvTokens,
    prompt: &[u32],
) -> Generation {
    let o = GenerateOptions {
        max_tokens: 24,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    };
    let done = block_on(generate_cached(
        m,
        d,
        cached,
        prompt,
        &o,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ));
    done.unwrap()
}

/// Greedy speculative decoding (trees, a draft model on the same engine, n-grams) gives what
/// plain decoding gives past the ring's wrap, and a follow-up prompt that shares less than the
/// ring holds is computed again instead of reusing a cache the ring no longer holds.
#[test]
fn speculative_decoding_and_cache_reuse_past_the_ring() {
    let f = file();
    let o = CpuOptions {
        threads: Some(2),
        ..CpuOptions::default()
    };
    let engine = || CpuEngine::load(f.clone(), &o).unwrap();
    let mut m = engine();
    let vocab = m.config().vocab_size;
    let prompt = prompt(330);
    let plain = generate(&mut m, None, &mut KvTokens::default(), &prompt);
    let mut drafters: Vec<Box<dyn Drafter>> = vec![
        Box::new(RandomTrees(TestRng::new(5), vocab)),
        Box::new(ModelDrafter::new(engine())),
        Box::new(NgramDrafter::default()),
    ];
    for d in &mut drafters {
        let out = generate(&mut m, Some(d.as_mut()), &mut KvTokens::default(), &prompt);
        assert_eq!(out.tokens, plain.tokens, "{}", d.name());
    }

    // A follow-up that keeps the first turn whole reuses it; one that shares only its first
    // 40 tokens (behind the ring's floor) is computed again; both as computed afresh.
    let mut cached = KvTokens::default();
    generate(&mut m, None, &mut cached, &prompt);
    let mut longer = cached.tokens().to_vec();
    longer.extend([5, 6, 7]);
    let mut shorter = prompt[..40].to_vec();
    shorter.extend(prompt[200..330].iter().rev());
    for (what, next, reused) in [("longer", &longer, true), ("shorter", &shorter, false)] {
        let out = generate(&mut m, None, &mut cached, next);
        assert_eq!(out.stats.cached_tokens > 0, reused, "{what}");
        let fresh = generate(&mut engine(), None, &mut KvTokens::default(), next);
        assert_eq!(out.tokens, fresh.tokens, "{what}");
    }
}

/// Gemma-3-270M (`scripts/fetch-models.sh gemma3`: window 512, five sliding layers to a global
/// one) at a context of 2,048, where its sliding layers keep rings of 768 slots: a prompt of
/// about 1,000 tokens wraps them, and greedy speculative decoding gives what plain decoding
/// gives. Ignored: the file is not part of the default fetch.
#[test]
#[ignore = "needs models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-models.sh gemma3)"]
fn gemma3_270m_speculative_equals_plain_past_its_rings() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/gemma-3-270m-q4_k_m.gguf");
    let file =
        Arc::new(GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}: {}", path.display())));
    let tok = runahead_model::Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let text = "Speculative decoding drafts a few tokens and verifies them in one forward pass. ";
    let prompt: Vec<u32> = tok
        .encode(&text.repeat(70))
        .unwrap()
        .into_iter()
        .take(1000)
        .collect();
    assert!(prompt.len() > ring_slots(512), "{} tokens", prompt.len());
    let o = CpuOptions {
        context: Some(2048),
        ..CpuOptions::default()
    };
    let mut m = CpuEngine::load(file.clone(), &o).unwrap();
    let plain = generate(&mut m, None, &mut KvTokens::default(), &prompt);
    assert!(m.truncate_floor() > 0, "the rings wrapped");
    let mut ngram = NgramDrafter::default();
    let out = generate(&mut m, Some(&mut ngram), &mut KvTokens::default(), &prompt);
    assert_eq!(out.tokens, plain.tokens);
    assert!(out.stats.accepted > 0, "some drafts accepted");
    let mut draft = ModelDrafter::new(CpuEngine::load(file, &o).unwrap());
    let out = generate(&mut m, Some(&mut draft), &mut KvTokens::default(), &prompt);
    assert_eq!(out.tokens, plain.tokens, "a draft model on the same engine");
}
