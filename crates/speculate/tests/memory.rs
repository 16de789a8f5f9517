//! 100 generations on one loaded model do not grow the process's memory: once the first
//! generations have warmed up (the suffix drafter's global index is bounded and full by then),
//! resident memory after 100 stays where it was after 20. Its own test binary, so no other
//! test's allocations move the number.

use std::ops::ControlFlow;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::{resident_kib, TinyModel};
use runahead_model::CpuModel;
use runahead_speculate::{generate_with, Depth, GenerateOptions, SamplingParams, SuffixDrafter};

#[test]
fn a_hundred_generations_do_not_grow_memory() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut model = CpuModel::load(&file, None).unwrap();
    // 1,024 tokens of global index: full after the first ~16 generations of 64 tokens.
    let mut drafter = SuffixDrafter::new(1024);
    let opts = GenerateOptions {
        max_tokens: 64,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    };
    let mut after_warmup = 0;
    for i in 0..100u32 {
        let prompt: Vec<u32> = (0..20).map(|j| 3 + (i * 13 + j * 7) % 200).collect();
        let g = block_on(generate_with(
            &mut model,
            Some(&mut drafter),
            &prompt,
            &opts,
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ))
        .unwrap();
        assert_eq!(g.tokens.len(), 64);
        if i == 19 {
            after_warmup = resident_kib();
        }
    }
    let after = resident_kib();
    // Allocator noise is a few pages; a leak of one buffer per generation would be far more.
    assert!(
        after <= after_warmup + 2048,
        "resident memory grew from {after_warmup} KiB after 20 generations to {after} KiB after 100"
    );
}
