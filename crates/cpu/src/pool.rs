//! The threads of one forward pass. Work is split by output rows (or attention heads) only:
//! every output value is computed whole by one thread, so results never depend on the thread
//! count or on which thread took which rows.
//!
//! A forward runs a few hundred short parallel steps (seven products and an attention per
//! layer), too many to spawn threads for each: the workers persist ([`persistent`]: std threads
//! natively, Web Workers in the browser) and wait for each step by spinning briefly (steps come
//! microseconds apart), then sleeping until the caller wakes them, so that a waiting worker
//! never takes a core the caller needs on a busy machine. A team that finds the persistent
//! workers in use (two engines forwarding at once) spawns threads for its forward natively.
//!
//! What each thread writes sits on cache lines of its own; besides the caller opening and
//! closing a step, the only shared lines a step writes are the join and leave counts and the
//! work queues: with 16 threads, every shared line a step writes costs microseconds, a few
//! hundred times a forward.
//!
//! On a busy machine a worker may not get a core for milliseconds. The caller never waits for
//! a worker that has not joined a step: a worker joins a step only while it is open, the
//! caller takes whatever work is left, closes the step, and waits only for the workers that
//! joined (a Dekker-style handshake on `active` and `open`, both sequentially consistent).
//!
//! Each side of a handshake writes with a read-modify-write, never a plain store, before it
//! reads the other side's variable. Sequentially consistent stores and loads would do in the
//! language's model, but qemu's aarch64 emulation on an x86-64 host (the CI's NEON step) lets a
//! `stlr` pass a later `ldar` (13% of store-buffering rounds with qemu 7.2). That is the likely
//! way the CI's aarch64 step once saw a step's task run five times on a team of four: the
//! caller saw no worker in a step it had closed while a worker saw it open and ran its task into
//! the next step. An RMW is a full barrier there as on hardware, and costs x86 nothing (a SeqCst
//! store is already an `xchg`).

// The single-threaded wasm build has no workers: their side of the team is never used there.
#![cfg_attr(
    all(target_arch = "wasm32", not(target_feature = "atomics")),
    allow(dead_code)
)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
pub mod persistent;

/// Threads of a team at most in the browser (the caller included): the Web Workers' pool is made
/// once, this size.
pub const MAX_WEB_THREADS: usize = 16;

/// A team of threads that run the same task together.
pub struct Team<'a> {
    threads: usize,
    shared: Option<&'a Shared>,
    workers: Vec<std::thread::Thread>, // [threads - 1], to wake them
}

/// The task of the current step, its lifetime erased (see [`Team::run`]).
type TaskRef = &'static (dyn Fn(usize) + Sync + 'static);

/// A value alone on its cache lines (two: x86 fetches lines in pairs), so that threads writing
/// their own never slow each other's.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What the calling thread and the workers share.
struct Shared {
    /// The current step's task: the caller's reference to it, on the caller's stack for the
    /// step (a lock here made 15 workers queue for it each step).
    task: AtomicPtr<TaskRef>,
    /// Bumped once per step; a worker considers each step once.
    step: AtomicUsize,
    /// The step workers may still join, or [`CLOSED`].
    open: AtomicUsize,
    /// Workers that joined the open step and have not finished its task.
    active: AtomicUsize,
    stop: AtomicBool,
    worker_panicked: AtomicBool,
    /// Per worker: asleep (or about to be) until woken.
    asleep: Vec<Padded<AtomicBool>>,
    /// Workers with an id below this take part in the steps (all of them, natively; in the
    /// browser the workers persist and a team may want fewer than have started).
    enrolled: AtomicUsize,
    /// Per worker: steps it joined, counted to show the workers take part (each its own, so
    /// that counting costs no shared write).
    joined: Vec<Padded<AtomicUsize>>,
}

const CLOSED: usize = usize::MAX;

/// How long a waiting worker spins before it sleeps.
#[cfg(not(target_arch = "wasm32"))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// The same in checks of the step, where std has no clock (wasm32: `Instant::now` panics):
/// a check is a few nanoseconds, so this is of the order of [`SPIN`].
#[cfg(target_arch = "wasm32")]
const SPIN_CHECKS: u32 = 1 << 16;

/// Runs `f` with a team of `threads` threads (the caller and `threads - 1` workers). In a
/// wasm32 build without atomics there is one thread whatever `threads` says.
pub fn with_team<R>(threads: usize, f: impl FnOnce(&Team) -> R) -> R {
    if threads <= 1 {
        return f(&Team::alone());
    }
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    return f(&Team::alone());
    #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
    match persistent::with_team(threads, f) {
        Ok(result) => result,
        #[cfg(not(target_arch = "wasm32"))]
        Err(f) => scoped_team(threads, f),
        #[cfg(target_arch = "wasm32")]
        Err(f) => f(&Team::alone()),
    }
}

/// A team whose workers are threads spawned for the duration of `f`: natively, where the
/// persistent workers are in use or the team is larger than they serve.
#[cfg(not(target_arch = "wasm32"))]
fn scoped_team<R>(threads: usize, f: impl FnOnce(&Team) -> R) -> R {
    let shared = Shared::new(threads - 1);
    std::thread::scope(|scope| {
        let shared = &shared;
        let workers: Vec<_> = (0..threads - 1)
            .map(|id| scope.spawn(move || shared.work(id)).thread().clone())
            .collect();
        // Stops the workers however `f` ends, or the scope would wait for them forever.
        struct StopOnDrop<'s>(&'s Shared, &'s [std::thread::Thread]);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.stop.store(true, Ordering::SeqCst);
                self.1.iter().for_each(|w| w.unpark());
            }
        }
        let _stop = StopOnDrop(shared, &workers);
        f(&Team {
            threads,
            shared: Some(shared),
            workers: workers.clone(),
        })
    })
}

impl Team<'_> {
    /// The calling thread alone.
    fn alone() -> Self {
        Team {
            threads: 1,
            shared: None,
            workers: Vec::new(),
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `task` on every thread of the team and returns when all are done. Tasks split
    /// their work by taking items from a shared queue until it is empty. A task's argument is
    /// its thread's place in the team (0 for the caller; distinct, below `threads()`), which
    /// costs no shared count to learn.
    pub fn run(&self, task: &(dyn Fn(usize) + Sync)) {
        let Some(shared) = self.shared else {
            task(0);
            return;
        };
        // SAFETY: only the lifetime is erased. A worker calls the task only after joining the
        // open step (`active` incremented, then `open` seen equal to the step), and this
        // function closes the step and waits for `active` to reach zero before it returns
        // (or unwinds: `CloseOnDrop`, dropped before `task`), so the task and `task`, the
        // reference the workers read through `Shared::task`, outlive every use.
        let task: TaskRef = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), _>(task) };
        shared
            .task
            .store(&task as *const TaskRef as *mut TaskRef, Ordering::SeqCst);
        let step = shared.step.load(Ordering::Relaxed).wrapping_add(1) % CLOSED;
        shared.open.store(step, Ordering::SeqCst);
        // A swap, not a store, before reading `asleep`: see the module's comment.
        shared.step.swap(step, Ordering::SeqCst);
        // A worker that went to sleep before seeing the step is woken (it set `asleep` before
        // checking `step`, so one of the two sides sees the other). Read first: a flag that is
        // down stays on the cache lines every core shares, where writing it would take the line.
        for (flag, worker) in shared.asleep.iter().zip(&self.workers) {
            if flag.load(Ordering::SeqCst) && flag.swap(false, Ordering::SeqCst) {
                worker.unpark();
            }
        }

        struct CloseOnDrop<'s>(&'s Shared);
        impl Drop for CloseOnDrop<'_> {
            fn drop(&mut self) {
                self.0.close_step();
                wait_until(|| !self.0.workers_in_step());
                self.0.task.store(std::ptr::null_mut(), Ordering::SeqCst);
            }
        }
        let close = CloseOnDrop(shared);
        task(0);
        drop(close);
        // Taken down as it is reported: the panic was this step's (every worker that joined
        // has left), and a flag left up made every later step of the pool's teams panic too (in
        // the browser, every later forward of the page).
        if shared.worker_panicked.swap(false, Ordering::Relaxed) {
            panic!("a worker thread of the CPU engine panicked");
        }
    }
}

impl Shared {
    /// Room for `workers` workers, all enrolled.
    fn new(workers: usize) -> Self {
        Shared {
            task: AtomicPtr::new(std::ptr::null_mut()),
            step: AtomicUsize::new(0),
            open: AtomicUsize::new(CLOSED),
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            worker_panicked: AtomicBool::new(false),
            asleep: (0..workers).map(|_| Padded::default()).collect(),
            enrolled: AtomicUsize::new(workers),
            joined: (0..workers).map(|_| Padded::default()).collect(),
        }
    }

    /// Steps that some worker joined, all workers together.
    fn steps_joined(&self) -> usize {
        self.joined.iter().map(|j| j.load(Ordering::Relaxed)).sum()
    }

    /// A worker's life: join each step that is still open when it gets there, until told
    /// to stop.
    fn work(&self, id: usize) {
        let mut seen = 0usize;
        loop {
            self.wait_for_step(id, seen);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            seen = self.step.load(Ordering::Acquire);
            if id >= self.enrolled.load(Ordering::SeqCst) {
                continue;
            }
            if self.join_step(seen) {
                let joined = &self.joined[id];
                joined.store(joined.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                let task = self.task.load(Ordering::SeqCst);
                // A panic is reported by the caller of `run`; the worker stays in the team.
                let run = || {
                    // SAFETY: see `Team::run`: the step is open and this thread is counted in
                    // `active`, so the caller waits for it before the task (and the reference
                    // to it that `task` points to) goes away.
                    unsafe { (*task)(id + 1) }
                };
                if !task.is_null() && catch_unwind(AssertUnwindSafe(run)).is_err() {
                    self.worker_panicked.store(true, Ordering::Relaxed);
                }
            }
            self.leave_step();
        }
    }

    /// The caller's side of the handshake: no worker joins the step after this.
    fn close_step(&self) {
        // A swap, not a store: see the module's comment.
        self.open.swap(CLOSED, Ordering::SeqCst);
    }

    /// Whether a worker is still in the step (after [`Self::close_step`], the caller waits
    /// until none is).
    fn workers_in_step(&self) -> bool {
        self.active.load(Ordering::SeqCst) != 0
    }

    /// A worker's side: counts itself in, then whether step `seen` is still open. Counted in
    /// either way; [`Self::leave_step`] undoes it.
    fn join_step(&self, seen: usize) -> bool {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.open.load(Ordering::SeqCst) == seen
    }

    fn leave_step(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// Returns once a step after `seen` is published or the team stops: spins for [`SPIN`],
    /// then sleeps until woken.
    fn wait_for_step(&self, id: usize, seen: usize) {
        let ready = || self.stop.load(Ordering::SeqCst) || self.step.load(Ordering::SeqCst) != seen;
        #[cfg(not(target_arch = "wasm32"))]
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        while !ready() {
            spins = spins.saturating_add(1);
            #[cfg(not(target_arch = "wasm32"))]
            let spinning = !spins.is_multiple_of(256) || start.elapsed() < SPIN;
            #[cfg(target_arch = "wasm32")]
            let spinning = spins < SPIN_CHECKS;
            if spinning {
                std::hint::spin_loop();
                continue;
            }
            // A swap, not a store, before reading the step: see the module's comment.
            self.asleep[id].swap(true, Ordering::SeqCst);
            if !ready() {
                // Spurious wake-ups only loop back here.
                std::thread::park();
            }
            self.asleep[id].store(false, Ordering::SeqCst);
        }
    }
}

/// Spins briefly (steps are microseconds apart), then yields the core to other work.
fn wait_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < 4096 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_taken_once_whoever_joins() {
        for threads in 1..=4 {
            let total = with_team(threads, |team| {
                let mut total = 0;
                for step in 0..50 {
                    let next = AtomicUsize::new(0);
                    let sum = AtomicUsize::new(0);
                    let runs = AtomicUsize::new(0);
                    let places: Vec<AtomicBool> =
                        (0..threads).map(|_| AtomicBool::new(false)).collect();
                    team.run(&|place| {
                        runs.fetch_add(1, Ordering::Relaxed);
                        // Each thread in the step has a place of its own in the team.
                        assert!(
                            !places[place].swap(true, Ordering::Relaxed),
                            "place {place} twice"
                        );
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= 100 {
                                break;
                            }
                            sum.fetch_add(i + step, Ordering::Relaxed);
                        }
                    });
                    // The caller always runs the task; a worker only if it came in time.
                    let runs = runs.load(Ordering::Relaxed);
                    assert!((1..=team.threads()).contains(&runs), "{runs} runs");
                    assert!(places[0].load(Ordering::Relaxed), "the caller's place is 0");
                    total += sum.load(Ordering::Relaxed);
                }
                total
            });
            let want: usize = (0..50)
                .map(|s| (0..100).map(|i| i + s).sum::<usize>())
                .sum();
            assert_eq!(total, want, "{threads} threads");
        }
    }

    /// The handshake itself, raced round after round: a caller that closes a step and sees no
    /// worker in it, and a worker in it that saw the step open, never both. The pool's other
    /// tests catch a break only now and then: with a release store in `close_step` this one
    /// fails natively in every run (7-14 of 20,000 rounds on x86-64).
    #[test]
    fn a_closed_step_and_a_joining_worker_always_see_each_other() {
        const ROUNDS: usize = 20_000;
        let shared = Shared::new(1);
        // Per side: the rounds it has begun and the rounds it has done its part of.
        let begun = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let done = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let worker_saw_open = AtomicBool::new(false);
        let meet = |side: usize, at: &[AtomicUsize; 2], round: usize| {
            at[side].store(round, Ordering::SeqCst);
            wait_until(|| at[1 - side].load(Ordering::SeqCst) >= round);
        };
        // Both sides set off a few cycles apart, differently in each round, so that some
        // rounds meet in the few nanoseconds in which a reordering could show.
        let jitter = |round: usize, side: usize| {
            let spins = (round.wrapping_mul(2_654_435_761) >> (7 + 5 * side)) % 48;
            (0..spins).for_each(|_| std::hint::spin_loop());
        };
        let mut both_missed = 0;
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for round in 1..=ROUNDS {
                    meet(1, &begun, round);
                    jitter(round, 1);
                    worker_saw_open.store(shared.join_step(round), Ordering::SeqCst);
                    // In the step until the caller has looked, as a worker running a task.
                    meet(1, &done, round);
                    shared.leave_step();
                }
            });
            for round in 1..=ROUNDS {
                shared.open.store(round, Ordering::SeqCst);
                meet(0, &begun, round);
                jitter(round, 0);
                shared.close_step();
                let saw_worker = shared.workers_in_step();
                meet(0, &done, round);
                if !saw_worker && worker_saw_open.load(Ordering::SeqCst) {
                    both_missed += 1;
                }
            }
        });
        assert_eq!(both_missed, 0, "of {ROUNDS} rounds");
    }

    #[test]
    fn a_panicking_worker_is_reported_not_hidden() {
        let caught = catch_unwind(|| {
            with_team(2, |team| {
                let first = AtomicBool::new(true);
                team.run(&|_| {
                    // The first thread to arrive panics, whichever it is.
                    if first.swap(false, Ordering::Relaxed) {
                        panic!("boom");
                    }
                });
            })
        });
        assert!(caught.is_err());
    }
}
