//! Host time of the engine's own work (encoding and submitting a forward, waiting for its
//! results), for the benchmark's per-forward host cost. Natively a monotonic clock; on wasm32
//! `std::time::Instant` panics, so there it reads zero and the browser measures around the call.

#[cfg(not(target_arch = "wasm32"))]
pub(crate) struct Clock(std::time::Instant);

#[cfg(not(target_arch = "wasm32"))]
impl Clock {
    pub(crate) fn start() -> Self {
        Clock(std::time::Instant::now())
    }

    /// Nanoseconds since [`Self::start`].
    pub(crate) fn nanos(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

#[cfg(target_arch = "wasm32")]
pub(crate) struct Clock;

#[cfg(target_arch = "wasm32")]
impl Clock {
    pub(crate) fn start() -> Self {
        Clock
    }

    pub(crate) fn nanos(&self) -> u64 {
        0
    }
}
