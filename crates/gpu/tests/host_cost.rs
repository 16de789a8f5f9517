//! The per-forward host cost (`GpuModel::host_costs`), the measurement `runahead bench` and the
//! page's `Engine.forwardCost` share. Its own test binary: steady_state.rs counts wgpu's live
//! resources, which another test's model would move.

mod common;

use common::tiny_ctx;
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::{GpuModel, HOST_WARMUP};
use runahead_model::testing::TinyModel;
use runahead_model::LanguageModel;

/// `host_costs`, the measurement `runahead bench` and the page's `forwardCost` share: every
/// forward is counted, the phases are timed, and a call counter's own readings (and the clock's)
/// are taken out exactly: a counter that counts nothing but its own readings reads 0 calls.
#[test]
fn host_costs_count_dispatches_and_calibrate_the_call_counter() {
    let ctx = tiny_ctx();
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut model = GpuModel::load(&ctx, &file, Some(64)).unwrap();
    let prompt: Vec<u32> = (3..20).collect();
    let reads = std::cell::Cell::new(0u64);
    let counter = || {
        reads.set(reads.get() + 1);
        reads.get()
    };
    let before = model.stats();
    let costs = block_on(model.host_costs(&prompt, &[1, 5], 3, Some(&counter))).unwrap();
    let after = model.stats();
    assert_eq!(
        after.forwards - before.forwards,
        1 + 2 * (HOST_WARMUP as u64 + 3),
        "the prefill, then the warm-up and 3 per size"
    );
    assert_eq!(
        model.cache_len(),
        prompt.len(),
        "the prompt stays, the measured rows do not"
    );
    assert_eq!(costs.iter().map(|c| c.rows).collect::<Vec<_>>(), [1, 5]);
    for c in &costs {
        // The argmax is appended to the forward's list.
        assert_eq!(c.dispatches, model.dispatches_per_forward() as u64 + 1);
        assert!(
            c.encode_submit_ms > 0.0 && c.encode_submit_ms.is_finite(),
            "{c:?}"
        );
        assert!(c.wait_ms > 0.0 && c.wait_ms.is_finite(), "{c:?}");
        assert_eq!(
            (c.calls_encode_submit, c.calls_wait),
            (Some(0), Some(0)),
            "{c:?}"
        );
        assert_eq!((c.reps, c.staging_writes), (3, 0));
    }
    // Three readings per forward, after one calibration (two readings).
    assert_eq!(reads.get(), 2 + 3 * 2 * 3);
    let costs = block_on(model.host_costs(&prompt, &[1], 1, None)).unwrap();
    assert_eq!(costs[0].calls_encode_submit, None);

    for (prompt, sizes, reps) in [
        (&[][..], &[1][..], 1),
        (&prompt[..], &[0][..], 1),
        (&prompt[..], &[65][..], 1),
        (&prompt[..], &[1][..], 0),
        (&prompt[..], &[1][..], 1001),
    ] {
        let err = block_on(model.host_costs(prompt, sizes, reps, None));
        assert!(err.is_err(), "{sizes:?} x {reps}");
    }
}
