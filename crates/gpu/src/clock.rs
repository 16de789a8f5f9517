//! Host time of the engine's own work (encoding and submitting a forward, waiting for its
//! results), for the per-forward host cost. Natively a monotonic clock; on wasm32
//! `std::time::Instant` panics, so there `performance.now()` (one wasm -> JS call a reading,
//! as fine as the page allows: 5 us when cross-origin isolated, 100 us otherwise in Chromium).

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
mod performance {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        /// Milliseconds; `performance` exists in windows and workers alike.
        #[wasm_bindgen(js_namespace = performance, js_name = now)]
        pub fn now() -> f64;
    }
}

/// Milliseconds since the page's time origin.
#[cfg(target_arch = "wasm32")]
pub(crate) struct Clock(f64);

#[cfg(target_arch = "wasm32")]
impl Clock {
    pub(crate) fn start() -> Self {
        Clock(performance::now())
    }

    pub(crate) fn nanos(&self) -> u64 {
        ((performance::now() - self.0).max(0.0) * 1e6) as u64
    }
}
