//! Times one matrix product per format and row count on one thread (the fastest of several
//! runs, so a busy machine blurs it less): cargo run --release -p runahead-cpu --example kernel_cost
//! [ROWS COLS] [scalar|avx2|avx512|best] [THREADS]
//! (KERNEL_COST_ROWS=1,2,8: the activation rows timed; KERNEL_COST_TYPES=Q4_1,Q8_0: the formats)

use std::time::Instant;

use runahead_cpu::activations::Activations;
use runahead_cpu::formats::WeightFormat;
use runahead_cpu::layout::Layout;
use runahead_cpu::matmul::{matmul, Matrix};
use runahead_cpu::pool::with_team;
use runahead_cpu::{Isa, Kernels};
use runahead_gguf::GgmlType;
use runahead_model::testing::{random_blocks, TestRng};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1536);
    let cols: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(768);
    let isa = match args.get(3).map(String::as_str) {
        Some("scalar") => Isa::Scalar,
        Some("avx2") => Isa::Avx2,
        Some("avx512") => Isa::Avx512,
        _ => Isa::best(),
    };
    let threads: usize = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(1);
    let kernels = Kernels::new(isa).unwrap_or_else(Kernels::scalar);
    println!(
        "{rows} x {cols}, {:?} kernels, {threads} threads; microseconds per product",
        kernels.isa()
    );
    let mut rng = TestRng::new(1);
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::F16,
    ] {
        let Some(format) = WeightFormat::of(ty) else {
            continue;
        };
        // KERNEL_COST_TYPES=Q4_1,Q8_0: only these formats (a profile of one kernel).
        if std::env::var("KERNEL_COST_TYPES")
            .is_ok_and(|list| !list.split(',').any(|t| t == format!("{ty:?}")))
        {
            continue;
        }
        if !cols.is_multiple_of(format.block_size()) {
            continue;
        }
        let bytes = random_blocks(ty, rows * cols, 0.05, &mut rng);
        let w = Matrix::new("w", format, rows, cols, &bytes).expect("shape");
        // In the order the engine multiplies (`Kernels::layout_for`); KERNEL_COST_LAYOUT=packed:
        // the row-by-row packing where the engine would take sixteen rows side by side.
        let mut layout = kernels.layout_for(format, rows);
        if layout == Layout::Lanes16
            && std::env::var("KERNEL_COST_LAYOUT").is_ok_and(|v| v == "packed")
        {
            layout = Layout::Packed;
        }
        let mut packed = vec![0u8; bytes.len()];
        let w = if kernels.pack_as(layout, format, &bytes, bytes.len() / rows, &mut packed) {
            w.rearranged(&packed, layout)
        } else {
            w
        };
        let mut line = format!("{ty:>5} {layout:?}:");
        let mut one = 0.0;
        let ns: Vec<usize> = match std::env::var("KERNEL_COST_ROWS") {
            Ok(list) => list.split(',').filter_map(|v| v.parse().ok()).collect(),
            Err(_) => vec![1, 2, 4, 8, 16],
        };
        for n in ns {
            let x = rng.floats(n * cols, 1.0);
            let mut out = vec![0f32; n * rows];
            // The fastest of several short runs: on a busy machine, the run least disturbed.
            // KERNEL_COST_REPS=5000: more products a run (for a profiler).
            let reps = std::env::var("KERNEL_COST_REPS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or((200 / n).max(10));
            let mut us = f64::MAX;
            with_team(threads, |team| {
                for _ in 0..15 {
                    let t = Instant::now();
                    for _ in 0..reps {
                        matmul(kernels, team, w, &mut Activations::new(&x, cols), &mut out);
                    }
                    us = us.min(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
                }
            });
            if n == 1 {
                one = us;
            }
            line += &format!("  n={n}: {us:7.1} ({:.2}x)", us / one);
        }
        println!("{line}");
    }
}
