//! Gives the page a turn before every forward pass, so input events are handled and streamed
//! tokens are painted while a generation runs on the same thread.
//!
//! Two kinds of turn: the GPU engine's forwards wait on the device, which leaves the page
//! idle time of its own, so it resumes ahead of other tasks (`scheduler.yield()`); the CPU
//! engine computes on the page's thread, and a continuation that always jumps the queue
//! starved the page's timers for a whole generation (a 50 ms poll never ran while SmolLM2
//! decoded 64 tokens), so it waits behind every task already queued.

use runahead_model::{Batch, LanguageModel, Logits, ModelConfig, Result, TopLogits};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

// scheduler.yield() (Chromium 129+) resumes ahead of other queued tasks; elsewhere a
// MessageChannel message is a task that, unlike a nested setTimeout(0), is not clamped to 4 ms.
#[wasm_bindgen(inline_js = "
export function yieldToEventLoop() {
  const s = globalThis.scheduler;
  if (s && typeof s.yield === 'function') return s.yield();
  return yieldBehindTasks();
}
export function yieldBehindTasks() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => { channel.port1.close(); resolve(); };
    channel.port2.postMessage(null);
  });
}
")]
extern "C" {
    #[wasm_bindgen(js_name = yieldToEventLoop)]
    fn yield_to_event_loop() -> js_sys::Promise;
    #[wasm_bindgen(js_name = yieldBehindTasks)]
    fn yield_behind_tasks() -> js_sys::Promise;
}

/// How a generation gives the page its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Resume ahead of other queued tasks (where supported): the GPU engine.
    First,
    /// Resume behind every task already queued: the CPU engine.
    Fair,
}

/// Returns after the browser has had a chance to run other tasks (and render).
pub async fn yield_now(turn: Turn) {
    let promise = match turn {
        Turn::First => yield_to_event_loop(),
        Turn::Fair => yield_behind_tasks(),
    };
    // The promise never rejects; if it did, not yielding once is harmless.
    let _ = JsFuture::from(promise).await;
}

/// A model that yields to the event loop before each forward pass (the target's and the draft
/// model's alike).
pub struct Paced<M> {
    pub inner: M,
    pub turn: Turn,
}

impl<M: LanguageModel> LanguageModel for Paced<M> {
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
        yield_now(self.turn).await;
        self.inner.forward(batch).await
    }

    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        yield_now(self.turn).await;
        self.inner.forward_argmax(batch).await
    }

    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits> {
        yield_now(self.turn).await;
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
