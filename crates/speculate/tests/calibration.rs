//! The startup calibration's timings survive a stretch in which the machine is busy with
//! something else: the model below takes a long time over a few consecutive forwards, as a
//! forward does when another program holds the cores, and the costs of one row and of the
//! larger blocks must still be the model's own.

use std::time::Duration;

use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, CpuModel, LanguageModel, Logits, ModelConfig, Result, TopLogits};
use runahead_speculate::calibrate;

/// A model whose forwards number `busy` (counting from 0) each take `stall` longer.
struct Busy {
    inner: CpuModel,
    calls: usize,
    busy: std::ops::Range<usize>,
    stall: Duration,
}

impl Busy {
    fn call(&mut self) {
        if self.busy.contains(&self.calls) {
            std::thread::sleep(self.stall);
        }
        self.calls += 1;
    }
}

impl LanguageModel for Busy {
    fn config(&self) -> &ModelConfig {
        self.inner.config()
    }

    fn cache_len(&self) -> usize {
        self.inner.cache_len()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    async fn forward(&mut self, batch: &Batch) -> Result<Logits> {
        self.call();
        self.inner.forward(batch).await
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        self.call();
        self.inner.forward_argmax(batch).await
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        self.call();
        self.inner.forward_top_k(batch, k).await
    }

    fn truncate_floor(&self) -> usize {
        self.inner.truncate_floor()
    }

    fn truncate(&mut self, len: usize) {
        self.inner.truncate(len)
    }

    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        self.inner.compact(base, keep)
    }
}

fn busy(file: &GgufFile, busy: std::ops::Range<usize>, stall: Duration) -> Busy {
    Busy {
        inner: CpuModel::load(file, None).expect("tiny model"),
        calls: 0,
        busy,
        stall,
    }
}

#[test]
fn a_busy_stretch_does_not_set_the_cost_of_one_block_size() {
    let spec = TinyModel {
        context: 512,
        ..TinyModel::llama()
    };
    let file = GgufFile::from_bytes(spec.to_gguf()).expect("tiny GGUF");
    let mut quiet = busy(&file, 0..0, Duration::ZERO);
    let largest = block_on(calibrate(&mut quiet, 3))
        .expect("calibration")
        .at(64)
        .seconds(16);
    // Far longer than any block takes: a stalled timing is unmistakable.
    let stall = Duration::from_millis(40).max(Duration::from_secs_f64(10.0 * largest));
    // The calibration's forwards: the prefill (0), a warm-up of each of the five sizes (1 to
    // 5), then three timings of each. Forwards 6 to 11 stall: timed one size after another
    // they would be every timing of two rows and two of four rows' three; timed in rounds they
    // are the first round of every size and the second of one row.
    let mut m = busy(&file, 6..12, stall);
    let cost = block_on(calibrate(&mut m, 3)).expect("calibration");
    assert_eq!(m.calls, 21, "the forwards counted above");
    let curve = cost.at(64);
    for rows in [1, 2, 4, 8, 16] {
        assert!(
            curve.seconds(rows) < stall.as_secs_f64() / 2.0,
            "{rows} rows: {:.2} ms against a stall of {:.1} ms (16 rows unstalled: {:.2} ms)",
            curve.seconds(rows) * 1e3,
            stall.as_secs_f64() * 1e3,
            largest * 1e3
        );
    }
    assert_eq!(m.cache_len(), 0);
}
