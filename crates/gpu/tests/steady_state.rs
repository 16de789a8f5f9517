//! A forward in the steady state creates no device buffer: its inputs go through the upload
//! buffer made at load (no `Queue::write_buffer`, which would create a staging buffer each
//! call), bind groups and pipelines are recorded once, and wgpu's live resources (its
//! `counters` dev-feature) stay the same across forwards of every kind and block size. Its own
//! test binary, so no other test's resources move the counters.

mod common;

use common::tiny_ctx;
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, LanguageModel};

fn live(ctx: &runahead_gpu::GpuContext) -> [(&'static str, isize); 6] {
    let h = ctx.device.get_internal_counters().hal;
    [
        ("buffers", h.buffers.read()),
        ("buffer bytes", h.buffer_memory.read()),
        ("bind groups", h.bind_groups.read()),
        ("compute pipelines", h.compute_pipelines.read()),
        ("shader modules", h.shader_modules.read()),
        ("memory allocations", h.memory_allocations.read()),
    ]
}

/// One of each forward the engine offers, decode and block: logits, argmax and top-k.
fn forwards(model: &mut GpuModel, base: usize) {
    let one = Batch::causal(&[5], base);
    let block = Batch::causal(&[7, 8, 9, 10, 11, 12, 13], base);
    block_on(model.forward_argmax(&one)).unwrap();
    model.truncate(base);
    block_on(model.forward(&block)).unwrap();
    model.truncate(base);
    block_on(model.forward_top_k(&block, 4)).unwrap();
    model.truncate(base);
    block_on(model.forward_argmax(&block)).unwrap();
    model.truncate(base);
}

#[test]
fn steady_state_forwards_create_no_buffers() {
    let ctx = tiny_ctx();
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut model = GpuModel::load(&ctx, &file, Some(64)).unwrap();
    let prompt: Vec<u32> = (3..20).collect();
    block_on(model.forward_argmax(&Batch::causal(&prompt, 0))).unwrap();
    let base = model.cache_len();
    // The first forward of each kind compiles nothing (pipelines are built at load), but let
    // wgpu settle its pools before counting.
    forwards(&mut model, base);
    let before = (live(&ctx), model.stats());
    for _ in 0..5 {
        forwards(&mut model, base);
    }
    let after = (live(&ctx), model.stats());
    assert_eq!(
        after.0, before.0,
        "wgpu's live resources after 20 more forwards"
    );
    assert_eq!(after.1.forwards - before.1.forwards, 20);
    assert_eq!(
        after.1.staging_writes, 0,
        "inputs written through the queue (a staging buffer each) instead of the upload buffer"
    );
    assert!(after.1.encode_submit_nanos > before.1.encode_submit_nanos);
}
