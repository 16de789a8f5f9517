//! The element-wise and per-row operations around the matrix products, in the reference's
//! arithmetic (same expressions, same order), so the engines differ only where the products'
//! 8-bit activations make them differ.

/// RMSNorm of each row of `x` (rows of `w.len()`), scaled by `w`; the mean of squares in f64,
/// summed in order, eight rows' sums side by side (one row's chain waits on add after add).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for rows in x.chunks(8 * d.max(1)) {
        let mut sums = [0f64; 8];
        if rows.len() == d {
            // A row alone: its chain, without the side-by-side loop's slicing every eight.
            sums[0] = rows.iter().fold(0.0, |s, &v| s + (v as f64) * (v as f64));
        } else {
            for at in (0..d).step_by(8) {
                for (sum, row) in sums.iter_mut().zip(rows.chunks_exact(d)) {
                    let eight = &row[at..(at + 8).min(d)];
                    *sum = eight.iter().fold(*sum, |s, &v| s + (v as f64) * (v as f64));
                }
            }
        }
        for (sum, row) in sums.iter().zip(rows.chunks_exact(d)) {
            let mean = (sum / d as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            out.extend(row.iter().zip(w).map(|(&v, &g)| v * scale * g));
        }
    }
    out
}

pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Adds `bias` to every row of `rows`.
pub fn add_bias(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        add_in_place(row, bias);
    }
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// The softmax's maximum (see `Kernels::softmax`), in sixteen lanes, each kept by `v > m` (one
/// `max` instruction where `f32::max`'s NaN rule took five): a NaN is never kept, as `f32::max`
/// keeps none, so only the sign of a zero maximum can differ from a fold in order, which no
/// `exp(x - max)` sees.
#[inline(always)]
pub fn max_of(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let whole = x.len() / 16 * 16;
    for sixteen in x[..whole].chunks_exact(16) {
        for (m, &v) in lanes.iter_mut().zip(sixteen) {
            *m = if v > *m { v } else { *m };
        }
    }
    let tail = x[whole..].iter().copied().fold(f32::NEG_INFINITY, f32::max);
    lanes.into_iter().fold(tail, f32::max)
}

/// The softmax's last steps: each exponential times the inverse of their sum (summed in order).
/// (The sum is a pass of its own, in the reference's order: summed beside each call to `exp`,
/// its chain of adds is spilled around every call, which costs more than the exponentials at
/// long contexts.)
pub fn normalize(x: &mut [f32]) {
    let sum = x.iter().fold(0f32, |sum, &v| sum + v);
    divide_by(x, sum);
}

/// Each value times the inverse of `sum` (the softmax's last step).
#[inline(always)]
pub fn divide_by(x: &mut [f32], sum: f32) {
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight rows' sums side by side give each row's own sum in order: the reference's bits,
    /// for block sizes around a group of eight and widths that are not a multiple of 8.
    #[test]
    fn rms_norm_of_rows_side_by_side_is_each_rows_own() {
        for (rows, d) in [(1, 576), (7, 45), (8, 64), (9, 576), (17, 13)] {
            let x: Vec<f32> = (0..rows * d)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.0137)
                .collect();
            let w: Vec<f32> = (0..d).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
            let want: Vec<f32> = x
                .chunks_exact(d)
                .flat_map(|row| {
                    let sum: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum();
                    let scale = 1.0 / ((sum / d as f64) as f32 + 1e-5).sqrt();
                    row.iter().zip(&w).map(move |(&v, &g)| v * scale * g)
                })
                .collect();
            let got = rms_norm(&x, &w, 1e-5);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{rows} rows of {d}");
        }
    }
}
