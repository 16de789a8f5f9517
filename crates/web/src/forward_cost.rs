//! `engine.forwardCost(prompt, options, countCalls)`: what one forward of the GPU engine costs
//! the page's host, measured by the engine the way `runahead bench --backend gpu` measures it
//! natively ([`GpuModel::host_costs`]): dispatches, encode+submit and wait milliseconds
//! (`performance.now()`), and, when the page passes `countCalls` (a function returning how
//! many wasm -> JS calls the instance has made so far), the calls of each phase.

use runahead_gpu::{GpuModel, HostCost, MAX_HOST_REPS};
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;

use crate::error::{Code, WebError};
use crate::options;
use crate::session::Session;

/// `forwardCost`'s options; the defaults are `runahead bench`'s (`--verify-block 8`,
/// `--host-reps 10`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ForwardCostOptions {
    /// Rows of each measured block (1: a decoding forward; 8: a verification block).
    pub rows: Vec<usize>,
    /// Forwards per block size; the medians count.
    pub reps: usize,
}

impl Default for ForwardCostOptions {
    fn default() -> Self {
        ForwardCostOptions {
            rows: vec![1, 8],
            reps: 10,
        }
    }
}

/// One block size's medians, in the field names of `runahead bench --json`'s `host_cost`.
#[derive(Serialize)]
struct Forward {
    rows: usize,
    dispatches: u64,
    encode_submit_ms: f64,
    wait_ms: f64,
    /// Absent without `countCalls`.
    calls_encode_submit: Option<u64>,
    calls_wait: Option<u64>,
    staging_writes: u64,
    reps: usize,
    encode_submit_samples_ms: Vec<f64>,
}

impl From<HostCost> for Forward {
    fn from(h: HostCost) -> Self {
        Forward {
            rows: h.rows,
            dispatches: h.dispatches,
            encode_submit_ms: h.encode_submit_ms,
            wait_ms: h.wait_ms,
            calls_encode_submit: h.calls_encode_submit,
            calls_wait: h.calls_wait,
            staging_writes: h.staging_writes,
            reps: h.reps,
            encode_submit_samples_ms: h.encode_submit_samples_ms,
        }
    }
}

#[derive(Serialize)]
pub struct ForwardCost {
    adapter: String,
    prompt_tokens: usize,
    /// Dispatches of the forward's list, without the argmax (`runahead bench`'s
    /// `dispatches_per_forward`).
    dispatches_per_forward: usize,
    host_cost: Vec<Forward>,
}

/// `options` read and checked (block sizes 1 to `most_rows`, 1 to `most_reps` forwards each)
/// and `prompt` tokenized as is (`empty_prompt` when it has no tokens): what both engines'
/// `forwardCost` take.
pub fn checked(
    options: &JsValue,
    session: &Session,
    prompt: &str,
    most_rows: usize,
    most_reps: usize,
) -> Result<(ForwardCostOptions, Vec<u32>), WebError> {
    let opts: ForwardCostOptions = options::from_js(options)?;
    if opts.rows.is_empty() || opts.rows.iter().any(|&r| r == 0 || r > most_rows) {
        return Err(WebError::new(
            Code::InvalidOption,
            format!("rows: one or more block sizes of 1 to {most_rows}"),
        ));
    }
    if opts.reps == 0 || opts.reps > most_reps {
        return Err(WebError::new(
            Code::InvalidOption,
            format!("reps: 1 to {most_reps}"),
        ));
    }
    let tokens = session.tokenizer.encode(prompt).map_err(WebError::from)?;
    if prompt.is_empty() || tokens.is_empty() {
        return Err(WebError::new(Code::EmptyPrompt, "the prompt has no tokens"));
    }
    Ok((opts, tokens))
}

/// Measures `model` behind `prompt` (tokenized as is, like `runahead bench`'s prompts). Leaves
/// the prompt in the cache; the next generation starts from an empty one anyway.
pub async fn measure(
    model: &mut GpuModel,
    session: &Session,
    prompt: &str,
    options: &JsValue,
    count_calls: Option<&js_sys::Function>,
) -> Result<ForwardCost, WebError> {
    let max_rows = runahead_gpu::MAX_ROWS;
    let (opts, tokens) = checked(options, session, prompt, max_rows, MAX_HOST_REPS)?;
    if tokens.len() > max_rows {
        return Err(WebError::new(
            Code::PromptTooLong,
            format!("a forward-cost prompt holds at most {max_rows} tokens"),
        ));
    }
    // A non-number (or a throw) reads as 0: the counts come out 0 rather than failing the run.
    let read = |f: &js_sys::Function| {
        f.call0(&JsValue::NULL)
            .ok()
            .and_then(|v| v.as_f64())
            .map_or(0, |n| n.max(0.0) as u64)
    };
    let counter = count_calls.map(|f| move || read(f));
    let counter_ref = counter.as_ref().map(|c| c as &dyn Fn() -> u64);
    let costs = model
        .host_costs(&tokens, &opts.rows, opts.reps, counter_ref)
        .await?;
    Ok(ForwardCost {
        adapter: session.info.adapter.clone(),
        prompt_tokens: tokens.len(),
        dispatches_per_forward: model.dispatches_per_forward(),
        host_cost: costs.into_iter().map(Forward::from).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_the_benchs_and_refuse_unknown_fields() {
        let o: ForwardCostOptions = options::from_json("{}").expect("empty options");
        assert_eq!(o, ForwardCostOptions::default());
        let o: ForwardCostOptions =
            options::from_json(r#"{"rows": [1], "reps": 3}"#).expect("valid options");
        assert_eq!((o.rows, o.reps), (vec![1], 3));
        for bad in [r#"{"row": [1]}"#, r#"{"rows": 1}"#, r#"{"reps": -1}"#] {
            assert!(
                options::from_json::<ForwardCostOptions>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
