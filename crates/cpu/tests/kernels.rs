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
    let test = "simd_kernels_equal_the_scalar_kernels_bit_for_bit";
    let simd = Isa::kernels_for_test(test, &Isa::ALL[1..]);
    if simd.is_empty() {
        println!("skipped: {test}: no SIMD instruction set on this machine, nothing to compare");
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
    for k in Isa::kernels_for_test("simd_kernels_handle_extreme_values", &Isa::ALL[1..]) {
        extremes(k);
    }
}

/// `slots` random f16 rows of `len` values inside wider cache rows: the data, the rows' stride
/// and their offset in a cache row.
fn random_cache(
    rng: &mut runahead_model::testing::TestRng,
    slots: usize,
    len: usize,
) -> (Vec<half::f16>, usize, usize) {
    let (stride, offset) = (len * 3 + 5, len + 2);
    let data = rng.floats(slots * stride, 3.0);
    (
        data.into_iter().map(half::f16::from_f32).collect(),
        stride,
        offset,
    )
}

/// The attention kernels of every instruction set give the scalar kernels' bits: scores and
/// weighted sums over random f16 rows, head lengths with and without a tail after the last 8
/// (and past 64, where the weighted sum works 64 at a time), slot counts around the groups of
/// 8 the SIMD scores take, slots in any order and a cache row stride wider than the head; and
/// over rows one after another (`scores_f32_dense`, `weighted_sum_f32_dense`).
#[test]
fn attention_kernels_equal_the_scalar_kernels_bit_for_bit() {
    use runahead_cpu::kernels::{F16Rows, F32Rows};
    use runahead_model::testing::TestRng;

    let every = Isa::kernels_for_test(
        "attention_kernels_equal_the_scalar_kernels_bit_for_bit",
        &Isa::ALL,
    );
    let mut rng = TestRng::new(29);
    for len in [1, 7, 8, 13, 64, 67, 72, 128, 136] {
        for n_slots in [1, 5, 8, 9, 16, 17, 33] {
            let cache = 40;
            let (data, stride, offset) = random_cache(&mut rng, cache, len);
            let rows = F16Rows {
                data: &data,
                stride,
                offset,
                len,
            };
            let q = rng.floats(len, 1.5);
            let p = rng.floats(n_slots, 1.0);
            let slots: Vec<usize> = (0..n_slots)
                .map(|_| (rng.next_u64() % cache as u64) as usize)
                .collect();
            let start = rng.floats(len, 0.5);
            let run = |k: Kernels| {
                let mut scores = vec![7.0];
                k.scores(&q, rows, &slots, 0.125, &mut scores);
                let mut out = start.clone();
                k.weighted_sum(rows, &slots, &p, &mut out);
                (scores, out)
            };
            // The same over the rows widened to f32 once (what attention does where
            // `widens_kv`), and widening itself against `half`.
            let run_widened = |k: Kernels| {
                let mut wide = Vec::new();
                k.widen(rows, cache, &mut wide);
                let exact: Vec<f32> = (0..cache)
                    .flat_map(|s| rows.row(s).iter().map(|v| v.to_f32()))
                    .collect();
                assert_bits_eq(&wide, &exact, &format!("{:?} widen, length {len}", k.isa()));
                let rows = F32Rows {
                    data: &wide,
                    stride: len,
                    offset: 0,
                    len,
                };
                let mut scores = vec![7.0];
                k.scores_f32(&q, rows, &slots, 0.125, &mut scores);
                let mut out = start.clone();
                k.weighted_sum_f32(rows, &slots, &p, &mut out);
                (scores, out)
            };
            let want = run(Kernels::scalar());
            assert_eq!(want.0.len(), n_slots);
            // Rows 0..n_slots one after another (a chunk of the cache every pair sees whole),
            // widened, against the scalar kernels over those slots of the f16 rows.
            let first: Vec<usize> = (0..n_slots.min(cache)).collect();
            let want_dense = {
                let (mut scores, mut out) = (Vec::new(), start.clone());
                runahead_cpu::kernels::scalar::scores(&q, rows, &first, 0.125, &mut scores);
                let p = &p[..first.len()];
                runahead_cpu::kernels::scalar::weighted_sum(rows, &first, p, &mut out);
                (scores, out)
            };
            let dense: Vec<f32> = first
                .iter()
                .flat_map(|&s| rows.row(s).iter().map(|v| v.to_f32()))
                .collect();
            for k in every.iter().copied() {
                let mut scores = vec![7.0];
                k.scores_f32_dense(&q, &dense, first.len(), 0.125, &mut scores);
                let mut out = start.clone();
                k.weighted_sum_f32_dense(&dense, &p[..first.len()], &mut out);
                let what = format!("{:?} row after row, length {len}, {n_slots} slots", k.isa());
                assert_bits_eq(&scores, &want_dense.0, &format!("scores, {what}"));
                assert_bits_eq(&out, &want_dense.1, &format!("weighted sum, {what}"));
            }
            for k in every.iter().copied() {
                let mut runs = vec![("f32", run_widened(k))];
                if k.isa() != Isa::Scalar {
                    runs.push(("f16", run(k)));
                }
                for (rows, got) in runs {
                    let what = format!("{:?} over {rows}, length {len}, {n_slots} slots", k.isa());
                    assert_bits_eq(&got.0, &want.0, &format!("scores, {what}"));
                    assert_bits_eq(&got.1, &want.1, &format!("weighted sum, {what}"));
                }
            }
        }
    }
}

/// Keys widened in each instruction set's own layout (`widen_keys`: in slot pairs with
/// AVX-512, one after another otherwise) score what the scalar kernel scores over the f16 rows,
/// bit for bit: slot counts of whole groups of sixteen and not, head lengths of whole eights
/// and not, the rows at a stride inside a wider cache row.
#[test]
fn keys_in_each_layout_score_as_the_scalar_kernel() {
    use runahead_cpu::kernels::F16Rows;
    use runahead_model::testing::TestRng;

    let every = Isa::kernels_for_test("keys_in_each_layout_score_as_the_scalar_kernel", &Isa::ALL);
    let mut rng = TestRng::new(31);
    for len in [8, 13, 16, 64, 72, 128] {
        for count in [8, 16, 17, 32, 48, 64] {
            let (data, stride, offset) = random_cache(&mut rng, count, len);
            let rows = F16Rows {
                data: &data,
                stride,
                offset,
                len,
            };
            let q = rng.floats(len, 1.5);
            let slots: Vec<usize> = (0..count).collect();
            let mut want = Vec::new();
            runahead_cpu::kernels::scalar::scores(&q, rows, &slots, 0.125, &mut want);
            for k in every.iter().copied() {
                let (mut keys, mut got) = (vec![5.0; 3], vec![7.0]);
                k.widen_keys(rows, count, &mut keys);
                k.scores_keys(&q, &keys, count, 0.125, &mut got);
                let what = format!("{:?} keys, length {len}, {count} slots", k.isa());
                assert_bits_eq(&got, &want, &what);
            }
        }
    }
}

/// Scores and weighted sums of one to seven pairs over rows read straight from the f16 cache
/// (`scores_f16`, `weighted_sums_f16`: in registers with AVX-512 for up to three pairs, a call
/// per pair otherwise) and over the rows widened once (`scores_keys_many`,
/// `weighted_sums_f32_dense`: three pairs a pass with AVX-512, then the rest) give the scalar
/// kernels' bits for each pair: heads of 64 and 128, slot counts of whole sixteens and not,
/// rows at a stride inside a wider cache row.
#[test]
fn pairs_read_from_the_cache_equal_the_scalar_kernels() {
    use runahead_cpu::kernels::{scalar, F16Rows};
    use runahead_model::testing::TestRng;

    let every = Isa::kernels_for_test(
        "pairs_read_from_the_cache_equal_the_scalar_kernels",
        &Isa::ALL,
    );
    let mut rng = TestRng::new(37);
    for len in [64, 128] {
        for count in [16, 24, 32, 64] {
            let (data, stride, offset) = random_cache(&mut rng, count, len);
            let rows = F16Rows {
                data: &data,
                stride,
                offset,
                len,
            };
            let slots: Vec<usize> = (0..count).collect();
            for pairs in 1..=7 {
                let q: Vec<Vec<f32>> = (0..pairs).map(|_| rng.floats(len, 1.5)).collect();
                let p: Vec<Vec<f32>> = (0..pairs).map(|_| rng.floats(count, 1.0)).collect();
                let start: Vec<Vec<f32>> = (0..pairs).map(|_| rng.floats(len, 0.5)).collect();
                let mut want_scores = vec![Vec::new(); pairs];
                let mut want_sums = start.clone();
                for j in 0..pairs {
                    scalar::scores(&q[j], rows, &slots, 0.125, &mut want_scores[j]);
                    scalar::weighted_sum(rows, &slots, &p[j], &mut want_sums[j]);
                }
                for k in every.iter().copied() {
                    let what = format!("{:?}, length {len}, {count} slots, {pairs} pairs", k.isa());
                    let qs: Vec<&[f32]> = q.iter().map(Vec::as_slice).collect();
                    let mut scores = vec![vec![9.0]; pairs];
                    k.scores_f16(&qs, rows, count, 0.125, &mut scores);
                    let ps: Vec<&[f32]> = p.iter().map(Vec::as_slice).collect();
                    let mut sums = start.clone();
                    let mut outs: Vec<&mut [f32]> =
                        sums.iter_mut().map(Vec::as_mut_slice).collect();
                    k.weighted_sums_f16(rows, &ps, &mut outs);
                    let (mut keys, mut values, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
                    k.widen_keys(rows, count, &mut keys);
                    k.widen(rows, count, &mut values);
                    let mut wide_scores = vec![vec![9.0]; pairs];
                    k.scores_keys_many(&qs, &keys, count, 0.125, &mut wide_scores, &mut scratch);
                    let mut wide_sums = start.clone();
                    let mut outs: Vec<&mut [f32]> =
                        wide_sums.iter_mut().map(Vec::as_mut_slice).collect();
                    k.weighted_sums_f32_dense(&values, &ps, &mut outs);
                    for j in 0..pairs {
                        for (scores, sums, from) in [
                            (&scores[j], &sums[j], "the cache"),
                            (&wide_scores[j], &wide_sums[j], "widened rows"),
                        ] {
                            let what = format!("{what}, from {from}");
                            assert_eq!(scores[0], 9.0, "appended after what was there, {what}");
                            assert_bits_eq(
                                &scores[1..],
                                &want_scores[j],
                                &format!("scores, {what}"),
                            );
                            assert_bits_eq(sums, &want_sums[j], &format!("sums, {what}"));
                        }
                    }
                }
            }
        }
    }
}

/// Every f16 bit pattern through the attention kernels of every instruction set: the SIMD
/// conversion (hardware on x86-64, integer operations on NEON and simd128) must give what
/// `half` gives (NaNs compared as NaNs).
#[test]
fn attention_kernels_convert_every_f16_like_the_scalar_path() {
    use half::f16;
    use runahead_cpu::kernels::F16Rows;

    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let rows = F16Rows {
        data: &all,
        stride: 0,
        offset: 0,
        len: all.len(),
    };
    let sum = |k: Kernels| {
        let mut out = vec![0f32; all.len()];
        k.weighted_sum(rows, &[0], &[1.0], &mut out);
        out
    };
    let want = sum(Kernels::scalar());
    let test = "attention_kernels_convert_every_f16_like_the_scalar_path";
    for k in Isa::kernels_for_test(test, &Isa::ALL[1..]) {
        for (i, (a, b)) in sum(k).iter().zip(&want).enumerate() {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{:?}: f16 {i:#06x}: {a} vs {b}",
                k.isa()
            );
        }
    }
}

/// A tile whose activation scales and values were not arranged by tile (only `Activations`
/// arranges them; a kernel that wants them arranged arranges a copy) gives the same bits as one
/// whose were, on every format and tile size; and so does an input that only the kernels of
/// sixteen weight rows side by side take (quantized in element order, arranged block by block).
#[test]
fn q32_products_do_not_depend_on_the_activations_arrangement() {
    use runahead_cpu::activations::{quantize_q8_for, Activations};
    use runahead_cpu::formats::Q32Format;
    use runahead_cpu::kernels::Out;
    use runahead_cpu::layout::Layout;
    use runahead_cpu::q8::{q8_blocks_per_row, Q8Rows};
    // Sixteen rows: AVX-512 multiplies them side by side (`Layout::Lanes16`).
    let (rows, cols) = (16, 576);
    let test = "q32_products_do_not_depend_on_the_activations_arrangement";
    for kernels in Isa::kernels_for_test(test, &Isa::ALL) {
        for format in [
            Q32Format::Q4_0,
            Q32Format::Q4_1,
            Q32Format::Q5_0,
            Q32Format::Q5_1,
            Q32Format::Q8_0,
        ] {
            let w = random_matrix(WeightFormat::Q32(format), rows, cols, 7);
            for n in 1..=8 {
                let x = random_input(n, cols, 3 + n as u64);
                let mut q = Q8Rows::default();
                for row in x.chunks_exact(cols) {
                    quantize_q8_for(kernels, row, &mut q);
                }
                let mut arranged = q.clone();
                arranged.arrange_tile_scales(q8_blocks_per_row(cols));
                if kernels.values_by_tile() {
                    arranged.arrange_tile_values(q8_blocks_per_row(cols));
                }
                if kernels.lanes_by_tile() {
                    arranged.arrange_lanes(q8_blocks_per_row(cols));
                }
                let rb = w.len() / rows;
                let packed = kernels.pack(WeightFormat::Q32(format), &w, rb);
                let mut lanes = vec![0u8; w.len()];
                let lanes16 = kernels.layout_for(WeightFormat::Q32(format), rows);
                let lanes16 =
                    kernels.pack_as(lanes16, WeightFormat::Q32(format), &w, rb, &mut lanes);
                let mut layouts = vec![(Layout::Gguf, &w)];
                layouts.extend(packed.as_ref().map(|p| (Layout::Packed, p)));
                if lanes16 {
                    layouts.push((Layout::Lanes16, &lanes));
                }
                for (layout, w) in layouts {
                    let product = |q: &Q8Rows| {
                        let mut values = vec![0f32; n * rows];
                        let mut by_row: Vec<&mut [f32]> = values.chunks_mut(rows).collect();
                        let out = Out::new(&mut by_row);
                        kernels.q32_rows(format, layout, w, rb, q.as_slice(), out);
                        values
                    };
                    let what = format!("{:?} {format:?} {layout:?}, {n} rows", kernels.isa());
                    let want = product(&q);
                    assert_bits_eq(&want, &product(&arranged), &what);
                    if layout == Layout::Lanes16 {
                        // What the engine hands an input only these kernels take: element
                        // order, arranged block by block, a lone row too.
                        let mut only = Activations::new(&x, cols);
                        let lanes_only = only.q8(kernels, std::iter::once(layout));
                        let mut values = vec![0f32; n * rows];
                        let mut by_row: Vec<&mut [f32]> = values.chunks_mut(rows).collect();
                        let out = Out::new(&mut by_row);
                        kernels.q32_rows(format, layout, w, rb, lanes_only, out);
                        assert_bits_eq(&want, &values, &format!("{what}, lanes only"));
                    }
                }
            }
        }
    }
}

/// `step`-spaced f32 bit patterns through the exponentials of every instruction set (softmax's
/// `exp(x - max)` and SiLU's `exp(-x)`), a million at a time, against the scalar path's
/// `f32::exp`: x86 replicates glibc's `expf`, which must give the same bits everywhere, the
/// branches for |x| >= 88, infinities and NaN included.
fn check_exponentials(test: &str, step: u64) {
    const CHUNK: u64 = 1 << 20;
    let all = u32::MAX as u64;
    let simd = Isa::kernels_for_test(test, &Isa::ALL[1..]);
    let same = |a: &[f32], b: &[f32], what: &str| {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let both_nan = x.is_nan() && y.is_nan();
            assert!(
                x.to_bits() == y.to_bits() || both_nan,
                "{what}: {i}: {x} vs {y}"
            );
        }
    };
    let mut start = 0;
    while start <= all {
        let xs: Vec<f32> = (0..CHUNK)
            .map(|i| start + i * step)
            .take_while(|&b| b <= all)
            .map(|b| f32::from_bits(b as u32))
            .collect();
        start += CHUNK * step;
        let ones = vec![1f32; xs.len()];
        let run = |k: Kernels| {
            let (mut e, mut s) = (xs.clone(), xs.clone());
            k.exp_minus(&mut e, 0.0);
            k.silu_mul(&mut s, &ones);
            (e, s)
        };
        let (e_want, s_want) = run(Kernels::scalar());
        for &k in &simd {
            let (e, s) = run(k);
            same(
                &e,
                &e_want,
                &format!("{:?} exp from {:#x}", k.isa(), xs[0].to_bits()),
            );
            same(
                &s,
                &s_want,
                &format!("{:?} silu from {:#x}", k.isa(), xs[0].to_bits()),
            );
        }
    }
}

/// Every 61st f32 (70 million: every exponent of both signs, a few seconds).
#[test]
fn exponentials_equal_the_scalar_path_bit_for_bit() {
    check_exponentials("exponentials_equal_the_scalar_path_bit_for_bit", 61);
}

/// Every f32 (about three minutes in release):
/// `cargo test --release -p runahead-cpu --test kernels -- --ignored every_f32`.
#[test]
#[ignore = "every f32: run by hand"]
fn exponentials_equal_the_scalar_path_on_every_f32() {
    check_exponentials("exponentials_equal_the_scalar_path_on_every_f32", 1);
}

/// Softmax rows of odd lengths, scores up to +-120 (lanes past 88 take the scalar branch
/// beside vector lanes), on every instruction set: the scalar path's bits.
#[test]
fn softmax_equals_the_scalar_path_bit_for_bit() {
    let simd = Isa::kernels_for_test("softmax_equals_the_scalar_path_bit_for_bit", &Isa::ALL[1..]);
    for len in [1, 7, 8, 9, 33, 65, 1031] {
        let mut row = random_input(1, len, len as u64);
        for (i, v) in row.iter_mut().enumerate() {
            *v *= [1.0, 12.0, 120.0][i % 3];
        }
        let mut want = row.clone();
        Kernels::scalar().softmax(&mut want);
        for &k in &simd {
            let mut got = row.clone();
            k.softmax(&mut got);
            assert_bits_eq(&got, &want, &format!("{:?} softmax of {len}", k.isa()));
        }
    }
}

/// Softmax of rows side by side (their sums interleaved) equals each row's own, rows of
/// different lengths (a block's causal pairs, some with masked `-inf` scores) in groups of every
/// size from one to eight and a remainder.
#[test]
fn softmax_of_rows_side_by_side_equals_each_rows_own() {
    let row = |r: usize| -> Vec<f32> {
        let mut v: Vec<f32> = random_input(1, 60 + r % 9, r as u64)
            .iter()
            .map(|v| v * 9.0)
            .collect();
        if r % 4 == 1 {
            v[r % 7] = f32::NEG_INFINITY;
        }
        v
    };
    let test = "softmax_of_rows_side_by_side_equals_each_rows_own";
    let every = Isa::kernels_for_test(test, &Isa::ALL);
    for count in (1..=9).chain([19]) {
        let rows: Vec<Vec<f32>> = (0..count).map(row).collect();
        for &k in &every {
            let mut together = rows.clone();
            k.softmax_rows(&mut together);
            for (r, (got, row)) in together.iter().zip(&rows).enumerate() {
                let mut want = row.clone();
                Kernels::scalar().softmax(&mut want);
                assert_bits_eq(got, &want, &format!("{:?} row {r} of {count}", k.isa()));
            }
        }
    }
}
