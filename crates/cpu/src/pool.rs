//! The threads of one forward pass. Work is split by output rows only: every output value is
//! computed whole by one thread, so results never depend on the thread count.

/// A team of threads that run the same task together (for now: the calling thread alone).
pub struct Team {
    threads: usize,
}

/// Runs `f` with a team of `threads` threads.
pub fn with_team<R>(threads: usize, f: impl FnOnce(&Team) -> R) -> R {
    f(&Team {
        threads: threads.max(1),
    })
}

impl Team {
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `task` on every thread of the team; returns when all are done. Tasks split their
    /// work by taking items from a shared queue.
    pub fn run(&self, task: &(dyn Fn() + Sync)) {
        task();
    }
}
