//! Heap bytes a model's parsed GGUF header and its tokenizer take (what a page on WebGPU keeps
//! while its weights stream to the GPU), counted by a wrapping allocator on this 64-bit host.
//!
//! usage: cargo run --release -p runahead-model --example tokenizer_memory -- MODEL.gguf

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use runahead_gguf::Gguf;
use runahead_model::Tokenizer;

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(live, Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: tokenizer_memory MODEL.gguf")?;
    let bytes = std::fs::read(&path)?;
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let header = Gguf::parse_prefix(&bytes, bytes.len() as u64)?;
    let parsed = LIVE.load(Relaxed) - base;
    let in_file = header.data_offset as usize;
    let tokenizer = Tokenizer::from_metadata(&header.metadata)?;
    let peak = PEAK.load(Relaxed) - base;
    drop(header);
    let alone = LIVE.load(Relaxed) - base;
    println!(
        "{path}: header {:.1} MiB in the file, parsed {:.1} MiB; tokenizer {:.1} MiB \
         ({} tokens); peak while building it {:.1} MiB",
        mib(in_file),
        mib(parsed),
        mib(alone),
        tokenizer.vocab_size(),
        mib(peak)
    );
    Ok(())
}
