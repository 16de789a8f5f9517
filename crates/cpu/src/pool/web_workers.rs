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
//!
//! Nothing here is specific to the browser but who starts the workers: the tests below run it
//! natively, with std threads calling [`run_worker`].

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Runs `steps` steps of 100 items on a team of `threads`; returns the sum of what the
    /// team took and the most threads that ran one step's task.
    fn run_steps(threads: usize, steps: usize) -> (usize, usize) {
        with_team(threads, |team| {
            let (mut total, mut most) = (0, 0);
            for step in 0..steps {
                let next = AtomicUsize::new(0);
                let sum = AtomicUsize::new(0);
                let runs = AtomicUsize::new(0);
                team.run(&|| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= 100 {
                            break;
                        }
                        sum.fetch_add(i + step, Ordering::Relaxed);
                    }
                });
                total += sum.load(Ordering::Relaxed);
                most = most.max(runs.load(Ordering::Relaxed));
            }
            (total, most)
        })
    }

    fn want(steps: usize) -> usize {
        (0..steps)
            .map(|s| (0..100).map(|i| i + s).sum::<usize>())
            .sum()
    }

    // One test: the pool is one per process, and the order of these steps matters.
    #[test]
    fn persistent_workers_join_teams_across_calls_and_take_each_item_once() {
        // No worker has started: the caller does everything.
        assert_eq!(run_steps(3, 20), (want(20), 1));
        assert_eq!(stats(), (0, 0));

        for _ in 0..3 {
            std::thread::spawn(run_worker);
        }
        while stats().0 < 3 {
            std::thread::yield_now();
        }
        // Many teams over the same workers (one team per forward in the engine): every item
        // taken once, never more threads than the team's, whatever joined.
        for threads in [2, 3, 4, 2, 16] {
            for _ in 0..20 {
                let (total, most) = run_steps(threads, 25);
                assert_eq!(total, want(25), "{threads} threads");
                assert!(
                    most <= threads.min(4),
                    "{most} of {threads} threads ran a step"
                );
            }
        }
        // Steps this short may all end before a descheduled worker looks (a loaded machine):
        // more of them, for at most ten seconds, until one joins.
        let start = std::time::Instant::now();
        while stats().1 == 0 && start.elapsed() < std::time::Duration::from_secs(10) {
            assert_eq!(run_steps(2, 25).0, want(25));
        }
        assert!(stats().1 > 0, "no worker joined a step");

        // A team asked for while another holds the workers runs on its caller.
        with_team(3, |_| {
            with_team(3, |inner| assert_eq!(inner.threads(), 1));
        });
        // The workers are given back however a team ends.
        let panicked = std::panic::catch_unwind(|| with_team(2, |_| panic!("in the team")));
        assert!(panicked.is_err());
        assert_eq!(run_steps(2, 5).0, want(5));
    }
}
