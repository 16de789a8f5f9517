//! The process's persistent workers. A forward runs a few hundred parallel steps and a
//! generation thousands of forwards, so the workers outlive both: natively they are std threads
//! this module starts the first time a team needs them (spawning 15 threads per forward cost
//! ~0.6 ms, a tenth of a forward on 16 cores); in the browser (wasm32 with atomics) std cannot
//! spawn threads, so they are Web Workers that the page's JavaScript starts, each instantiating
//! this module on the same shared memory and calling [`run_worker`], which never returns.
//! Between teams they wait on the pool's [`Shared`] (spinning briefly, then asleep).
//!
//! A team takes the workers that have started so far; one that starts later joins the next
//! step it sees (the caller never waits for a worker that has not joined a step, see the
//! parent module). Only one team uses the workers at a time: a second one at the same moment
//! (two engines forwarding on two threads) gets threads of its own natively and runs on its
//! caller alone in the browser.
//!
//! In the browser the caller blocks on atomics while its workers finish a step, which a page's
//! main thread may not do: the engine must run in a worker of its own (the package's default)
//! to ask for more than one thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};
use std::thread::Thread;

use super::{Shared, Team, MAX_WEB_THREADS};

/// Threads of a team at most natively (the caller included); larger teams get threads of
/// their own for the duration of their forward.
#[cfg(not(target_arch = "wasm32"))]
const MAX_NATIVE_THREADS: usize = 256;

/// Workers and the teams that use them, one team at a time.
pub struct Pool {
    shared: Shared,
    /// The workers that have started, by id.
    workers: Mutex<Vec<Thread>>,
    /// A team is using the workers.
    busy: AtomicBool,
}

/// The pool every team of this process (or page instance) uses.
static POOL: LazyLock<Pool> = LazyLock::new(|| Pool::new(capacity()));

/// Threads of the largest team the pool serves, its caller included.
fn capacity() -> usize {
    #[cfg(target_arch = "wasm32")]
    return MAX_WEB_THREADS;
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(MAX_WEB_THREADS, MAX_NATIVE_THREADS)
}

/// A Web Worker's life in the pool: joins the teams' steps for as long as the page lives.
/// Returns at once when the pool is full.
pub fn run_worker() {
    POOL.run_worker();
}

/// What the pool has done so far: workers started, and steps that a worker joined.
pub fn stats() -> (usize, usize) {
    POOL.stats()
}

/// Runs `f` with a team of `threads` threads (the caller and up to `threads - 1` of the pool's
/// workers), or returns `f` when the pool is in use or `threads` is more than it serves.
pub(super) fn with_team<R, F: FnOnce(&Team) -> R>(threads: usize, f: F) -> Result<R, F> {
    POOL.with_team(threads, f)
}

impl Pool {
    /// Room for a team of `capacity` threads; no worker yet.
    fn new(capacity: usize) -> Self {
        let shared = Shared::new(capacity.max(1) - 1);
        // No team yet: a worker that starts now waits for one.
        shared.enrolled.store(0, Ordering::SeqCst);
        Pool {
            shared,
            workers: Mutex::new(Vec::new()),
            busy: AtomicBool::new(false),
        }
    }

    fn capacity(&self) -> usize {
        self.shared.asleep.len() + 1
    }

    /// The calling thread becomes a worker of this pool, for good (unless the pool is full).
    fn run_worker(&'static self) {
        let id = {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            if workers.len() + 1 >= self.capacity() {
                return;
            }
            workers.push(std::thread::current());
            workers.len() - 1
        };
        self.shared.work(id);
    }

    fn stats(&self) -> (usize, usize) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner()).len();
        (workers, self.shared.steps_joined())
    }

    /// Natively: starts workers until there are `want` (as many as the system gives).
    #[cfg(not(target_arch = "wasm32"))]
    fn start_workers(&'static self, want: usize) {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        while workers.len() < want.min(self.capacity() - 1) {
            let id = workers.len();
            let spawned = std::thread::Builder::new()
                .name(format!("runahead-cpu-{id}"))
                .spawn(move || self.shared.work(id));
            match spawned {
                Ok(handle) => workers.push(handle.thread().clone()),
                // Out of threads: the team works with those it has.
                Err(_) => break,
            }
        }
    }

    fn with_team<R, F: FnOnce(&Team) -> R>(&'static self, threads: usize, f: F) -> Result<R, F> {
        if threads > self.capacity() || self.busy.swap(true, Ordering::SeqCst) {
            return Err(f);
        }
        // Gives the workers back however `f` ends.
        struct Release<'p>(&'p Pool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.shared.enrolled.store(0, Ordering::SeqCst);
                self.0.busy.store(false, Ordering::SeqCst);
            }
        }
        let _release = Release(self);
        #[cfg(not(target_arch = "wasm32"))]
        self.start_workers(threads - 1);
        let workers: Vec<Thread> = {
            let started = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            started.iter().take(threads - 1).cloned().collect()
        };
        self.shared.enrolled.store(threads - 1, Ordering::SeqCst);
        Ok(f(&Team {
            threads,
            shared: Some(&self.shared),
            workers,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A pool of its own for each test (the process's is shared by every test of the crate).
    fn pool(capacity: usize) -> &'static Pool {
        Box::leak(Box::new(Pool::new(capacity)))
    }

    /// Runs `steps` steps of 100 items on a team of `threads` of `pool`; returns the sum of
    /// what the team took and the most threads that ran one step's task.
    fn run_steps(pool: &'static Pool, threads: usize, steps: usize) -> (usize, usize) {
        let run = |team: &Team| {
            let (mut total, mut most) = (0, 0);
            for step in 0..steps {
                let next = AtomicUsize::new(0);
                let sum = AtomicUsize::new(0);
                let runs = AtomicUsize::new(0);
                team.run(&|_| {
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
        };
        pool.with_team(threads, run)
            .unwrap_or_else(|_| panic!("the pool is free"))
    }

    fn want(steps: usize) -> usize {
        (0..steps)
            .map(|s| (0..100).map(|i| i + s).sum::<usize>())
            .sum()
    }

    /// Steps this short may all end before a descheduled worker looks (a loaded machine):
    /// more of them, for at most ten seconds, until one joins.
    fn until_a_worker_joins(pool: &'static Pool, threads: usize) {
        let start = std::time::Instant::now();
        while pool.stats().1 == 0 && start.elapsed() < std::time::Duration::from_secs(10) {
            assert_eq!(run_steps(pool, threads, 25).0, want(25));
        }
        assert!(pool.stats().1 > 0, "no worker joined a step");
    }

    /// The browser's way: workers that someone else starts, whenever they start.
    #[test]
    fn workers_started_from_outside_join_teams_across_calls_and_take_each_item_once() {
        let pool = pool(16);
        for _ in 0..3 {
            std::thread::spawn(|| pool.run_worker());
        }
        while pool.stats().0 < 3 {
            std::thread::yield_now();
        }
        // Many teams over the same workers (one team per forward in the engine): every item
        // taken once, never more threads than the team's, whatever joined.
        for threads in [2, 3, 4, 2] {
            for _ in 0..20 {
                let (total, most) = run_steps(pool, threads, 25);
                assert_eq!(total, want(25), "{threads} threads");
                assert!(most <= threads, "{most} of {threads} threads ran a step");
            }
        }
        until_a_worker_joins(pool, 2);
    }

    /// Natively the pool starts the workers a team asks for, once: later teams reuse them.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn native_teams_start_their_workers_once_and_reuse_them() {
        let pool = pool(8);
        assert_eq!(run_steps(pool, 3, 20).0, want(20));
        assert_eq!(pool.stats().0, 2);
        for threads in [2, 3, 2, 3] {
            for _ in 0..20 {
                let (total, most) = run_steps(pool, threads, 25);
                assert_eq!(total, want(25), "{threads} threads");
                assert!(most <= threads, "{most} of {threads} threads ran a step");
            }
        }
        assert_eq!(pool.stats().0, 2, "workers started again");
        // A larger team starts only the missing ones; one larger than the pool is refused.
        assert_eq!(run_steps(pool, 5, 5).0, want(5));
        assert_eq!(pool.stats().0, 4);
        assert!(pool.with_team(9, |_| ()).is_err());
        until_a_worker_joins(pool, 5);
    }

    /// A worker's panic is reported by the step it happened in, once: the pool's later teams
    /// run as before (a flag never taken down made every later step panic).
    #[test]
    fn a_worker_panic_is_reported_once_and_the_pool_goes_on() {
        let pool = pool(2);
        let start = std::time::Instant::now();
        // Until the worker joins a step (on a loaded machine it may come after the caller's
        // work is done), panicking in it.
        loop {
            let reported = std::panic::catch_unwind(|| {
                pool.with_team(2, |team| {
                    team.run(&|place| {
                        if place == 1 {
                            panic!("a worker's panic");
                        }
                    })
                })
            });
            if reported.is_err() {
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "no worker came"
            );
        }
        assert_eq!(run_steps(pool, 2, 5).0, want(5));
    }

    #[test]
    fn a_second_team_at_the_same_time_is_turned_away_and_the_workers_come_back() {
        let pool = pool(4);
        pool.with_team(3, |_| {
            assert!(pool.with_team(3, |_| ()).is_err(), "two teams at once");
        })
        .unwrap_or_else(|_| panic!("the pool is free"));
        // The workers are given back however a team ends.
        let panicked = std::panic::catch_unwind(|| {
            let _ = pool.with_team(2, |_| panic!("in the team"));
        });
        assert!(panicked.is_err());
        assert_eq!(run_steps(pool, 2, 5).0, want(5));
    }
}
