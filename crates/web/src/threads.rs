//! How many threads the CPU engine gets on this page, and why fewer than asked.
//!
//! More than one needs the threaded build of this module (shared memory, compiled with
//! atomics), which the package loads only on a cross-origin isolated page (a `SharedArrayBuffer`
//! exists only there), and a thread that may block on atomics: a worker, never the page's main
//! thread. The pool's own workers are Web Workers the package starts ([`run_pool_worker`]).

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::error::{Code, WebError};

/// The most threads a page may ask for (the pool's size).
pub const MAX_THREADS: usize = runahead_cpu::pool::MAX_WEB_THREADS;

/// Where this instance runs.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// Built with atomics and shared memory.
    pub threaded_build: bool,
    /// `crossOriginIsolated`.
    pub isolated: bool,
    /// In a worker (may block on atomics), not the page's main thread.
    pub in_worker: bool,
}

impl Place {
    /// This instance's.
    pub fn here() -> Self {
        let global = js_sys::global();
        let isolated = js_sys::Reflect::get(&global, &"crossOriginIsolated".into())
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        // `WorkerGlobalScope` is defined in workers only.
        let in_worker = js_sys::Reflect::has(&global, &"WorkerGlobalScope".into()).unwrap_or(false);
        Place {
            threaded_build: cfg!(target_feature = "atomics"),
            isolated,
            in_worker,
        }
    }
}

/// The CPU engine's threads, and why fewer than asked (absent when it got them all).
#[derive(Clone, Debug, PartialEq)]
pub struct Threads {
    pub count: usize,
    pub reason: Option<String>,
}

/// The `threads` load option (absent: one) where the engine runs at `place`.
pub fn cpu_threads(requested: Option<usize>, place: Place) -> Result<Threads, WebError> {
    let requested = requested.unwrap_or(1);
    if requested == 0 || requested > MAX_THREADS {
        return Err(WebError::new(
            Code::InvalidOption,
            format!("threads must be between 1 and {MAX_THREADS} (got {requested})"),
        ));
    }
    let fewer = |why: &str| Threads {
        count: 1,
        reason: Some(format!("one thread of the {requested} asked: {why}")),
    };
    Ok(if requested == 1 {
        Threads {
            count: 1,
            reason: None,
        }
    } else if !place.in_worker {
        fewer("the engine runs on the page's main thread, which may not wait for other threads")
    } else if !place.isolated {
        fewer(
            "the page is not cross-origin isolated (it needs the headers \
             Cross-Origin-Opener-Policy: same-origin and \
             Cross-Origin-Embedder-Policy: require-corp)",
        )
    } else if !place.threaded_build {
        fewer("the single-threaded WebAssembly build is loaded")
    } else {
        Threads {
            count: requested,
            reason: None,
        }
    })
}

/// What the CPU engine's pool has done in this instance: `{threaded, workers, stepsJoined}`,
/// whether this is the threaded build, the Web Workers that have joined the pool and the
/// parallel steps they took part in (0 and 0 in the single-threaded build).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PoolStats {
    threaded: bool,
    workers: usize,
    steps_joined: usize,
}

#[wasm_bindgen(js_name = cpuPoolStats)]
pub fn cpu_pool_stats() -> Result<JsValue, JsValue> {
    #[cfg(target_feature = "atomics")]
    let (workers, steps_joined) = runahead_cpu::pool::persistent::stats();
    #[cfg(not(target_feature = "atomics"))]
    let (workers, steps_joined) = (0, 0);
    Ok(crate::to_js(&PoolStats {
        threaded: cfg!(target_feature = "atomics"),
        workers,
        steps_joined,
    })?)
}

/// A Web Worker's part in the CPU engine's pool, called once the worker has instantiated this
/// module on the engine's memory ([`pool_share`]): joins the engine's parallel steps and never
/// returns (it returns at once when the pool is full).
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = runPoolWorker)]
pub fn run_pool_worker() {
    runahead_cpu::pool::persistent::run_worker();
}

/// `[module, memory]`: what a pool worker instantiates (this compiled module, on this shared
/// memory).
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = poolShare)]
pub fn pool_share() -> js_sys::Array {
    js_sys::Array::of2(&wasm_bindgen::module(), &wasm_bindgen::memory())
}

#[cfg(test)]
mod tests {
    use super::*;

    const READY: Place = Place {
        threaded_build: true,
        isolated: true,
        in_worker: true,
    };

    #[test]
    fn a_threaded_build_in_an_isolated_worker_gets_what_it_asks() {
        for n in [1, 2, 3, MAX_THREADS] {
            let t = cpu_threads(Some(n), READY).expect("valid");
            assert_eq!(
                t,
                Threads {
                    count: n,
                    reason: None
                }
            );
        }
        assert_eq!(cpu_threads(None, READY).expect("valid").count, 1);
    }

    #[test]
    fn elsewhere_one_thread_and_the_reason() {
        for (place, why) in [
            (
                Place {
                    in_worker: false,
                    ..READY
                },
                "main thread",
            ),
            (
                Place {
                    isolated: false,
                    ..READY
                },
                "Cross-Origin-Embedder-Policy",
            ),
            (
                Place {
                    threaded_build: false,
                    ..READY
                },
                "single-threaded",
            ),
        ] {
            let t = cpu_threads(Some(4), place).expect("valid");
            assert_eq!(t.count, 1);
            let reason = t.reason.expect("a reason");
            assert!(
                reason.contains(why) && reason.contains("of the 4"),
                "{reason}"
            );
            // Asking for one is never a fallback.
            assert_eq!(cpu_threads(Some(1), place).expect("valid").reason, None);
        }
    }

    #[test]
    fn zero_or_too_many_is_an_invalid_option() {
        for n in [0, MAX_THREADS + 1, usize::MAX] {
            let e = cpu_threads(Some(n), READY).unwrap_err();
            assert_eq!(e.code, Code::InvalidOption);
        }
    }
}
