//! The one place that decides whether this browser can run the engine: WebGPU present, an
//! adapter, and limits the kernels need. `checkWebGpu()` runs it before a page fetches any model
//! byte; the device it opened is kept for the load that follows, so the check costs no second
//! device.

use std::cell::RefCell;

use runahead_gpu::{GpuContext, GpuOptions};
use wasm_bindgen::prelude::*;

use crate::backend::has_webgpu;
use crate::error::{Code, WebError};

thread_local! {
    /// The device `checkWebGpu()` opened, taken by the next load.
    static CHECKED: RefCell<Option<GpuContext>> = const { RefCell::new(None) };
}

/// Checks that WebGPU exists and that an adapter with the engine's limits opens a device;
/// rejects with `no_webgpu` or `adapter_limits` otherwise. The npm package calls it before it
/// reads any model byte.
#[wasm_bindgen(js_name = checkWebGpu)]
pub async fn check_webgpu() -> Result<(), JsValue> {
    let ctx = open_new().await?;
    CHECKED.with(|c| *c.borrow_mut() = Some(ctx));
    Ok(())
}

/// The checked device when there is one, else a new one (same checks).
pub(crate) async fn open() -> Result<GpuContext, WebError> {
    match CHECKED.with(|c| c.borrow_mut().take()) {
        Some(ctx) => Ok(ctx),
        None => open_new().await,
    }
}

async fn open_new() -> Result<GpuContext, WebError> {
    if !has_webgpu() {
        return Err(WebError::new(
            Code::NoWebGpu,
            "this browser does not expose WebGPU (navigator.gpu is missing): use a recent \
             Chrome, Edge or Safari, or enable WebGPU in the browser's settings, or load with \
             backend 'auto' or 'cpu'",
        ));
    }
    Ok(GpuContext::new(GpuOptions::default()).await?)
}
