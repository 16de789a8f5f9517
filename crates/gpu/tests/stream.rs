//! `GpuModel::stream`: a model built from its header, its weights written as the file's bytes
//! arrive in chunks of any size, computes bit for bit what `GpuModel::load` of the whole file
//! computes, on every architecture, with matrices split across bindings at rows that do not
//! start on a word (joined on the host), and with mixed block formats re-encoded as Q8_0; it
//! holds only the tensors it must see whole; and a stream that skips a tensor's bytes or misses
//! some is an error that names what is missing (the header's bytes may be skipped).

mod common;

use common::tiny_ctx;
use pollster::block_on;
use runahead_gguf::{GgmlType, Gguf, GgufFile};
use runahead_gpu::{GpuContext, GpuModel, WeightStream};
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, LanguageModel};

const PROMPT: [u32; 6] = [5, 77, 120, 3, 260, 42];

/// Chunk sizes taken in turn: single bytes and words' worth of bytes that split every word
/// boundary, and large chunks that cover whole tensors.
const CHUNKS: [usize; 8] = [1, 2, 3, 5, 4093, 7, 65_537, 6];

/// A stream given `bytes` (the file's, or its first part) in chunks of the sizes `chunks`
/// cycles through.
fn stream_in(ctx: &GpuContext, file_len: usize, bytes: &[u8], chunks: &[usize]) -> WeightStream {
    let header = Gguf::parse_prefix(bytes, file_len as u64).unwrap();
    let mut stream = GpuModel::stream(ctx, header, Some(64)).unwrap();
    let mut offset = 0;
    for &n in chunks.iter().cycle() {
        if offset == bytes.len() {
            break;
        }
        let end = (offset + n).min(bytes.len());
        if stream.write(offset as u64, &bytes[offset..end]).unwrap() {
            block_on(stream.settle()).unwrap();
        }
        offset = end;
    }
    stream
}

/// The prefill logits and one decoding step's, loaded whole and streamed.
fn both(ctx: &GpuContext, bytes: &[u8]) -> [(Vec<f32>, Vec<f32>); 2] {
    let run = |mut model: GpuModel| {
        let prefill = block_on(model.forward(&Batch::causal(&PROMPT, 0))).unwrap();
        let step = block_on(model.forward(&Batch::causal(&[17], PROMPT.len()))).unwrap();
        (prefill.data, step.data)
    };
    let file = GgufFile::from_bytes(bytes.to_vec()).unwrap();
    let loaded = run(GpuModel::load(ctx, &file, Some(64)).unwrap());
    let streamed = run(stream_in(ctx, bytes.len(), bytes, &CHUNKS)
        .finish()
        .unwrap());
    [loaded, streamed]
}

/// Bytes of the file's 1-D tensors (norms, biases, RoPE factors): all a stream of a model whose
/// matrices go to the device as stored needs to hold.
fn vector_bytes(bytes: &[u8]) -> u64 {
    let header = Gguf::parse(bytes).unwrap();
    header
        .tensors
        .iter()
        .filter(|t| t.shape.len() == 1)
        .map(|t| t.size)
        .sum()
}

#[test]
fn every_architecture_streamed_equals_loaded() {
    let ctx = tiny_ctx();
    let models = [
        TinyModel::llama(),
        TinyModel::qwen2(),
        TinyModel::llama3(),
        TinyModel::qwen3(),
        TinyModel::phi3(),
        TinyModel::gemma3(),
    ];
    for spec in models {
        let bytes = spec.to_gguf();
        let [loaded, streamed] = both(&ctx, &bytes);
        assert_eq!(loaded, streamed, "{}", spec.arch_name());
        let stream = stream_in(&ctx, bytes.len(), &bytes, &[65_536]);
        assert!(
            stream.peak_held_bytes() <= vector_bytes(&bytes),
            "{}: held {} bytes, more than its vectors' {}",
            spec.arch_name(),
            stream.peak_held_bytes(),
            vector_bytes(&bytes)
        );
        assert!(stream.finish().is_ok());
    }
}

#[test]
fn pieces_that_start_inside_a_word_and_widened_formats() {
    // Q6_K rows of 768 values are 630 bytes; pieces of 625 rows put the k matrix (rows
    // 768..1152 of the q/k/v stack) at byte 143 * 630 of the second piece, inside a word, so
    // q/k/v are joined on the host.
    let mut small = tiny_ctx();
    small.max_binding_size = 630 * 625 + 3;
    let q6k = TinyModel {
        formats: &[GgmlType::Q6_K],
        n_embd: 768,
        n_ff: 256,
        ..TinyModel::llama()
    };
    let bytes = q6k.to_gguf();
    let [loaded, streamed] = both(&small, &bytes);
    assert_eq!(loaded, streamed, "Q6_K in pieces");
    // Each output row is its own row's product: the pieces change no value.
    let [whole, _] = both(&tiny_ctx(), &bytes);
    assert_eq!(loaded, whole, "Q6_K in pieces against one piece");
    assert!(
        stream_in(&small, bytes.len(), &bytes, &[4096]).peak_held_bytes() > vector_bytes(&bytes)
    );

    // Q4_0 and Q8_0 in one q/k/v or gate/up stack go up as one Q8_0 matrix.
    let mixed = TinyModel {
        formats: &[GgmlType::Q4_0, GgmlType::Q8_0],
        ..TinyModel::qwen2()
    };
    let bytes = mixed.to_gguf();
    let [loaded, streamed] = both(&tiny_ctx(), &bytes);
    assert_eq!(loaded, streamed, "Q4_0 and Q8_0 widened");
}

#[test]
fn a_stream_that_skips_or_ends_early_is_an_error() {
    let ctx = tiny_ctx();
    let bytes = TinyModel::llama().to_gguf();
    let header = Gguf::parse(&bytes).unwrap();
    // The header's bytes may be skipped (they carry no weight), a tensor's may not.
    let data = header.data_offset as usize;
    let mut stream = GpuModel::stream(&ctx, header.clone(), Some(64)).unwrap();
    stream.write(0, &bytes[..100]).unwrap();
    stream.write(data as u64, &bytes[data..data + 100]).unwrap();
    let at = data + 200;
    let skipped = stream
        .write(at as u64, &bytes[at..at + 100])
        .unwrap_err()
        .to_string();
    assert!(skipped.contains(&format!("at {at}")), "{skipped}");
    let mut from_data = GpuModel::stream(&ctx, header.clone(), Some(64)).unwrap();
    from_data.write(data as u64, &bytes[data..]).unwrap();
    let mut model = from_data.finish().unwrap();
    let logits = block_on(model.forward(&Batch::causal(&PROMPT, 0))).unwrap();
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let mut loaded = GpuModel::load(&ctx, &file, Some(64)).unwrap();
    let want = block_on(loaded.forward(&Batch::causal(&PROMPT, 0))).unwrap();
    assert_eq!(logits.data, want.data, "streamed from the tensor data on");

    // Cut inside the last tensor: the error names it.
    let last = header
        .tensors
        .iter()
        .max_by_key(|t| t.offset)
        .unwrap()
        .clone();
    let cut = (header.data_offset + last.offset + last.size / 2) as usize;
    let stream = stream_in(&ctx, bytes.len(), &bytes[..cut], &[4096]);
    let err = stream
        .finish()
        .err()
        .expect("an incomplete stream")
        .to_string();
    assert!(err.contains(&last.name), "{err}");
}
