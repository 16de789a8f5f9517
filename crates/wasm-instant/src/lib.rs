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

    /// A reading of the page's monotonic clock, in milliseconds.
    #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
    pub struct Instant(f64);

    impl Instant {
        pub fn now() -> Self {
            Instant(performance_now())
        }

        /// Zero when `earlier` is later (never panics: a panic would end the wasm instance).
        pub fn duration_since(&self, earlier: Instant) -> Duration {
            Duration::try_from_secs_f64((self.0 - earlier.0) / 1e3).unwrap_or_default()
        }

        pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
            self.duration_since(earlier)
        }

        pub fn elapsed(&self) -> Duration {
            Self::now().duration_since(*self)
        }
    }

    impl Sub for Instant {
        type Output = Duration;

        fn sub(self, earlier: Instant) -> Duration {
            self.duration_since(earlier)
        }
    }
}
