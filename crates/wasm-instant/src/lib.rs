//! The clock llguidance times its steps with (for its own statistics), in place of crates.io's
//! `instant`. Natively it is std's `Instant`. On wasm32, where std's `Instant` panics, it is
//! `performance.now()` through one direct import a reading: crates.io's `instant` looks
//! `performance` up on the global object and checks its type at every reading through
//! wasm-bindgen, which was about half of a grammar mask's time in the page, and without that it
//! imports a bare `now` no page provides.

#[cfg(not(target_arch = "wasm32"))]
pub use std::time::Instant;

#[cfg(target_arch = "wasm32")]
pub use performance::Instant;

#[cfg(target_arch = "wasm32")]
mod performance {
    use std::ops::Sub;
    use std::time::Duration;

    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        /// Monotonic milliseconds since the time origin; `performance` exists in windows and
        /// workers alike.
        #[wasm_bindgen(js_namespace = performance, js_name = now)]
        fn performance_now() -> f64;
    }

    /// A reading of the page's monotonic clock, in milliseconds. Only what llguidance uses:
    /// `now`, `elapsed` and the difference of two readings.
    #[derive(Clone, Copy, Debug)]
    pub struct Instant(f64);

    impl Instant {
        pub fn now() -> Self {
            Instant(performance_now())
        }

        pub fn elapsed(&self) -> Duration {
            Self::now() - *self
        }
    }

    impl Sub for Instant {
        type Output = Duration;

        /// Zero when `earlier` is the later reading (never panics: a panic would end the wasm
        /// instance).
        fn sub(self, earlier: Instant) -> Duration {
            Duration::try_from_secs_f64((self.0 - earlier.0) / 1e3).unwrap_or_default()
        }
    }
}
