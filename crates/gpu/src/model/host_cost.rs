//! What one forward costs the host, measured by the engine itself: dispatches, time to encode
//! and submit, time waiting for the results, and (where the caller can count them: in a page,
//! the wasm -> JS calls) the calls the host made in each of those two phases. One function for
//! `runahead bench` and the page (`Engine.forwardCost`), so both report the same quantity.

use runahead_model::{Batch, LanguageModel, ModelError, Result};

use super::{GpuModel, Want, MAX_ROWS};
use crate::clock::Clock;

/// Most forwards one measurement runs per size (bounds the work a caller can ask for).
pub const MAX_HOST_REPS: usize = 1000;

/// Forwards run before the measured ones of each size, untimed: in a page the first forwards
/// may run wasm from V8's baseline compiler (it tiers hot functions up as they run) and
/// JavaScript glue not yet optimized. A precaution: on this machine's noise (samples bimodal
/// under load, natively too) no difference between early and late forwards was measurable.
pub const HOST_WARMUP: usize = 2;

/// A running count of the host's calls, read before and after each phase of a forward. In a
/// page: a function that returns how many wasm -> JS calls the instance has made so far (the
/// page counts them at the import boundary, see bench/browser/forward-cost.mjs).
pub type CountCalls<'a> = &'a dyn Fn() -> u64;

/// A counter with the calls its own reading adds (one reading and two clock readings, what
/// each phase of [`GpuModel::run_counted`] contains besides the engine's work) measured once,
/// so the phases' counts are the engine's calls exactly.
#[derive(Clone, Copy)]
pub(super) struct CallCounter<'a> {
    read: CountCalls<'a>,
    overhead: u64,
}

impl<'a> CallCounter<'a> {
    fn new(read: CountCalls<'a>) -> Self {
        let before = read();
        let clock = Clock::start();
        std::hint::black_box(clock.nanos());
        let overhead = read().saturating_sub(before);
        CallCounter { read, overhead }
    }

    pub(super) fn read(&self) -> u64 {
        (self.read)()
    }

    /// The engine's calls between two readings.
    pub(super) fn between(&self, from: u64, to: u64) -> u64 {
        to.saturating_sub(from).saturating_sub(self.overhead)
    }
}

/// One block size's cost per forward: medians over the repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCost {
    pub rows: usize,
    /// Dispatches the forward encoded (counted by the engine, the argmax included).
    pub dispatches: u64,
    /// Writing the inputs, encoding every dispatch and submitting.
    pub encode_submit_ms: f64,
    /// From the submit to the results read back (the device's work, as the host sees it).
    pub wait_ms: f64,
    /// Calls the host made while encoding and submitting, and while waiting (with a counter).
    pub calls_encode_submit: Option<u64>,
    pub calls_wait: Option<u64>,
    /// Inputs written through `Queue::write_buffer` because the upload buffer was in flight,
    /// over all repetitions (see `upload.rs`).
    pub staging_writes: u64,
    pub reps: usize,
    /// Every measured forward's encode+submit ms, in order (the spread behind the median).
    pub encode_submit_samples_ms: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl GpuModel {
    /// Prefills `prompt` (from an empty cache), then runs [`HOST_WARMUP`] and `reps` measured
    /// forwards of each of `sizes` rows behind it (the prompt's tokens, cycled; argmax read back, as decoding and greedy
    /// verification do), truncating the cache back after each. Leaves the prompt in the cache.
    pub async fn host_costs(
        &mut self,
        prompt: &[u32],
        sizes: &[usize],
        reps: usize,
        count_calls: Option<CountCalls<'_>>,
    ) -> Result<Vec<HostCost>> {
        if prompt.is_empty() || prompt.len() > MAX_ROWS {
            return Err(ModelError::InvalidBatch(format!(
                "the prompt of a host-cost measurement holds 1 to {MAX_ROWS} tokens, not {}",
                prompt.len()
            )));
        }
        if let Some(&bad) = sizes.iter().find(|&&s| s == 0 || s > MAX_ROWS) {
            return Err(ModelError::InvalidBatch(format!(
                "a measured block holds 1 to {MAX_ROWS} rows, not {bad}"
            )));
        }
        if reps == 0 || reps > MAX_HOST_REPS {
            return Err(ModelError::InvalidBatch(format!(
                "repetitions: 1 to {MAX_HOST_REPS}, not {reps}"
            )));
        }
        self.truncate(0);
        self.forward_argmax(&Batch::causal(prompt, 0).logits_for_last(0))
            .await?;
        let base = self.cache_len();
        let counter = count_calls.map(CallCounter::new);
        let mut out = Vec::new();
        for &size in sizes {
            let block: Vec<u32> = prompt.iter().copied().cycle().take(size).collect();
            let batch = Batch::causal(&block, base);
            let (mut encode, mut wait) = (Vec::new(), Vec::new());
            let (mut calls_encode, mut calls_wait) = (Vec::new(), Vec::new());
            for _ in 0..HOST_WARMUP {
                let result = self.run(&batch, Want::Argmax).await;
                self.truncate(base);
                result?;
            }
            let first = self.stats();
            let mut dispatches = 0;
            for _ in 0..reps {
                let before = self.stats();
                let result = self.run_counted(&batch, Want::Argmax, counter).await;
                let after = self.stats();
                self.truncate(base);
                result?;
                encode.push((after.encode_submit_nanos - before.encode_submit_nanos) as f64 / 1e6);
                wait.push((after.wait_nanos - before.wait_nanos) as f64 / 1e6);
                calls_encode.push((after.calls_encode_submit - before.calls_encode_submit) as f64);
                calls_wait.push((after.calls_wait - before.calls_wait) as f64);
                dispatches = after.dispatches - before.dispatches;
            }
            let last = self.stats();
            out.push(HostCost {
                rows: size,
                dispatches,
                encode_submit_ms: median(encode.clone()),
                encode_submit_samples_ms: encode,
                wait_ms: median(wait),
                calls_encode_submit: counter.map(|_| median(calls_encode) as u64),
                calls_wait: counter.map(|_| median(calls_wait) as u64),
                staging_writes: last.staging_writes - first.staging_writes,
                reps,
            });
        }
        Ok(out)
    }
}
