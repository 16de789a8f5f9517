//! Properties of the CPU reference engine on generated models: batch invariance, tree masks,
//! cache truncation and compaction, and typed errors.

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, Logits, ModelError};

fn load(spec: &TinyModel) -> CpuModel {
    let file = GgufFile::from_bytes(spec.to_gguf()).unwrap();
    CpuModel::load(&file, None).unwrap()
}

fn models() -> Vec<(&'static str, TinyModel)> {
    vec![
        ("llama", TinyModel::llama()),
        ("qwen2", TinyModel::qwen2()),
        ("llama, rope_freqs", TinyModel::llama3()),
        ("qwen3", TinyModel::qwen3()),
        ("gemma3", TinyModel::gemma3()),
        ("phi3", TinyModel::phi3()),
    ]
}

const PROMPT: [u32; 7] = [5, 77, 120, 3, 260, 42, 199];

/// Row-by-row forward of `tokens` after the current cache.
fn one_by_one(m: &mut CpuModel, tokens: &[u32]) -> Vec<Vec<f32>> {
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

fn rows(l: &Logits) -> Vec<Vec<f32>> {
    (0..l.n_rows()).map(|i| l.row(i).to_vec()).collect()
}

#[test]
fn logits_are_finite_and_depend_on_the_input() {
    for (name, spec) in models() {
        let mut m = load(&spec);
        let l = block_on(m.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        assert_eq!(l.n_rows(), PROMPT.len());
        assert!(l.data.iter().all(|v| v.is_finite()), "{name}");
        assert_ne!(
            l.row(5),
            l.row(6),
            "{name}: different contexts give different logits"
        );
        let spread = l.row(6).iter().fold(0f32, |a, &v| a.max(v))
            - l.row(6).iter().fold(0f32, |a, &v| a.min(v));
        assert!(
            spread > 0.1,
            "{name}: logits are nearly constant ({spread})"
        );
    }
}

#[test]
fn block_forward_is_bit_identical_to_one_token_at_a_time() {
    for (name, spec) in models() {
        let mut a = load(&spec);
        let block = rows(&block_on(a.forward(&Batch::causal(&PROMPT, 0))).unwrap());
        let mut b = load(&spec);
        let single = one_by_one(&mut b, &PROMPT);
        assert_eq!(block, single, "{name}: batch invariance");
        // And a block after a cached prefix.
        let mut c = load(&spec);
        block_on(c.forward(&Batch::causal(&PROMPT[..3], 0))).unwrap();
        let tail = rows(&block_on(c.forward(&Batch::causal(&PROMPT[3..], 3))).unwrap());
        assert_eq!(tail, single[3..], "{name}: block after a prefix");
    }
}

#[test]
fn truncate_leaves_no_stale_entries() {
    for (name, spec) in models() {
        let mut m = load(&spec);
        let reference = one_by_one(&mut m, &PROMPT);
        // Write a wrong continuation, roll back, and recompute the right one.
        m.truncate(4);
        block_on(m.forward(&Batch::causal(&[9, 9, 9], 4))).unwrap();
        m.truncate(4);
        assert_eq!(m.cache_len(), 4);
        let again = one_by_one(&mut m, &PROMPT[4..]);
        assert_eq!(again, reference[4..], "{name}");
    }
}

#[test]
fn tree_rows_equal_their_chains_and_compact_keeps_a_path() {
    for (name, spec) in models() {
        let prefix = &PROMPT[..3];
        // Tree after the prefix:   a(10) -> b(11) -> c(12)
        //                          a(10) -> d(13)
        //                          e(14)
        let tokens = [10, 11, 12, 13, 14];
        let parents = [None, Some(0), Some(1), Some(0), None];
        let mut m = load(&spec);
        block_on(m.forward(&Batch::causal(prefix, 0))).unwrap();
        let tree = block_on(m.forward(&Batch::tree(&tokens, &parents, 3).unwrap())).unwrap();

        let chain = |path: &[u32]| {
            let mut c = load(&spec);
            block_on(c.forward(&Batch::causal(prefix, 0))).unwrap();
            rows(&block_on(c.forward(&Batch::causal(path, 3))).unwrap())
        };
        let abc = chain(&[10, 11, 12]);
        let ad = chain(&[10, 13]);
        let e = chain(&[14]);
        assert_eq!(tree.row(0), abc[0], "{name}: a");
        assert_eq!(tree.row(1), abc[1], "{name}: b");
        assert_eq!(tree.row(2), abc[2], "{name}: c");
        assert_eq!(tree.row(3), ad[1], "{name}: d");
        assert_eq!(tree.row(4), e[0], "{name}: e");

        // Keep the path a -> d, then continue: identical to having decoded a, d as a chain.
        m.compact(3, &[0, 3]).unwrap();
        assert_eq!(m.cache_len(), 5);
        let next = one_by_one(&mut m, &[20, 21]);
        let mut c = load(&spec);
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
    }
}

#[test]
fn bad_batches_are_typed_errors() {
    let mut m = load(&TinyModel::llama());
    let vocab = m.config().vocab_size as u32;
    let err = block_on(m.forward(&Batch::causal(&[vocab], 0))).unwrap_err();
    assert!(matches!(err, ModelError::TokenOutOfRange { .. }), "{err}");
    assert!(matches!(
        block_on(m.forward(&Batch::causal(&[], 0))),
        Err(ModelError::InvalidBatch(_))
    ));
    let cap = m.capacity();
    let long = vec![1u32; cap + 1];
    let err = block_on(m.forward(&Batch::causal(&long, 0))).unwrap_err();
    assert!(matches!(err, ModelError::ContextFull { .. }), "{err}");
    assert_eq!(
        m.cache_len(),
        0,
        "a failed forward leaves the cache as it was"
    );
}

#[test]
fn context_option_caps_the_cache() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut m = CpuModel::load(&file, Some(8)).unwrap();
    assert_eq!(m.capacity(), 8);
    block_on(m.forward(&Batch::causal(&[1; 8], 0))).unwrap();
    let err = block_on(m.forward(&Batch::causal(&[1], 8))).unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::ContextFull {
                needed: 9,
                context: 8
            }
        ),
        "{err}"
    );
    assert!(CpuModel::load(&file, Some(0)).is_err());
}

#[test]
fn unsupported_architecture_and_tensor_type() {
    let mut bytes = TinyModel::llama().to_gguf();
    let at = bytes.windows(5).position(|w| w == b"llama").unwrap();
    bytes[at..at + 5].copy_from_slice(b"mamba");
    let file = GgufFile::from_bytes(bytes).unwrap();
    let err = CpuModel::load(&file, None).err().unwrap();
    assert!(
        matches!(err, ModelError::UnsupportedArchitecture(ref a) if a == "mamba"),
        "{err}"
    );
}

#[test]
fn known_but_unsupported_tensor_type_is_refused() {
    // IQ4_NL has Q4_0's block size (32 elements in 18 bytes), so the file stays consistent.
    let mut bytes = TinyModel::llama().to_gguf();
    let name = b"blk.0.attn_q.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let ty_at = at + 4 + 16;
    assert_eq!(
        bytes[ty_at..ty_at + 4],
        2u32.to_le_bytes(),
        "attn_q is Q4_0 in the tiny model"
    );
    bytes[ty_at..ty_at + 4].copy_from_slice(&20u32.to_le_bytes());
    let file = GgufFile::from_bytes(bytes).unwrap();
    let err = CpuModel::load(&file, None).err().unwrap();
    assert!(
        matches!(err, ModelError::UnsupportedTensorType { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("IQ4_NL"), "{err}");
}
