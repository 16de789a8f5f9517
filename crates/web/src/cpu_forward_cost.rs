//! `engine.forwardCost(prompt, options)` on the CPU engine: the wall time of a forward of each
//! block size behind the prompt, as the page's wasm runs it (the kernels its build has, the
//! threads it was loaded with). What a verification block costs next to a decoding step is
//! what speculative decoding in that browser can gain; `forward_cost` (the native example)
//! measures the same natively.

use runahead_cpu::CpuEngine;
use runahead_model::{Batch, LanguageModel};
use runahead_speculate::PREFILL_CHUNK;
use serde::Serialize;
use wasm_bindgen::JsValue;
use web_time::Instant;

use crate::error::{Code, WebError};
use crate::forward_cost::{self, ForwardCostOptions};
use crate::pacing::{yield_now, Paced};
use crate::session::Session;

/// Largest block timed: twice the deepest verification block adaptive depth plans.
const MOST_ROWS: usize = 32;
/// Most forwards per block size.
const MOST_REPS: usize = 200;

/// One block size's forwards.
#[derive(Serialize)]
struct Forward {
    rows: usize,
    median_ms: f64,
    min_ms: f64,
    /// The median over one row's median (absent without one row, or when it read 0 ms).
    median_vs_one_row: Option<f64>,
    reps: usize,
}

#[derive(Serialize)]
pub struct CpuForwardCost {
    backend: &'static str,
    kernels: String,
    /// Whether this build multiplies with relaxed SIMD's dot product (the package loads that
    /// build where the browser validates it).
    relaxed_simd: bool,
    threads: usize,
    prompt_tokens: usize,
    forwards: Vec<Forward>,
}

/// Times `options.reps` forwards (argmax of every row, as verification reads them) of each of
/// `options.rows` rows behind `prompt` (tokenized as is). The cache is emptied after; the next
/// generation starts from an empty one anyway.
pub async fn measure(
    model: &mut Paced<CpuEngine>,
    session: &Session,
    prompt: &str,
    options: &JsValue,
) -> Result<CpuForwardCost, WebError> {
    let (opts, tokens) = forward_cost::checked(options, session, prompt, MOST_ROWS, MOST_REPS)?;
    let largest = opts.rows.iter().copied().max().unwrap_or(1);
    let room = model.capacity().saturating_sub(largest);
    if tokens.len() > room {
        return Err(WebError::new(
            Code::PromptTooLong,
            format!(
                "{} prompt tokens and a block of {largest} do not fit the context of {}",
                tokens.len(),
                model.capacity()
            ),
        ));
    }
    model.truncate(0);
    let result = time_blocks(model, &tokens, &opts).await;
    model.truncate(0);
    let forwards = result?;
    let engine = &model.inner;
    Ok(CpuForwardCost {
        backend: "cpu",
        kernels: format!("{:?}", engine.isa()),
        relaxed_simd: runahead_cpu::RELAXED_SIMD,
        threads: engine.threads(),
        prompt_tokens: tokens.len(),
        forwards,
    })
}

async fn time_blocks(
    model: &mut Paced<CpuEngine>,
    prompt: &[u32],
    opts: &ForwardCostOptions,
) -> Result<Vec<Forward>, WebError> {
    let base = prompt.len();
    // In blocks, as a generation prefills: one forward of a long prompt would hold every row's
    // activations at once.
    for (i, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
        model
            .forward_argmax(&Batch::causal(chunk, i * PREFILL_CHUNK).logits_for_last(0))
            .await?;
    }
    let vocab = model.config().vocab_size.max(1) as u32;
    let mut forwards: Vec<Forward> = Vec::new();
    for &rows in &opts.rows {
        let block: Vec<u32> = (0..rows as u32).map(|i| (300 + 7 * i) % vocab).collect();
        let batch = Batch::causal(&block, base);
        // One forward untimed: the first of a size grows the engine's buffers.
        model.forward_argmax(&batch).await?;
        model.truncate(base);
        let mut ms = Vec::with_capacity(opts.reps);
        for _ in 0..opts.reps {
            // The page's turn before each forward, as in a generation, but outside the time.
            yield_now(model.turn).await;
            let start = Instant::now();
            model.inner.forward_argmax(&batch).await?;
            ms.push(start.elapsed().as_secs_f64() * 1e3);
            model.truncate(base);
        }
        ms.sort_by(f64::total_cmp);
        forwards.push(Forward {
            rows,
            median_ms: ms[ms.len() / 2],
            min_ms: ms[0],
            median_vs_one_row: None,
            reps: opts.reps,
        });
    }
    // Against one row's median when one row was timed and took a measurable time (a page
    // that is not cross-origin isolated reads the clock in steps of 0.1 ms).
    let one = forwards
        .iter()
        .find(|f| f.rows == 1)
        .map(|f| f.median_ms)
        .filter(|&one| one > 0.0);
    for f in &mut forwards {
        f.median_vs_one_row = one.map(|one| f.median_ms / one);
    }
    Ok(forwards)
}
