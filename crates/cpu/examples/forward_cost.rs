//! Times forwards of a real model on the CPU engine: decode tokens/s and the cost of a block of
//! m rows relative to one row (what speculative verification pays).
//!
//! cargo run --release -p runahead-cpu --example forward_cost -- MODEL.gguf [THREADS] [ISA]

use std::sync::Arc;
use std::time::Instant;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions, Isa};
use runahead_gguf::GgufFile;
use runahead_model::{Batch, LanguageModel};

/// Nanoseconds this thread has run on a CPU (Linux; 0 elsewhere): on a busy machine, what a
/// forward costs when it is not waiting for a core.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: forward_cost MODEL.gguf [THREADS] [scalar|avx2|avx512]")?;
    let threads = args.get(2).map(|t| t.parse()).transpose()?;
    let isa = match args.get(3).map(String::as_str) {
        Some("scalar") => Some(Isa::Scalar),
        Some("avx2") => Some(Isa::Avx2),
        Some("avx512") => Some(Isa::Avx512),
        _ => None,
    };
    let file = Arc::new(GgufFile::open(path)?);
    // FORWARD_COST_PROMPT=1024: the cache length the timed forwards run behind (attention's
    // share grows with it).
    let prompt_len: usize = std::env::var("FORWARD_COST_PROMPT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    // FORWARD_COST_CONTEXT=2048: the KV cache's capacity (runahead bench's), default just
    // above what the forwards use.
    let context: usize = std::env::var("FORWARD_COST_CONTEXT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(prompt_len + 128);
    let options = CpuOptions {
        context: Some(context),
        threads,
        isa,
    };
    let mut m = CpuEngine::load(file, &options)?;
    println!("{} threads, {:?} kernels", m.threads(), m.isa());
    let prompt: Vec<u32> = (0..prompt_len as u32).map(|i| 100 + i * 7 % 5000).collect();
    let t = Instant::now();
    for (i, chunk) in prompt.chunks(64).enumerate() {
        block_on(m.forward(&Batch::causal(chunk, i * 64).logits_for_last(1)))?;
    }
    println!(
        "prefill {prompt_len}: {:.1} tok/s",
        prompt_len as f64 / t.elapsed().as_secs_f64()
    );
    let (t, c) = (Instant::now(), cpu_ns());
    let n = 32;
    for i in 0..n {
        let pos = m.cache_len();
        block_on(m.forward_argmax(&Batch::causal(&[200 + i], pos)))?;
    }
    let cpu_ms = (cpu_ns() - c) as f64 / 1e6 / n as f64;
    let wall = t.elapsed().as_secs_f64();
    println!(
        "decode: {:.1} tok/s, caller thread {cpu_ms:.2} ms CPU per token",
        n as f64 / wall
    );
    let base = m.cache_len();
    let mut one = 0.0;
    // FORWARD_COST_BLOCK=8: only blocks of 8 rows, many times (for a profiler).
    let only: Option<usize> = std::env::var("FORWARD_COST_BLOCK")
        .ok()
        .and_then(|v| v.parse().ok());
    // FORWARD_COST_SIZES=1,2,3,5: the block sizes timed (default 1, 2, 4, 8, 16).
    let listed: Option<Vec<usize>> = std::env::var("FORWARD_COST_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect());
    let sizes = match (only, listed) {
        (Some(n), _) => vec![n],
        (None, Some(list)) if !list.is_empty() => list,
        _ => vec![1usize, 2, 4, 8, 16],
    };
    for rows in sizes {
        let block: Vec<u32> = (0..rows as u32).map(|i| 300 + i).collect();
        // FORWARD_COST_REPS=1000: more forwards, so a profile is mostly them.
        let reps = std::env::var("FORWARD_COST_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if only.is_some() { 100 } else { 8 });
        let (t, c) = (Instant::now(), cpu_ns());
        for _ in 0..reps {
            m.truncate(base);
            block_on(m.forward(&Batch::causal(&block, base)))?;
        }
        let ms = t.elapsed().as_secs_f64() * 1000.0 / reps as f64;
        let cpu = (cpu_ns() - c) as f64 / 1e6 / reps as f64;
        if one == 0.0 {
            one = ms;
        }
        println!(
            "{rows:2} rows: {ms:6.2} ms ({cpu:6.2} ms CPU in the caller), {:.2}x one row",
            ms / one
        );
    }
    Ok(())
}
