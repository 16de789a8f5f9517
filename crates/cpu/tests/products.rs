//! The product driver (`matmul`): a gated product, SwiGLU's step done inside its units.

mod common;

use common::{assert_bits_eq, product, random_input, random_matrix};
use runahead_cpu::formats::WeightFormat;
use runahead_cpu::matmul::Matrix;
use runahead_cpu::Isa;

/// A gated product (SwiGLU's gate and up, the element-wise step done by each unit of rows as
/// its products come) equals the two products followed by the step over whole rows, bit for
/// bit: every instruction set, one thread and three, one to nine activation rows, row-by-row
/// and sixteen-rows layouts, and a format per kernel family.
#[test]
fn a_gated_product_is_the_two_products_then_the_step() {
    use runahead_cpu::activations::Activations;
    use runahead_cpu::formats::{KFormat, Q32Format};
    use runahead_cpu::layout::Layout;
    use runahead_cpu::matmul::matmul_gated;
    use runahead_cpu::pool::with_team;
    let (rows, cols) = (208, 256); // 13 groups of sixteen rows
    let test = "a_gated_product_is_the_two_products_then_the_step";
    for kernels in Isa::kernels_for_test(test, &Isa::ALL) {
        for format in [
            WeightFormat::Q32(Q32Format::Q4_1),
            WeightFormat::Q32(Q32Format::Q8_0),
            WeightFormat::K(KFormat::Q4_K),
        ] {
            let (g, u) = (
                random_matrix(format, rows, cols, 21),
                random_matrix(format, rows, cols, 22),
            );
            let rb = g.len() / rows;
            let layout = kernels.layout_for(format, rows);
            let arrange = |w: &[u8]| {
                let mut out = vec![0u8; w.len()];
                if kernels.pack_as(layout, format, w, rb, &mut out) {
                    out
                } else {
                    w.to_vec()
                }
            };
            let (gp, up) = (arrange(&g), arrange(&u));
            fn matrix<'a>(
                format: WeightFormat,
                (rows, cols): (usize, usize),
                bytes: &'a [u8],
                packed: &'a [u8],
                layout: Layout,
            ) -> Matrix<'a> {
                let m = Matrix::new("w", format, rows, cols, bytes).unwrap();
                if packed == bytes {
                    m
                } else {
                    m.rearranged(packed, layout)
                }
            }
            let shape = (rows, cols);
            let wg = matrix(format, shape, &g, &gp, layout);
            let wu = matrix(format, shape, &u, &up, layout);
            for threads in [1, 3] {
                for n in [1, 2, 5, 9] {
                    let x = random_input(n, cols, 40 + n as u64);
                    let mut want = product(kernels, threads, wg, &x);
                    let want_up = product(kernels, threads, wu, &x);
                    for (a, b) in want.chunks_mut(rows).zip(want_up.chunks(rows)) {
                        kernels.silu_mul(a, b);
                    }
                    let (mut gate, mut upv) = (vec![0f32; n * rows], vec![0f32; n * rows]);
                    let mut acts = Activations::new(&x, cols);
                    let step = |a: &mut [f32], b: &[f32]| kernels.silu_mul(a, b);
                    with_team(threads, |team| {
                        matmul_gated(
                            kernels,
                            team,
                            &mut [(wg, &mut gate[..]), (wu, &mut upv[..])],
                            &mut acts,
                            &step,
                        )
                    });
                    let what = format!(
                        "{:?} {format:?} {layout:?}, {threads} threads, {n} rows",
                        kernels.isa()
                    );
                    assert_bits_eq(&gate, &want, &what);
                    assert_bits_eq(&upv, &want_up, &what);
                }
            }
        }
    }
}
