//! 50 generations on one model loaded on the GPU do not grow its memory: the engine's device
//! resources (wgpu's live buffers, bind groups, encoders, allocations and buffer bytes) are the
//! same after 50 generations as after 10, and so is the process's resident memory on a device
//! whose driver does not leak. Lavapipe (Mesa's CPU Vulkan, CI's device) leaks host memory on
//! dispatches of some pipelines (several MB per forward with a multi-token matmul tile, none
//! through wgpu's resources): there the growth is printed, not asserted. Its own test binary,
//! so no other test's allocations move the numbers.

mod common;

use std::ops::ControlFlow;

use common::tiny_ctx;
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::testing::{resident_kib, TinyModel};
use runahead_speculate::{generate_with, Depth, GenerateOptions, SamplingParams, SuffixDrafter};

#[test]
fn fifty_generations_on_the_gpu_do_not_grow_memory() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut model = GpuModel::load(&tiny_ctx(), &file, Some(128)).unwrap();
    // 512 tokens of global index: full after the first generations.
    let mut drafter = SuffixDrafter::new(512);
    let opts = GenerateOptions {
        max_tokens: 16,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    };
    let counters = || {
        let c = tiny_ctx().device.get_internal_counters();
        let h = c.hal;
        [
            ("buffers", h.buffers.read()),
            ("bind groups", h.bind_groups.read()),
            ("compute pipelines", h.compute_pipelines.read()),
            ("memory allocations", h.memory_allocations.read()),
            ("buffer bytes", h.buffer_memory.read()),
        ]
    };
    let mut after_warmup = (0, counters());
    for i in 0..50u32 {
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
        assert_eq!(g.tokens.len(), 16);
        if i == 9 {
            after_warmup = (resident_kib(), counters());
        }
    }
    let (rss_before, counted_before) = after_warmup;
    assert_eq!(
        counters(),
        counted_before,
        "wgpu resources after 50 generations vs 10"
    );
    let rss = resident_kib();
    let growth = rss.saturating_sub(rss_before);
    let adapter = &tiny_ctx().adapter_info;
    println!(
        "resident memory: {rss_before} KiB after 10 generations, {rss} KiB after 50 ({adapter})"
    );
    if !adapter.contains("llvmpipe") {
        assert!(
            growth <= 4096,
            "resident memory grew by {growth} KiB from 10 to 50 generations"
        );
    }
}
