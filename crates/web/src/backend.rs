//! Which engine a model loads onto: WebGPU, or the CPU engine (wasm `simd128`, one thread)
//! when the page asks for it or, with `backend: "auto"`, when WebGPU is missing, its adapter is
//! a software fallback (SwiftShader and the like: the CPU engine is faster there) or its limits
//! are below what the GPU engine needs.

use runahead_gpu::required_limits;
use serde::Deserialize;

/// `Engine.load`'s `backend` option.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendOption {
    #[default]
    Auto,
    Webgpu,
    Cpu,
}

/// The engine `load` chose, and why the CPU engine when it was not asked for by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Webgpu,
    Cpu { reason: Option<String> },
}

/// Decides where `auto` goes by looking at the adapter WebGPU offers, without opening a
/// device (the GPU engine opens its own).
pub async fn choose(option: BackendOption) -> Choice {
    match option {
        BackendOption::Webgpu => Choice::Webgpu,
        BackendOption::Cpu => Choice::Cpu { reason: None },
        BackendOption::Auto => match gpu_unusable().await {
            None => Choice::Webgpu,
            Some(reason) => Choice::Cpu {
                reason: Some(reason),
            },
        },
    }
}

/// Why the GPU engine cannot (or should not) run here, or `None` when it can.
async fn gpu_unusable() -> Option<String> {
    if !has_webgpu() {
        return Some("WebGPU is missing (navigator.gpu is undefined)".into());
    }
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = match instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        })
        .await
    {
        Ok(adapter) => adapter,
        Err(e) => return Some(format!("no WebGPU adapter: {e}")),
    };
    let info = adapter.get_info();
    // wgpu reports WebGPU's isFallbackAdapter as device type Cpu.
    if info.device_type == wgpu::DeviceType::Cpu {
        return Some(format!(
            "the WebGPU adapter is a software fallback ({}), slower than the CPU engine",
            if info.name.is_empty() {
                "unnamed"
            } else {
                &info.name
            }
        ));
    }
    required_limits(&adapter.limits())
        .err()
        .map(|e| format!("the WebGPU adapter's limits are too small: {e}"))
}

/// Whether `navigator.gpu` exists (checked first: wgpu's own error for it is less clear).
pub fn has_webgpu() -> bool {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into());
    navigator
        .and_then(|n| js_sys::Reflect::get(&n, &"gpu".into()))
        .is_ok_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_parse_and_default_to_auto() {
        let parse = |json: &str| serde_json::from_str::<BackendOption>(json);
        assert_eq!(parse(r#""auto""#).unwrap(), BackendOption::Auto);
        assert_eq!(parse(r#""webgpu""#).unwrap(), BackendOption::Webgpu);
        assert_eq!(parse(r#""cpu""#).unwrap(), BackendOption::Cpu);
        for bad in [r#""gpu""#, r#""CPU""#, "1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(BackendOption::default(), BackendOption::Auto);
    }

    #[test]
    fn a_backend_asked_for_by_name_is_taken_without_probing() {
        let choose = |o| pollster::block_on(choose(o));
        assert_eq!(choose(BackendOption::Webgpu), Choice::Webgpu);
        assert_eq!(choose(BackendOption::Cpu), Choice::Cpu { reason: None });
    }
}
