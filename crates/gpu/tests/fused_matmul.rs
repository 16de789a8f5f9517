//! The products that read their input through a fused step (`matmul_input_rms_norm.wgsl`,
//! `matmul_input_silu_mul.wgsl`) against a plain Rust reference of the step then the product,
//! on seeded random inputs of odd sizes, in every matmul shape, with the residual add, and
//! batch-invariant (a token alone gives the bits it gets inside a block).

mod common;

use common::{close, ctx, MATMUL_SHAPES};
use pollster::block_on;
use runahead_gguf::{dequantize, GgmlType};
use runahead_gpu::kernels::{MatmulShape, Op};
use runahead_gpu::testing::{f32s, run_kernel, Input};
use runahead_model::testing::{random_blocks, TestRng};

/// The fused input is the same code for every block format: one 32-weight format, one
/// 256-weight (k-quant) format, and f32.
const FORMATS: [GgmlType; 3] = [GgmlType::F32, GgmlType::Q4_1, GgmlType::Q4_K];

/// The shapes each format runs in: lavapipe compiles the 16-row emulated kernel slowly (seconds a
/// pipeline, three token tiles each), so it runs on SmolLM2's format only; its code for the
/// input is the one the 2-row shape runs on every format.
fn shapes_for(ty: GgmlType) -> Vec<MatmulShape> {
    match ty {
        GgmlType::Q4_1 => MATMUL_SHAPES.to_vec(),
        _ => MATMUL_SHAPES[1..].to_vec(),
    }
}

const EPS: f32 = 1e-5;

struct Case<'a> {
    op: Op,
    shape: MatmulShape,
    ty: GgmlType,
    w: &'a [u8],
    rows: usize,
    cols: usize,
    /// [m, cols] (norm) or [m, 2 cols] (gate | up).
    x: &'a [f32],
    /// The norm's weights, [cols].
    g: &'a [f32],
}

impl Case<'_> {
    fn run(&self, x: &[f32], m: usize, y0: Option<&[f32]>) -> Vec<f32> {
        let row_bytes = self.ty.bytes_for(self.cols as u64).unwrap() as u32;
        let p = [
            self.cols as u32,
            self.rows as u32,
            row_bytes,
            0,
            self.rows as u32,
            y0.is_some() as u32,
            EPS.to_bits(),
        ];
        let y = y0.map_or(vec![f32::NAN; m * self.rows], |y| y.to_vec());
        let mut inputs = vec![
            Input::Bytes(self.w.to_vec()),
            Input::F32(x.to_vec()),
            Input::F32(y),
        ];
        if self.op == Op::MatmulRmsNorm {
            inputs.push(Input::F32(self.g.to_vec()));
        }
        let mut ctx = ctx();
        ctx.shape.matmul = self.shape;
        let grid = self.shape.grid(self.rows, self.cols, m);
        let out = block_on(run_kernel(
            &ctx,
            self.op,
            Some(self.ty),
            &inputs,
            &p,
            (m, 0),
            grid,
            2,
        ));
        f32s(&out.unwrap())
    }

    /// The step, then the product, in plain Rust.
    fn reference(&self, wf: &[f32], m: usize) -> Vec<f32> {
        let cols = self.cols;
        (0..m)
            .flat_map(|t| {
                let input: Vec<f32> = match self.op {
                    Op::MatmulRmsNorm => {
                        let x = &self.x[t * cols..(t + 1) * cols];
                        let ss: f32 = x.iter().map(|v| v * v).sum();
                        let scale = 1.0 / (ss / cols as f32 + EPS).sqrt();
                        x.iter().zip(self.g).map(|(v, g)| v * scale * g).collect()
                    }
                    _ => {
                        let row = &self.x[t * 2 * cols..(t + 1) * 2 * cols];
                        let (gate, up) = row.split_at(cols);
                        gate.iter()
                            .zip(up)
                            .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                            .collect()
                    }
                };
                (0..self.rows)
                    .map(|o| (0..cols).map(|k| wf[o * cols + k] * input[k]).sum::<f32>())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

fn check_fused(op: Op, seed: u64) {
    let mut rng = TestRng::new(seed);
    for ty in FORMATS {
        let cols = if ty.block_size() == 256 { 512 } else { 96 };
        let rows = 37;
        let w = random_blocks(ty, rows * cols, 0.5, &mut rng);
        let mut wf = vec![0f32; rows * cols];
        dequantize(ty, &w, &mut wf).unwrap();
        // Norm weights away from 1 and activations away from unit scale, so that a missing
        // weight or scale shows.
        let g: Vec<f32> = rng.floats(cols, 1.0).iter().map(|v| 1.5 + v).collect();
        for m in [1usize, 3, 13] {
            let width = if op == Op::MatmulRmsNorm {
                cols
            } else {
                2 * cols
            };
            let x: Vec<f32> = rng.floats(m * width, 3.0);
            for shape in shapes_for(ty) {
                let case = Case {
                    op,
                    shape,
                    ty,
                    w: &w,
                    rows,
                    cols,
                    x: &x,
                    g: &g,
                };
                let what = format!("{op:?} {ty} m={m} {shape:?}");
                let want = case.reference(&wf, m);
                let got = case.run(&x, m, None);
                close(&got, &want, 1e-4, &what);
                let y0 = rng.floats(m * rows, 1.0);
                let got_acc = case.run(&x, m, Some(&y0));
                let want_acc: Vec<f32> = want.iter().zip(&y0).map(|(a, b)| a + b).collect();
                close(&got_acc, &want_acc, 1e-4, &format!("{what} accumulate"));
                for t in 0..m {
                    let alone = case.run(&x[t * width..(t + 1) * width], 1, None);
                    assert_eq!(
                        alone[..],
                        got[t * rows..(t + 1) * rows],
                        "{what}: row {t} differs from alone"
                    );
                }
            }
        }
    }
}

#[test]
fn product_reading_an_rms_norm_equals_the_norm_then_the_product() {
    check_fused(Op::MatmulRmsNorm, 41);
}

#[test]
fn product_reading_silu_mul_equals_the_step_then_the_product() {
    check_fused(Op::MatmulSiluMul, 42);
}
