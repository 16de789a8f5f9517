//! Acquiring a device is separate from running on it, so tests and the browser can bring
//! their own.

use std::sync::{Arc, Mutex};

use runahead_gguf::GgmlType;

use crate::kernels::{KernelShape, Op, Pipelines};
use crate::GpuError;

/// What to ask the adapter for.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Caps the storage-buffer binding size used for weights below what the adapter allows
    /// (tests use it to force tensor splitting; `None` takes the adapter's limit).
    pub max_binding_size: Option<u64>,
    /// Overrides the kernel shapes chosen from the adapter (tests run every shape).
    pub shape: Option<KernelShape>,
    /// Most bytes of device memory one model may take (weights, KV cache, activations). A load
    /// that needs more fails with [`GpuError::OverMemoryBudget`] before it creates a buffer.
    /// `None`: only the adapter's buffer limits apply (WebGPU does not report a device's memory).
    pub memory_budget: Option<u64>,
}

/// A device, its queue, and what the engine learned about them.
#[derive(Clone)]
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter_info: String,
    /// Largest storage buffer binding the engine may use.
    pub max_binding_size: u64,
    /// How the kernels split their work on this device.
    pub shape: KernelShape,
    /// [`GpuOptions::memory_budget`].
    pub memory_budget: Option<u64>,
    /// Set once the device is lost or reports an error nobody captured; every later call
    /// fails with it instead of computing garbage.
    pub(crate) fault: Arc<Mutex<Option<GpuError>>>,
    /// Compiled pipelines, shared by every model and test dispatch on this device.
    pipelines: Arc<Mutex<Pipelines>>,
}

impl GpuContext {
    /// Finds an adapter (high performance first) and opens a device with the limits the
    /// engine needs.
    pub async fn new(options: GpuOptions) -> Result<Self, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter(format!(": {e}")))?;
        let info = adapter.get_info();
        let available = adapter.limits();
        let required = required_limits(&available)?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("runahead"),
                // Timestamps where the adapter has them, for `bench --profile` (the forward
                // never writes one).
                required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
                required_limits: required,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;
        let adapter_info = format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
        let options = GpuOptions {
            shape: options.shape.or(Some(KernelShape::for_adapter(&info))),
            ..options
        };
        Ok(Self::from_device(device, queue, adapter_info, options))
    }

    /// Wraps a device someone else opened. Its limits must cover [`required_limits`]. The
    /// kernel shape is `options.shape`, else [`KernelShape::GPU`].
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter_info: String,
        options: GpuOptions,
    ) -> Self {
        let limits = device.limits();
        let max_binding_size = options
            .max_binding_size
            .unwrap_or(u64::MAX)
            .min(limits.max_storage_buffer_binding_size)
            .min(limits.max_buffer_size);
        let fault = Arc::new(Mutex::new(None));
        let lost = fault.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut f) = lost.lock() {
                f.get_or_insert(GpuError::DeviceLost(format!("{reason:?}: {message}")));
            }
        });
        let uncaptured = fault.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut f) = uncaptured.lock() {
                f.get_or_insert(match e {
                    wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
                    other => GpuError::Validation(other.to_string()),
                });
            }
        }));
        GpuContext {
            device,
            queue,
            adapter_info,
            max_binding_size,
            shape: options.shape.unwrap_or(KernelShape::GPU),
            memory_budget: options.memory_budget,
            fault,
            pipelines: Arc::default(),
        }
    }

    /// The pipeline of `op` (in `format`, `variant`; see [`crate::kernels::variant`]) for this
    /// context's kernel shape, compiled on first use.
    pub(crate) fn pipeline(
        &self,
        op: Op,
        format: Option<GgmlType>,
        variant: usize,
    ) -> wgpu::ComputePipeline {
        // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
        let mut cache = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        cache.get_or_create(&self.device, self.shape, op, format, variant)
    }

    /// The first fault the device reported, if any.
    pub fn check(&self) -> Result<(), GpuError> {
        match self.fault.lock() {
            Ok(f) => f.clone().map_or(Ok(()), Err),
            Err(_) => Err(GpuError::DeviceLost("fault state poisoned".into())),
        }
    }

    /// Resolves once the device has done the work submitted so far, writes included (natively
    /// by polling until then; on the web from the event loop).
    pub async fn settle(&self) -> Result<(), GpuError> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            let _ = tx.send(());
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        let _ = rx.await;
        self.check()
    }
}

/// The engine's minimum limits: WebGPU's defaults, with the largest buffers the adapter
/// offers (weights and KV caches are big).
pub fn required_limits(available: &wgpu::Limits) -> Result<wgpu::Limits, GpuError> {
    let base = wgpu::Limits::downlevel_defaults();
    let need = |limit: &'static str, needed: u64, have: u64| {
        if have < needed {
            Err(GpuError::LimitTooSmall {
                limit,
                needed,
                available: have,
            })
        } else {
            Ok(())
        }
    };
    // The attention's seven (q, keys, values, scores, partials, visibility, positions for the
    // sliding window); WebGPU's default is 8.
    need(
        "maxStorageBuffersPerShaderStage",
        7,
        available.max_storage_buffers_per_shader_stage.into(),
    )?;
    // Workgroups of 256 (argmax.wgsl, matmul_split_k.wgsl), the split-K product's 10 KB of
    // partial sums: WebGPU's defaults, which every adapter offers.
    need(
        "maxComputeInvocationsPerWorkgroup",
        256,
        available.max_compute_invocations_per_workgroup.into(),
    )?;
    need(
        "maxComputeWorkgroupSizeX",
        256,
        available.max_compute_workgroup_size_x.into(),
    )?;
    need(
        "maxComputeWorkgroupStorageSize",
        10240,
        available.max_compute_workgroup_storage_size.into(),
    )?;
    need(
        "maxStorageBufferBindingSize",
        1 << 24,
        available.max_storage_buffer_binding_size,
    )?;
    Ok(wgpu::Limits {
        max_storage_buffer_binding_size: available.max_storage_buffer_binding_size,
        max_buffer_size: available.max_buffer_size,
        max_storage_buffers_per_shader_stage: available.max_storage_buffers_per_shader_stage.min(8),
        max_compute_workgroup_storage_size: available.max_compute_workgroup_storage_size.min(16384),
        max_compute_invocations_per_workgroup: available
            .max_compute_invocations_per_workgroup
            .min(256),
        max_compute_workgroup_size_x: available.max_compute_workgroup_size_x.min(256),
        max_compute_workgroups_per_dimension: available
            .max_compute_workgroups_per_dimension
            .min(65535),
        ..base
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WebGPU's defaults are enough; an adapter below the workgroups the kernels use (256
    /// invocations, the split-K product's 10 KB) is refused with the limit it lacks.
    #[test]
    fn adapters_below_the_kernels_workgroups_are_refused_by_name() {
        assert!(required_limits(&wgpu::Limits::default()).is_ok());
        let short = |limits: wgpu::Limits| match required_limits(&limits) {
            Err(GpuError::LimitTooSmall { limit, .. }) => limit,
            other => panic!("expected LimitTooSmall, got {other:?}"),
        };
        let invocations = wgpu::Limits {
            max_compute_invocations_per_workgroup: 128,
            ..wgpu::Limits::default()
        };
        assert_eq!(short(invocations), "maxComputeInvocationsPerWorkgroup");
        let size_x = wgpu::Limits {
            max_compute_workgroup_size_x: 128,
            ..wgpu::Limits::default()
        };
        assert_eq!(short(size_x), "maxComputeWorkgroupSizeX");
        let storage = wgpu::Limits {
            max_compute_workgroup_storage_size: 8192,
            ..wgpu::Limits::default()
        };
        assert_eq!(short(storage), "maxComputeWorkgroupStorageSize");
    }
}
