//! The profile's shape (one time per dispatch, device timestamps exactly where the device has
//! them), then timing, not correctness (ignored by default; run on purpose):
//! `cargo test --release -p runahead-gpu --test profile -- --ignored --nocapture`
//! prints where a SmolLM2-135M forward (or PROFILE_MODEL's) spends its time on this device, per
//! kind of dispatch, for blocks of 1 and 16 tokens.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{ctx, tiny_ctx};
use pollster::block_on;
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::testing::TinyModel;
use runahead_model::{Batch, LanguageModel};

#[test]
fn profile_times_every_dispatch_with_the_devices_timestamps_where_it_has_them() {
    let ctx = tiny_ctx();
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let mut gpu = GpuModel::load(&ctx, &file, Some(64)).unwrap();
    block_on(gpu.forward_argmax(&Batch::causal(&[1, 2, 3], 0))).unwrap();
    let times = gpu.profile(&Batch::causal(&[4], 3), 2).unwrap();
    // Every dispatch of the forward, then the argmax.
    assert_eq!(times.len(), gpu.dispatches_per_forward() + 1);
    assert!(times.iter().all(|t| !t.label.is_empty() && t.seconds > 0.0));
    let timestamps = ctx
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    println!("timestamp queries: {timestamps}");
    for t in &times {
        match t.device_seconds {
            Some(s) => assert!(timestamps && s.is_finite() && s >= 0.0, "{}: {s}", t.label),
            None => assert!(!timestamps, "{}: no device time", t.label),
        }
    }
    if timestamps {
        let device: f64 = times.iter().filter_map(|t| t.device_seconds).sum();
        assert!(device > 0.0, "the device timed nothing");
    }
}

#[test]
#[ignore = "timing; run with --ignored --nocapture"]
fn smollm2_dispatch_profile() {
    let path = std::env::var_os("PROFILE_MODEL").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf")
        },
        PathBuf::from,
    );
    let file = GgufFile::open(&path).unwrap();
    let mut gpu = GpuModel::load(&ctx(), &file, Some(256)).unwrap();
    // A 32-token cache, as after a short prompt.
    let prompt: Vec<u32> = (0..32).map(|i| 100 + i * 7).collect();
    block_on(gpu.forward_argmax(&Batch::causal(&prompt, 0))).unwrap();
    let reps: usize = std::env::var("PROFILE_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    for m in [1usize, 16] {
        let block: Vec<u32> = (0..m as u32).map(|i| 200 + i).collect();
        let times = gpu.profile(&Batch::causal(&block, 32), reps).unwrap();
        let mut by_kind: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        for t in &times {
            let e = by_kind.entry(&t.label).or_default();
            e.0 += 1;
            e.1 += t.seconds;
        }
        let total: f64 = times.iter().map(|t| t.seconds).sum();
        println!(
            "\nm = {m}: {:.1} ms in {} dispatches",
            total * 1e3,
            times.len()
        );
        println!("| dispatch | count | ms total | ms each | share |");
        println!("| --- | ---: | ---: | ---: | ---: |");
        let mut rows: Vec<_> = by_kind.into_iter().collect();
        rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        for (label, (n, s)) in rows {
            println!(
                "| {label} | {n} | {:.2} | {:.3} | {:.1}% |",
                s * 1e3,
                s * 1e3 / n as f64,
                100.0 * s / total
            );
        }
    }
}

/// The matmul alone at SmolLM2's sizes, per block size: CPU ms per dispatch (PROFILE_REPS,
/// PROFILE_FORMATS=Q4_1,Q8_0, PROFILE_SHAPE=rows,wg or split-k).
#[test]
#[ignore = "timing; run with --ignored --nocapture"]
fn matmul_kernel_times() {
    use runahead_gpu::kernels::{MatmulShape, Op};
    use runahead_gpu::testing::{time_kernel, Input};
    use runahead_model::testing::{random_blocks, TestRng};
    let mut rng = TestRng::new(1);
    let reps: usize = std::env::var("PROFILE_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let formats = std::env::var("PROFILE_FORMATS").unwrap_or("Q4_1".into());
    // PROFILE_SHAPE=rows,wg or split-k tries another matmul work split.
    let mut ctx = ctx();
    if let Ok(shape) = std::env::var("PROFILE_SHAPE") {
        ctx.shape.matmul = if shape == "split-k" {
            MatmulShape::SplitK
        } else {
            let v: Vec<u32> = shape.split(',').map(|s| s.parse().unwrap()).collect();
            MatmulShape::Rows {
                rows: v[0],
                wg: v[1],
            }
        };
    }
    println!("| matmul | m=1 | m=2 | m=4 | m=8 | m=16 | (CPU ms per dispatch, all threads)");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for ty in
        runahead_gguf::GgmlType::all().filter(|t| formats.split(',').any(|f| f == t.to_string()))
    {
        for (rows, cols) in [(1536usize, 576usize), (576, 1536), (49152, 576)] {
            let w = random_blocks(ty, rows * cols, 0.5, &mut rng);
            let row_bytes = ty.bytes_for(cols as u64).unwrap() as u32;
            let mut line = format!("| {ty} {rows}x{cols} |");
            for m in [1usize, 2, 4, 8, 16] {
                let inputs = [
                    Input::Bytes(w.clone()),
                    Input::F32(rng.floats(m * cols, 1.0)),
                    Input::F32(vec![0.0; m * rows]),
                ];
                let p = [cols as u32, rows as u32, row_bytes, 0, rows as u32, 0];
                let r = if rows > 10000 {
                    reps.div_ceil(10)
                } else {
                    reps
                };
                let c0 = cpu_seconds();
                time_kernel(
                    &ctx,
                    Op::Matmul,
                    Some(ty),
                    &inputs,
                    &p,
                    (m, 0),
                    ctx.shape.matmul.grid(rows, cols, m),
                    r,
                )
                .unwrap();
                // time_kernel runs r + 1 dispatches (one warm-up).
                let s = (cpu_seconds() - c0) / (r + 1) as f64;
                line += &format!(" {:.2} |", s * 1e3);
            }
            println!("{line}");
        }
    }
}

/// CPU time of this process, all threads (user + system), from /proc: unlike wall time it
/// hardly depends on what else the (shared, 2-core) machine runs; 10 ms resolution.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses): utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}
