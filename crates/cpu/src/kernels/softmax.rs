//! Softmax in the reference's arithmetic (the maximum, each `exp(x - max)`, the sum of the
//! exponentials in order, each times the sum's inverse), for one row or for the rows of a
//! unit of attention side by side.

use super::Kernels;

/// Rows whose sums are added side by side.
const ROWS_A_GROUP: usize = 8;

impl Kernels {
    /// In-place softmax in the reference's arithmetic: the maximum, each `exp(x - max)`, then
    /// [`crate::ops::normalize`].
    pub fn softmax(self, x: &mut [f32]) {
        let max = crate::ops::max_of(x);
        self.exp_minus(x, max);
        crate::ops::normalize(x);
    }

    /// [`Kernels::softmax`] of each row (the same bits), the rows' sums side by side: each is a
    /// chain of adds in order, which one row at a time waits on add after add.
    pub fn softmax_rows(self, rows: &mut [Vec<f32>]) {
        #[cfg(target_arch = "x86_64")]
        if self.isa == super::Isa::Avx512 {
            // SAFETY: `Kernels` holds `Avx512` only where the CPU has AVX-512 F and VL.
            return unsafe { softmax_rows_avx512(rows) };
        }
        softmax_rows_with(rows, |x, max| self.exp_minus(x, max))
    }
}

/// [`Kernels::softmax_rows`] with AVX-512 for the maximum and the scaling (the exponentials'
/// kernel is its own): compiled for SSE2, those two were over half of the softmax's time.
///
/// # Safety
/// The CPU must support the features named.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn softmax_rows_avx512(rows: &mut [Vec<f32>]) {
    // SAFETY: this function's own features.
    softmax_rows_with(rows, |x, max| unsafe {
        super::x86::exp_minus_avx512(x, max)
    })
}

/// [`Kernels::softmax_rows`] with `exp_minus` for the exponentials, compiled into its caller
/// (and so with its caller's target features).
#[inline(always)]
fn softmax_rows_with(rows: &mut [Vec<f32>], exp_minus: impl Fn(&mut [f32], f32)) {
    for group in rows.chunks_mut(ROWS_A_GROUP) {
        for row in group.iter_mut() {
            let max = crate::ops::max_of(row);
            exp_minus(row, max);
        }
        let mut sums = [0f32; ROWS_A_GROUP];
        let mut take = |got: &[f32]| sums[..got.len()].copy_from_slice(got);
        match group.len() {
            1 => take(&sums_side_by_side::<1>(group)),
            2 => take(&sums_side_by_side::<2>(group)),
            3 => take(&sums_side_by_side::<3>(group)),
            4 => take(&sums_side_by_side::<4>(group)),
            5 => take(&sums_side_by_side::<5>(group)),
            6 => take(&sums_side_by_side::<6>(group)),
            7 => take(&sums_side_by_side::<7>(group)),
            _ => take(&sums_side_by_side::<ROWS_A_GROUP>(group)),
        }
        for (row, sum) in group.iter_mut().zip(sums) {
            crate::ops::divide_by(row, sum);
        }
    }
}

/// Each of `N` rows' sum in order from zero (as [`crate::ops::normalize`] adds), the rows'
/// chains interleaved one value at a time in registers (`N` known, the compiler keeps them
/// there; summed through an array over a group of any size, they went through the stack, a
/// store and a load every eight adds).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // one value of every row in turn: no one row's iterator
fn sums_side_by_side<const N: usize>(rows: &[Vec<f32>]) -> [f32; N] {
    let common = rows.iter().map(Vec::len).min().unwrap_or(0);
    let heads: [&[f32]; N] = std::array::from_fn(|r| &rows[r][..common]);
    let mut sums = [0f32; N];
    for at in 0..common {
        for r in 0..N {
            sums[r] += heads[r][at];
        }
    }
    for (sum, row) in sums.iter_mut().zip(rows) {
        *sum = row[common..].iter().fold(*sum, |sum, &v| sum + v);
    }
    sums
}
