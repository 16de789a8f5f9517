//! Helpers shared by the CPU engine's tests: random matrices in every format and products
//! computed independently of the kernels.

#![allow(dead_code)]

pub mod kernel_cases;
pub mod random_trees;

use runahead_cpu::activations::Activations;
use runahead_cpu::formats::WeightFormat;
use runahead_cpu::matmul::{matmul, Matrix};
use runahead_cpu::pool::with_team;
use runahead_cpu::q8::{quantize_q8, quantize_q8k, Q8Rows};
use runahead_cpu::Kernels;
use runahead_gguf::dequantize;
use runahead_model::testing::{random_blocks, TestRng};

/// Seeded random blocks of `format` for a `rows x cols` matrix.
pub fn random_matrix(format: WeightFormat, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = TestRng::new(seed);
    let scale = 2.0 / (cols as f32).sqrt();
    random_blocks(format.ggml_type(), rows * cols, scale, &mut rng)
}

/// Activations with a spread of magnitudes between blocks, as after an RMSNorm.
pub fn random_input(n: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = TestRng::new(seed ^ 0x5eed);
    (0..n * cols)
        .map(|i| rng.symmetric() * (1.0 + ((i / 32) % 5) as f32))
        .collect()
}

/// `[n, rows]` product through the engine's driver.
pub fn product(kernels: Kernels, threads: usize, w: Matrix, x: &[f32]) -> Vec<f32> {
    let mut acts = Activations::new(x, w.cols);
    let mut out = vec![0f32; acts.n * w.rows];
    with_team(threads, |team| {
        matmul(kernels, team, w, &mut acts, &mut out)
    });
    out
}

/// What the kernels multiply the weights by: the input as the format's activation
/// quantization rounds it (exact f32 for float formats).
pub fn rounded_input(format: WeightFormat, x: &[f32]) -> Vec<f32> {
    match format {
        WeightFormat::Float(_) => x.to_vec(),
        WeightFormat::Q32(_) => {
            let mut q = Q8Rows::default();
            quantize_q8(x, &mut q);
            q.qs.iter()
                .zip(&q.d)
                .flat_map(|(qs, &d)| qs.map(|v| d * v as f32))
                .collect()
        }
        WeightFormat::K(_) => {
            let mut q = Vec::new();
            quantize_q8k(x, &mut q);
            q.iter()
                .flat_map(|b| b.qs.map(|v| b.d * v as f32))
                .collect()
        }
    }
}

/// The weights decoded by the GGUF crate (the reference's decoder): `[rows, cols]`.
pub fn decoded(format: WeightFormat, bytes: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut w = vec![0f32; rows * cols];
    dequantize(format.ggml_type(), bytes, &mut w).expect("whole blocks");
    w
}

/// Asserts `a == b` bit for bit, naming the first differing element.
pub fn assert_bits_eq(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        panic!("{what}: element {i} differs: {} vs {}", a[i], b[i]);
    }
}
