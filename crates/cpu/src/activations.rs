//! Activation rows quantized to 8 bits, as llama.cpp does inside its quantized products: one
//! f32 scale per block of 32 (for the 32-element weight formats) or of 256 (for the K-quants).
//! Integer weight x activation products are then exact, so every kernel (scalar or SIMD) of a
//! format computes the same integers and, by a fixed float order, the same f32 result.
//!
//! Quantization is scalar on every instruction set: it costs `rows * cols` against the
//! `rows * cols * out_features` of the product it feeds, and one implementation cannot drift.

/// 32 activations: `x[i] ≈ d * qs[i]`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8 {
    pub d: f32,
    /// `d * sum(qs)`: what a weight block's offset `m` multiplies.
    pub s: f32,
    pub qs: [i8; 32],
}

/// 256 activations: `x[i] ≈ d * qs[i]`, with the sum of each run of 16.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16], // [16]: sum of qs[16 * g..16 * g + 16]
}

/// The scale of a block whose largest magnitude is `amax`, and its inverse (0 for an all-zero
/// block). A NaN or infinite value makes the scale NaN, so it reaches the output as NaN (a
/// corrupt model must not quietly produce finite logits).
fn scale_of(block: &[f32]) -> (f32, f32) {
    let mut amax = 0f32;
    let mut finite = true;
    for &v in block {
        finite &= v.is_finite();
        amax = amax.max(v.abs());
    }
    if !finite {
        return (f32::NAN, 0.0);
    }
    let d = amax / 127.0;
    let id = if amax > 0.0 { 127.0 / amax } else { 0.0 };
    (d, id)
}

/// Rounds to the nearest integer (ties to even), in [-127, 127]: the activation side of an
/// unsigned x signed byte product never holds -128, so SIMD sign tricks cannot overflow.
fn quantize_value(v: f32, id: f32) -> i8 {
    (v * id).round_ties_even().clamp(-127.0, 127.0) as i8
}

/// Appends the blocks of `x` (a whole number of blocks of 32) to `out`.
pub fn quantize_q8(x: &[f32], out: &mut Vec<BlockQ8>) {
    debug_assert!(x.len().is_multiple_of(32));
    for block in x.chunks_exact(32) {
        let (d, id) = scale_of(block);
        let mut qs = [0i8; 32];
        for (q, &v) in qs.iter_mut().zip(block) {
            *q = quantize_value(v, id);
        }
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        out.push(BlockQ8 {
            d,
            s: d * sum as f32,
            qs,
        });
    }
}

/// Appends the blocks of `x` (a whole number of blocks of 256) to `out`.
pub fn quantize_q8k(x: &[f32], out: &mut Vec<BlockQ8K>) {
    debug_assert!(x.len().is_multiple_of(256));
    for block in x.chunks_exact(256) {
        let (d, id) = scale_of(block);
        let mut qs = [0i8; 256];
        for (q, &v) in qs.iter_mut().zip(block) {
            *q = quantize_value(v, id);
        }
        let mut bsums = [0i16; 16];
        for (s, run) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
            // |sum| <= 16 * 127, well inside i16.
            *s = run.iter().map(|&q| q as i16).sum();
        }
        out.push(BlockQ8K { d, qs, bsums });
    }
}

/// The input of a matrix product: `n` rows of `cols` f32 activations, with the quantized
/// forms the weight formats in use need, made once per input.
pub struct Activations<'a> {
    pub rows: &'a [f32], // [n, cols]
    pub n: usize,
    pub cols: usize,
    q8: Vec<BlockQ8>,   // [n, cols / 32], empty until needed
    q8k: Vec<BlockQ8K>, // [n, cols / 256], empty until needed
}

impl<'a> Activations<'a> {
    pub fn new(rows: &'a [f32], cols: usize) -> Self {
        debug_assert!(cols > 0 && rows.len().is_multiple_of(cols));
        Activations {
            rows,
            n: rows.len() / cols.max(1),
            cols,
            q8: Vec::new(),
            q8k: Vec::new(),
        }
    }

    /// The rows in blocks of 32 (quantized on first use).
    pub fn q8(&mut self) -> &[BlockQ8] {
        if self.q8.is_empty() {
            self.q8.reserve(self.rows.len() / 32);
            quantize_q8(self.rows, &mut self.q8);
        }
        &self.q8
    }

    /// The blocks of 32 made so far (empty before [`Activations::q8`]).
    pub fn q8_ready(&self) -> &[BlockQ8] {
        &self.q8
    }

    /// The blocks of 256 made so far (empty before [`Activations::q8k`]).
    pub fn q8k_ready(&self) -> &[BlockQ8K] {
        &self.q8k
    }

    /// The rows in blocks of 256 (quantized on first use).
    pub fn q8k(&mut self) -> &[BlockQ8K] {
        if self.q8k.is_empty() {
            self.q8k.reserve(self.rows.len() / 256);
            quantize_q8k(self.rows, &mut self.q8k);
        }
        &self.q8k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_blocks_round_to_within_half_a_step() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
            .collect();
        let mut q = Vec::new();
        quantize_q8(&x, &mut q);
        assert_eq!(q.len(), 2);
        for (b, block) in q.iter().enumerate() {
            assert!(
                block.qs.iter().any(|&v| v.abs() == 127),
                "block {b} uses the range"
            );
            for i in 0..32 {
                let back = block.d * block.qs[i] as f32;
                let err = (back - x[b * 32 + i]).abs();
                assert!(
                    err <= block.d * 0.5 + 1e-6,
                    "element {i} of block {b}: {err}"
                );
            }
            let sum: i32 = block.qs.iter().map(|&v| v as i32).sum();
            assert_eq!(block.s, block.d * sum as f32);
        }
    }

    #[test]
    fn q8k_blocks_carry_run_sums_and_zero_blocks_stay_zero() {
        let mut x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.61).sin()).collect();
        x[256..].fill(0.0);
        let mut q = Vec::new();
        quantize_q8k(&x, &mut q);
        for g in 0..16 {
            let sum: i16 = q[0].qs[16 * g..16 * g + 16].iter().map(|&v| v as i16).sum();
            assert_eq!(q[0].bsums[g], sum, "run {g}");
        }
        assert_eq!(q[1].d, 0.0);
        assert!(q[1].qs.iter().all(|&v| v == 0));
    }

    #[test]
    fn non_finite_input_gives_a_nan_scale() {
        let mut x = vec![0.5f32; 32];
        x[3] = f32::NAN;
        let mut q = Vec::new();
        quantize_q8(&x, &mut q);
        assert!(q[0].d.is_nan());
    }
}
