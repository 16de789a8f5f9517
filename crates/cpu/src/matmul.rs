//! `y[n, rows] = x[n, cols] · W^T` with `W` in its block format: each weight row is decoded
//! once per tile of [`TILE`] activation rows, and threads split the weight rows (never a
//! reduction), so every output value is the same whatever `n`, the tiling or the threads.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::activations::Activations;
use crate::error::CpuError;
use crate::formats::WeightFormat;
use crate::kernels::{Kernels, Out};
use crate::layout::{Layout, TILE};
use crate::pool::{Padded, Team};
use crate::q8::{q8_blocks_per_row, BlockQ8K, Q8Slice};

/// A weight matrix in its GGUF block format: `rows` output features of `cols` inputs each,
/// row after row.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    pub bytes: &'a [u8], // [rows, row_bytes]
    /// The order of the rows' bytes (`Layout::Packed` and `Layout::Lanes16` only for block
    /// formats, `Lanes16` only for whole groups of sixteen rows).
    pub layout: Layout,
}

impl<'a> Matrix<'a> {
    /// Checks that `bytes` hold exactly `rows` rows of `cols` elements of `format`.
    pub fn new(
        name: &str,
        format: WeightFormat,
        rows: usize,
        cols: usize,
        bytes: &'a [u8],
    ) -> Result<Self, CpuError> {
        let ty = format.ggml_type();
        let expected = (rows as u64)
            .checked_mul(cols as u64)
            .and_then(|n| ty.bytes_for(n))
            .filter(|_| cols.is_multiple_of(format.block_size()));
        if expected != Some(bytes.len() as u64) || rows == 0 || cols == 0 {
            return Err(CpuError::MatrixSize {
                name: name.to_owned(),
                rows,
                cols,
                ty,
                expected: expected.unwrap_or(u64::MAX),
                found: bytes.len(),
            });
        }
        Ok(Matrix {
            format,
            rows,
            cols,
            bytes,
            layout: Layout::Gguf,
        })
    }

    /// The same matrix over `bytes`, the rows of `self.bytes` rearranged to `layout` (same size).
    pub fn rearranged(self, bytes: &'a [u8], layout: Layout) -> Self {
        debug_assert_eq!(bytes.len(), self.bytes.len());
        Matrix {
            bytes,
            layout,
            ..self
        }
    }

    pub fn row_bytes(&self) -> usize {
        self.cols / self.format.block_size() * self.format.block_bytes()
    }

    /// Row `r`'s bytes, in the file's order or [`Layout::Packed`] (a row of
    /// [`Layout::Lanes16`] is spread over its group's bytes).
    pub fn row(&self, r: usize) -> &'a [u8] {
        debug_assert_ne!(self.layout, Layout::Lanes16);
        let rb = self.row_bytes();
        &self.bytes[r * rb..(r + 1) * rb]
    }
}

/// `out[t * rows + r] = w.row(r) · x.row(t)`: `out` is `[x.n, w.rows]`.
pub fn matmul(kernels: Kernels, team: &Team, w: Matrix, x: &mut Activations, out: &mut [f32]) {
    matmul_many(kernels, team, &mut [(w, out)], x);
}

/// Several products of the same input (q/k/v) in one pass of the team.
pub fn matmul_many(
    kernels: Kernels,
    team: &Team,
    jobs: &mut [(Matrix, &mut [f32])],
    x: &mut Activations,
) {
    products(kernels, team, jobs, x, None);
}

/// What a gated product does to each activation row's part of a unit's weight rows: `(a, b)`,
/// the first product's outputs (written in place) and the second's.
pub type Then<'t> = &'t (dyn Fn(&mut [f32], &[f32]) + Sync);

/// The products of two matrices of the same shape (gate and up) on one input, then `then` on
/// their outputs: each unit computes the same weight rows of both and applies `then` to them,
/// so the element-wise step between the products (SwiGLU's) runs on every thread as their
/// outputs come, where the caller ran it alone after the products while the others waited.
pub fn matmul_gated(
    kernels: Kernels,
    team: &Team,
    jobs: &mut [(Matrix, &mut [f32]); 2],
    x: &mut Activations,
    then: Then,
) {
    let (a, b) = (&jobs[0].0, &jobs[1].0);
    assert!(
        a.rows == b.rows && a.cols == b.cols,
        "a gated product's matrices have one shape"
    );
    products(kernels, team, jobs, x, Some(then));
}

/// [`matmul_many`], and with `then` [`matmul_gated`].
fn products(
    kernels: Kernels,
    team: &Team,
    jobs: &mut [(Matrix, &mut [f32])],
    x: &mut Activations,
    then: Option<Then>,
) {
    let n = x.n;
    // Quantize the input once for every format family in use, before any thread starts.
    let needs = |pred: fn(&WeightFormat) -> bool| jobs.iter().any(|(w, _)| pred(&w.format));
    if needs(|f| matches!(f, WeightFormat::Q32(_))) {
        let layouts = jobs
            .iter()
            .filter(|(w, _)| matches!(w.format, WeightFormat::Q32(_)))
            .map(|(w, _)| w.layout);
        x.q8(kernels, layouts);
    }
    if needs(|f| matches!(f, WeightFormat::K(_))) {
        x.q8k(kernels);
    }
    let input = Input {
        f32_rows: x.rows,
        q8: x.q8_ready(),
        q8k: x.q8k_ready(),
    };
    let matrices: Vec<Matrix> = jobs.iter().map(|(w, _)| *w).collect();
    // A unit: a job, its first weight row and how many; its outputs are those rows' part of
    // each of the `n` rows of the job's `[n, rows]` result, which the kernels write in place.
    let mut units: Vec<Unit> = Vec::new();
    for (j, (w, out)) in jobs.iter().enumerate() {
        // Not only in debug builds: the units below write through raw pointers.
        assert_eq!(out.len(), n * w.rows, "a product's output size");
        debug_assert_eq!(x.cols, w.cols);
        if then.is_some() && j > 0 {
            // A gated product's units cover the same rows of both matrices.
            continue;
        }
        let chunk = chunk_rows(w, team.threads());
        units.extend(
            (0..w.rows)
                .step_by(chunk)
                .map(|r| (j, r, chunk.min(w.rows - r))),
        );
    }
    let outs = Outputs(jobs.iter_mut().map(|(_, out)| out.as_mut_ptr()).collect());
    let product_rows = |j: usize, first_row: usize, rows: usize| {
        let w = &matrices[j];
        for t in (0..n).step_by(TILE).map(|t| t..(t + TILE).min(n)) {
            let mut tile_out: [&mut [f32]; TILE] = Default::default();
            for (slot, t) in tile_out.iter_mut().zip(t.clone()) {
                // SAFETY: job `j`'s output is `n * w.rows` values (checked above), borrowed
                // mutably for this call; the units of a job have disjoint rows, and each unit
                // is computed once, by one thread (`Shares::next` hands each index out once).
                *slot = unsafe {
                    std::slice::from_raw_parts_mut(outs.job(j).add(t * w.rows + first_row), rows)
                };
            }
            compute_tile(
                kernels,
                w,
                &input,
                first_row,
                t.clone(),
                &mut tile_out[..t.len()],
            );
        }
    };
    let compute = |(first_job, first_row, rows): Unit| {
        let last_job = if then.is_some() { 1 } else { first_job };
        for j in first_job..=last_job {
            product_rows(j, first_row, rows);
        }
        if let Some(then) = then {
            let w_rows = matrices[0].rows;
            for t in 0..n {
                // SAFETY: as in `product_rows`: this unit's rows of each activation row of
                // both outputs (`[n, w_rows]` each), which no other unit touches.
                let (a, b) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(
                            outs.job(0).add(t * w_rows + first_row),
                            rows,
                        ),
                        std::slice::from_raw_parts(outs.job(1).add(t * w_rows + first_row), rows),
                    )
                };
                then(a, b);
            }
        }
    };
    // Each thread walks its own contiguous share of the units in order, so its weight reads
    // are one sequential stream the hardware prefetches (units dealt out one by one from a
    // shared queue leave every thread a stream broken every few kilobytes: two threads decode
    // SmolLM2 only 5% faster than one); a thread that finishes its share takes what is left
    // of the others', so a thread slowed or absent on a busy machine delays nobody.
    let shares = team.threads().min(units.len());
    if shares <= 1 {
        // One thread (always in wasm): the units in order, with nothing to share.
        units.into_iter().for_each(compute);
        return;
    }
    let plan = Shares::new(units.len(), shares);
    team.run(&|thread| {
        let me = thread % shares;
        while let Some(i) = plan.next(me) {
            compute(units[i]);
        }
    });
}

/// Each job's output (`[n, rows]`), written by the team's threads in disjoint units.
struct Outputs(Vec<*mut f32>);

// SAFETY: the threads write through these pointers only to the disjoint parts of their units
// (see `matmul_many`), while the outputs are borrowed mutably for the product.
unsafe impl Sync for Outputs {}

impl Outputs {
    fn job(&self, j: usize) -> *mut f32 {
        self.0[j]
    }
}

/// `count` units in contiguous shares, one per thread: each thread takes its own share's units
/// in order, then what is left of the others' (in share order after its own).
struct Shares {
    bounds: Vec<usize>, // [shares + 1]: share s is bounds[s]..bounds[s + 1]
    cursors: Vec<Padded<AtomicUsize>>, // [shares]: the next unit of each share
}

impl Shares {
    fn new(count: usize, shares: usize) -> Self {
        let bounds: Vec<usize> = (0..=shares).map(|s| s * count / shares).collect();
        let cursors = bounds[..shares]
            .iter()
            .map(|&b| Padded(AtomicUsize::new(b)))
            .collect();
        Shares { bounds, cursors }
    }

    /// The next unit for the owner of share `me`, or `None` once every unit is taken.
    fn next(&self, me: usize) -> Option<usize> {
        let shares = self.cursors.len();
        (0..shares).map(|k| (me + k) % shares).find_map(|s| {
            let i = self.cursors[s].fetch_add(1, Ordering::Relaxed);
            (i < self.bounds[s + 1]).then_some(i)
        })
    }
}

/// A unit of work: job, first weight row, weight rows.
type Unit = (usize, usize, usize);

/// Weight bytes per unit of work, so that a unit's rows stay in the L2 cache while every
/// tile of input rows passes over them.
const CHUNK_BYTES: usize = 64 << 10;

/// Rows per unit of work: few enough to stay in cache, and several units per thread, since
/// one unit per thread would leave a thread idle when another is slowed (a busy machine);
/// each unit costs a turn of a shared cursor. Four a thread: eight make a one-row SmolLM2
/// forward 13-18% slower on eight threads of a 16-core Xeon, and 0-5% on two here.
fn chunk_rows(w: &Matrix, threads: usize) -> usize {
    let by_cache = (CHUNK_BYTES / w.row_bytes()).max(1);
    let by_threads = if threads > 1 {
        w.rows.div_ceil(threads * 4)
    } else {
        w.rows
    };
    let rows = by_cache.min(by_threads).max(1);
    match w.layout {
        // A unit takes whole groups of rows side by side.
        Layout::Lanes16 => rows.next_multiple_of(crate::packed_lanes::LANES),
        _ => rows,
    }
}

/// The input of a product in the forms the kernels take.
struct Input<'a> {
    f32_rows: &'a [f32], // [n, cols]
    q8: Q8Slice<'a>,     // [n, q8_blocks_per_row] (when needed)
    q8k: &'a [BlockQ8K], // [n, cols / 256] (when needed)
}

/// Weight rows `first_row..first_row + out rows` of `w` times input rows `t` into `out`
/// (`[t.len()][rows]`).
fn compute_tile(
    kernels: Kernels,
    w: &Matrix,
    x: &Input,
    first_row: usize,
    t: Range<usize>,
    out: &mut [&mut [f32]],
) {
    let rb = w.row_bytes();
    let rows = out.first().map_or(0, |p| p.len());
    let w_rows = &w.bytes[first_row * rb..(first_row + rows) * rb];
    let out = Out::new(out);
    match w.format {
        WeightFormat::Float(f) => {
            let x = &x.f32_rows[t.start * w.cols..t.end * w.cols];
            kernels.float_rows(f, w_rows, rb, x, out)
        }
        WeightFormat::Q32(f) => {
            let nb = q8_blocks_per_row(w.cols);
            kernels.q32_rows(
                f,
                w.layout,
                w_rows,
                rb,
                x.q8.tile(t.start, t.len(), nb),
                out,
            )
        }
        WeightFormat::K(f) => {
            let nb = w.cols / 256;
            kernels.k_rows(
                f,
                w.layout,
                w_rows,
                rb,
                &x.q8k[t.start * nb..t.end * nb],
                out,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread alone (its team's others never came) takes every unit exactly once: its own
    /// share in order, then the rest of the others'.
    #[test]
    fn a_lone_thread_takes_every_unit_once() {
        for (count, shares) in [(10, 3), (2, 2), (7, 1), (5, 4)] {
            for me in 0..shares {
                let plan = Shares::new(count, shares);
                let taken: Vec<usize> = std::iter::from_fn(|| plan.next(me)).collect();
                let mut sorted = taken.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..count).collect::<Vec<_>>(),
                    "{count}/{shares}, {me}"
                );
                let own = plan.bounds[me]..plan.bounds[me + 1];
                assert!(
                    taken.iter().zip(own.clone()).all(|(&t, o)| t == o),
                    "own share first"
                );
            }
        }
    }

    /// Threads interleaving take disjoint units that cover them all, each starting in order
    /// in its own share.
    #[test]
    fn interleaved_threads_split_the_units() {
        let plan = Shares::new(9, 3);
        let mut taken = vec![Vec::new(); 3];
        for step in 0..12 {
            let me = [0, 1, 2, 0][step % 4];
            if let Some(i) = plan.next(me) {
                taken[me].push(i);
            }
        }
        assert_eq!(taken[1][..2], [3, 4]);
        assert_eq!(taken[2][..2], [6, 7]);
        let mut all: Vec<usize> = taken.concat();
        all.sort_unstable();
        assert_eq!(all, (0..9).collect::<Vec<_>>());
    }
}
