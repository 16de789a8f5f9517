//! The pool in the browser (wasm32 with atomics): std cannot spawn threads there, so the
//! workers are Web Workers that the page's JavaScript starts, each instantiating this module on
//! the same shared memory and calling [`run_worker`], which never returns. They persist across
//! forwards (starting a worker takes milliseconds, a forward a few), waiting on the one
//! [`Shared`] every team of this instance uses.
//!
//! A team takes the workers that have started so far; one that starts later joins the next
//! step it sees (the caller never waits for a worker that has not joined a step, see the
//! parent module). Only one team uses the workers at a time: a second one at the same moment
//! (two engines in one instance) runs on its caller alone.
//!
//! The caller blocks on atomics while its workers finish a step, which a page's main thread may
//! not do: the engine must run in a worker of its own (the package's default) to ask for more
//! than one thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};
use std::thread::Thread;

use super::{Shared, Team, MAX_WEB_THREADS as MAX_THREADS};

struct Pool {
    shared: Shared,
    /// The workers that have started, by id.
    workers: Mutex<Vec<Thread>>,
    /// A team is using the workers.
    busy: AtomicBool,
}

static POOL: LazyLock<Pool> = LazyLock::new(|| {
    let shared = Shared::new(MAX_THREADS - 1);
    // No team yet: a worker that starts now waits for one.
    shared.enrolled.store(0, Ordering::SeqCst);
    Pool {
        shared,
        workers: Mutex::new(Vec::new()),
        busy: AtomicBool::new(false),
    }
});

/// A Web Worker's life in the pool: joins the teams' steps for as long as the page lives.
/// Returns at once when the pool already has `MAX_THREADS - 1` workers.
pub fn run_worker() {
    let pool = &*POOL;
    let id = {
        let mut workers = pool.workers.lock().unwrap_or_else(|e| e.into_inner());
        if workers.len() >= MAX_THREADS - 1 {
            return;
        }
        workers.push(std::thread::current());
        workers.len() - 1
    };
    pool.shared.work(id);
}

/// What the pool has done so far: workers started, and steps that a worker joined.
pub fn stats() -> (usize, usize) {
    let pool = &*POOL;
    let workers = pool.workers.lock().unwrap_or_else(|e| e.into_inner()).len();
    (workers, pool.shared.joined.load(Ordering::Relaxed))
}

/// Runs `f` with a team of `threads` threads: the caller and the first `threads - 1` workers
/// (those that have started; the rest of the work is the caller's).
pub(super) fn with_team<R>(threads: usize, f: impl FnOnce(&Team) -> R) -> R {
    let pool = &*POOL;
    if pool.busy.swap(true, Ordering::SeqCst) {
        return f(&Team::alone());
    }
    // Gives the workers back however `f` ends.
    struct Release<'p>(&'p Pool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.shared.enrolled.store(0, Ordering::SeqCst);
            self.0.busy.store(false, Ordering::SeqCst);
        }
    }
    let _release = Release(pool);
    let threads = threads.min(MAX_THREADS);
    let workers: Vec<Thread> = {
        let started = pool.workers.lock().unwrap_or_else(|e| e.into_inner());
        started.iter().take(threads - 1).cloned().collect()
    };
    pool.shared.enrolled.store(threads - 1, Ordering::SeqCst);
    f(&Team {
        threads,
        shared: Some(&pool.shared),
        workers,
    })
}
