//! Prints the f16 KV cache a model's engines keep at a few context sizes: every layer holding
//! every entry, and with sliding-window layers keeping only their ring
//! (`runahead_model::kv_ring`), as the CPU and GPU engines and their memory plans do.
//!
//! usage: cargo run -p runahead-model --example kv_memory -- MODEL.gguf [CONTEXT...]
//! (contexts 4096 and 32768 when none is given)

use runahead_gguf::GgufFile;
use runahead_model::Plan;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: kv_memory MODEL.gguf [CONTEXT...]")?;
    let mut contexts: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if contexts.is_empty() {
        contexts = vec![4096, 32768];
    }
    let file = GgufFile::open(&path)?;
    let plan = Plan::from_header(&file.header)?;
    let c = &plan.config;
    let windows: Vec<_> = plan.layers.iter().map(|l| l.attention.window).collect();
    let sliding = windows.iter().filter(|w| w.is_some()).count();
    println!(
        "{path}: {} layers ({sliding} sliding, window {}), kv_dim {}, trained context {}",
        c.n_layers,
        windows.iter().flatten().next().map_or(0, |w| *w),
        c.kv_dim(),
        c.context_length
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for context in contexts {
        let context = context.min(c.context_length);
        let every = 4 * (c.kv_dim() as u64) * (c.n_layers as u64) * context as u64;
        let rows = plan.kv_rows(context);
        let kept = plan.kv_cache_bytes(context);
        println!(
            "context {context:>6}: every entry {every} bytes ({:.1} MiB); with rings {kept} bytes \
             ({:.1} MiB, {} rows a sliding layer)",
            mib(every),
            mib(kept),
            rows.iter().min().copied().unwrap_or(0)
        );
    }
    Ok(())
}
