//! The portable kernels against products computed from the GGUF crate's decoder (the
//! reference's), and the product's independence of how many rows come together.

mod common;

use common::kernel_cases::{equals_scalar, extremes, shapes};
use common::{assert_bits_eq, decoded, product, random_input, random_matrix, rounded_input};
use runahead_cpu::formats::WeightFormat;
use runahead_cpu::matmul::Matrix;
use runahead_cpu::{Isa, Kernels};

/// Against the decoded weights times the rounded input in f64: the same terms, so only float
/// rounding of the sums may differ.
#[test]
fn scalar_kernels_equal_the_decoded_product() {
    for format in WeightFormat::all() {
        for (s, (rows, cols)) in shapes(format).into_iter().enumerate() {
            let bytes = random_matrix(format, rows, cols, 11 + s as u64);
            let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
            let n = 3;
            let x = random_input(n, cols, s as u64);
            let y = product(Kernels::scalar(), 1, w, &x);
            let wd = decoded(format, &bytes, rows, cols);
            let xr = rounded_input(format, &x);
            for t in 0..n {
                for r in 0..rows {
                    let terms =
                        (0..cols).map(|i| wd[r * cols + i] as f64 * xr[t * cols + i] as f64);
                    let exact: f64 = terms.clone().sum();
                    let magnitude: f64 = terms.map(f64::abs).sum();
                    let got = y[t * rows + r] as f64;
                    assert!(
                        (got - exact).abs() <= 1e-5 * magnitude + 1e-6,
                        "{format:?} {rows}x{cols}: row {r} of input {t}: {got} vs {exact}"
                    );
                }
            }
        }
    }
}

/// The error 8-bit activations add, bounded by the rounding of each input:
/// |sum w (x - x̂)| <= sum |w| * d_block / 2.
#[test]
fn activation_rounding_error_stays_within_half_a_step() {
    for format in WeightFormat::all() {
        let (rows, cols) = (9, 512);
        let bytes = random_matrix(format, rows, cols, 5);
        let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
        let x = random_input(2, cols, 8);
        let y = product(Kernels::scalar(), 1, w, &x);
        let wd = decoded(format, &bytes, rows, cols);
        let xr = rounded_input(format, &x);
        let mut worst_relative = 0f64;
        for t in 0..2 {
            for r in 0..rows {
                let (mut exact, mut bound, mut magnitude) = (0f64, 0f64, 0f64);
                for i in 0..cols {
                    let (wv, xv) = (wd[r * cols + i] as f64, x[t * cols + i] as f64);
                    exact += wv * xv;
                    magnitude += (wv * xv).abs();
                    bound += wv.abs() * (xv - xr[t * cols + i] as f64).abs();
                }
                let err = (y[t * rows + r] as f64 - exact).abs();
                assert!(
                    err <= bound + 1e-5 * magnitude + 1e-6,
                    "{format:?}: row {r} of input {t}: error {err} above {bound}"
                );
                worst_relative = worst_relative.max(err / magnitude);
            }
        }
        if matches!(format, WeightFormat::Float(_)) {
            assert!(
                worst_relative < 1e-5,
                "{format:?}: float rows are not rounded"
            );
        }
    }
}

/// A row's products are the same bits alone or among 2..17 rows (tiles of 8 plus a tail), and
/// whatever the thread count.
#[test]
fn products_do_not_depend_on_the_number_of_rows() {
    for format in WeightFormat::all() {
        let (rows, cols) = (75, 512);
        let bytes = random_matrix(format, rows, cols, 3);
        let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
        let x = random_input(17, cols, 4);
        let alone: Vec<f32> = (0..17)
            .flat_map(|t| product(Kernels::scalar(), 1, w, &x[t * cols..(t + 1) * cols]))
            .collect();
        for n in 2..=17 {
            let block = product(Kernels::scalar(), 1, w, &x[..n * cols]);
            assert_bits_eq(&block, &alone[..n * rows], &format!("{format:?}, {n} rows"));
        }
        for threads in 2..=3 {
            let split = product(Kernels::best(), threads, w, &x);
            assert_bits_eq(&split, &alone, &format!("{format:?}, {threads} threads"));
        }
    }
}

#[test]
fn a_matrix_of_the_wrong_size_is_an_error() {
    let format = WeightFormat::of(runahead_gguf::GgmlType::Q4_K).unwrap();
    let bytes = random_matrix(format, 2, 256, 1);
    assert!(Matrix::new("w", format, 2, 256, &bytes).is_ok());
    assert!(Matrix::new("w", format, 3, 256, &bytes).is_err());
    assert!(Matrix::new("w", format, 1, 512, &bytes[..100]).is_err());
    // Rows of 128 are not whole super-blocks even though 4 x 128 = 2 x 256.
    assert!(Matrix::new("w", format, 4, 128, &bytes).is_err());
}

/// Every SIMD kernel returns the scalar kernel's bits, on every format, for tiles of 1..=8
/// rows and their combinations, at odd sizes and the real models' sizes.
#[test]
fn simd_kernels_equal_the_scalar_kernels_bit_for_bit() {
    let simd: Vec<Kernels> = [Isa::Avx2, Isa::Avx512, Isa::Simd128]
        .into_iter()
        .filter_map(Kernels::new)
        .collect();
    if simd.is_empty() {
        eprintln!("no SIMD instruction set on this machine: nothing to compare");
        return;
    }
    for k in simd {
        equals_scalar(k);
    }
}

/// Products stay exact when activations hit the extremes (-127..127 against weights of
/// -128 and 255-style bytes), where a SIMD pair sum could saturate.
#[test]
fn simd_kernels_handle_extreme_values() {
    let simd = [Isa::Avx2, Isa::Avx512, Isa::Simd128];
    for k in simd.into_iter().filter_map(Kernels::new) {
        extremes(k);
    }
}
