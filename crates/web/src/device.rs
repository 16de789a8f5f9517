//! The one place that decides whether this browser can run the engine: WebGPU present, an
//! adapter, and limits the kernels need. `checkWebGpu()` runs it before a page fetches any model
//! byte; the device it opened is kept for the load that follows, so the check costs no second
//! device.

use std::cell::RefCell;

use runahead_gpu::{GpuContext, GpuOptions};
use wasm_bindgen::prelude::*;

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
             Chrome, Edge or Safari, or enable WebGPU in the browser's settings",
        ));
    }
    Ok(GpuContext::new(GpuOptions::default()).await?)
}

/// Whether `navigator.gpu` exists (checked first: wgpu's own error for it is less clear).
fn has_webgpu() -> bool {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into());
    navigator
        .and_then(|n| js_sys::Reflect::get(&n, &"gpu".into()))
        .is_ok_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}
