//! The portable kernels against products computed from the GGUF crate's decoder (the
//! reference's), and the product's independence of how many rows come together.

mod common;

use common::{assert_bits_eq, decoded, product, random_input, random_matrix, rounded_input};
use runahead_cpu::formats::WeightFormat;
use runahead_cpu::matmul::Matrix;
use runahead_cpu::Kernels;

/// Odd shapes for every format: the smallest whole rows, a tail tile, several super-blocks.
fn shapes(format: WeightFormat) -> Vec<(usize, usize)> {
    let unit = format.block_size().max(32);
    let unit = if unit == 256 { 256 } else { 32 };
    vec![
        (1, unit),
        (3, unit * 3),
        (7, unit * 2),
        (13, 768.max(unit * 3)),
    ]
}

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

/// Shapes of the real models' matrices (SmolLM2-135M: 576 wide, FFN 1536, KV 192, vocab
/// 49152; Qwen2.5-Coder-0.5B: 896 wide, FFN 4864, KV 128, vocab 151936) a format can hold
/// (K-quants need rows of whole 256s), each with the input rows to try.
fn real_shapes(format: WeightFormat) -> Vec<(usize, usize, &'static [usize])> {
    use runahead_gguf::GgmlType::*;
    let ty = format.ggml_type();
    let mut shapes: Vec<(usize, usize, &[usize])> = vec![
        (576, 576, &[1, 8, 9]),
        (192, 576, &[2]),
        (1536, 576, &[3]),
        (576, 1536, &[1, 16]),
        (896, 896, &[1, 7]),
        (128, 896, &[4]),
        (4864, 896, &[1]),
        (896, 4864, &[1, 10]),
    ];
    if matches!(ty, Q8_0 | Q4_1) {
        shapes.push((49152, 576, &[1, 9]));
    }
    if ty == Q8_0 {
        shapes.push((151936, 896, &[1]));
    }
    shapes.retain(|&(_, cols, _)| cols.is_multiple_of(format.block_size()));
    shapes
}

/// Every SIMD kernel returns the scalar kernel's bits, on every format, for tiles of 1..=8
/// rows and their combinations, at odd sizes and the real models' sizes.
#[test]
fn simd_kernels_equal_the_scalar_kernels_bit_for_bit() {
    let simd: Vec<Kernels> = [runahead_cpu::Isa::Avx2, runahead_cpu::Isa::Avx512]
        .into_iter()
        .filter_map(Kernels::new)
        .collect();
    if simd.is_empty() {
        eprintln!("no SIMD instruction set on this machine: nothing to compare");
        return;
    }
    for k in simd {
        for format in WeightFormat::all() {
            let odd = shapes(format)
                .into_iter()
                .map(|(r, c)| (r, c, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 17][..]));
            for (s, (rows, cols, ns)) in odd.chain(real_shapes(format)).enumerate() {
                let bytes = random_matrix(format, rows, cols, 100 + s as u64);
                let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
                for &n in ns {
                    let x = random_input(n, cols, (s * 31 + n) as u64);
                    let what = format!("{:?} {format:?} {rows}x{cols}, {n} rows", k.isa());
                    assert_bits_eq(
                        &product(k, 1, w, &x),
                        &product(Kernels::scalar(), 1, w, &x),
                        &what,
                    );
                }
            }
        }
    }
}

/// Products stay exact when activations hit the extremes (-127..127 against weights of
/// -128 and 255-style bytes), where a SIMD pair sum could saturate.
#[test]
fn simd_kernels_handle_extreme_values() {
    let simd = [runahead_cpu::Isa::Avx2, runahead_cpu::Isa::Avx512];
    for k in simd.into_iter().filter_map(Kernels::new) {
        extremes(k);
    }
}

fn extremes(k: Kernels) {
    use runahead_gguf::GgmlType::*;
    for format in WeightFormat::all() {
        let cols = format.block_size().max(32) * if format.block_size() == 256 { 1 } else { 8 };
        let rows = 4;
        // Every byte but the f16 scale fields 0xff or 0x80: saturated nibbles and fifth bits,
        // Q8_0's -128, 6-bit scales of 63, Q6_K scales of -128.
        let mut bytes = random_matrix(format, rows, cols, 1);
        let f16_fields: &[usize] = match format.ggml_type() {
            Q4_0 | Q5_0 | Q8_0 => &[0],
            Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
            Q6_K => &[208],
            _ => &[],
        };
        if !matches!(format, WeightFormat::Float(_)) {
            for block in bytes.chunks_exact_mut(format.block_bytes()) {
                for (i, b) in block.iter_mut().enumerate() {
                    if !f16_fields.iter().any(|&f| i == f || i == f + 1) {
                        *b = if i % 3 == 0 { 0x80 } else { 0xff };
                    }
                }
            }
        }
        let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
        let x: Vec<f32> = (0..3 * cols)
            .map(|i| if i % 5 < 3 { 1.0 } else { -1.0 })
            .collect();
        assert_bits_eq(
            &product(k, 1, w, &x),
            &product(Kernels::scalar(), 1, w, &x),
            &format!("{:?} {format:?} extremes", k.isa()),
        );
    }
}
