//! Element-wise work of a forward split among the team's threads: the copies and activation
//! functions between the products, which one thread would otherwise run alone while the
//! others wait (at 64 rows they were about a tenth of a prefill: two threads gave 1.8x).

use std::sync::Mutex;

use crate::pool::Team;

/// Rows below which the work stays on the calling thread: waking the team costs microseconds.
const MIN_ROWS: usize = 16;

/// Calls `f(index, chunk)` for every `len`-element chunk of `data` (the last may be shorter):
/// the team's threads take chunks in turn when the work spans `rows` activation rows, at least
/// [`MIN_ROWS`]; the calling thread takes them all otherwise. Each chunk is computed whole by one
/// thread, so the result never depends on the thread count.
pub fn for_each_chunk<T: Send>(
    team: &Team,
    rows: usize,
    data: &mut [T],
    len: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if rows < MIN_ROWS || team.threads() == 1 {
        data.chunks_mut(len.max(1))
            .enumerate()
            .for_each(|(i, c)| f(i, c));
        return;
    }
    let queue = Mutex::new(data.chunks_mut(len.max(1)).enumerate());
    team.run(&|_| loop {
        // A poisoned lock means another thread panicked, and its panic is what gets reported.
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        let Some((i, chunk)) = next else { break };
        f(i, chunk);
    });
}
