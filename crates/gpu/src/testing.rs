//! Running one kernel on explicit inputs, for the per-kernel tests against CPU references.

use wgpu::util::DeviceExt;

use runahead_gguf::GgmlType;

use crate::kernels::{params, Op};
use crate::{readback, GpuContext, GpuError};

/// One storage binding's initial contents.
pub enum Input {
    F32(Vec<f32>),
    U32(Vec<u32>),
    /// Raw bytes (weights in a block format), zero-padded to whole words.
    Bytes(Vec<u8>),
}

/// Dispatches `op` once: bindings are `inputs` in order, then the op's uniform `params`, then
/// the step uniform `{m, base}` (the engine's binding convention). The matmul runs the variant
/// the engine uses for `m` tokens, in the context's shape ([`GpuContext::shape`]; its
/// `grid` gives the workgroups). Returns the bytes of input `read` afterwards.
#[allow(clippy::too_many_arguments)]
pub async fn run_kernel(
    ctx: &GpuContext,
    op: Op,
    format: Option<GgmlType>,
    inputs: &[Input],
    op_params: &[u32],
    (m, base): (usize, usize),
    workgroups: (u32, u32, u32),
    read: usize,
) -> Result<Vec<u8>, GpuError> {
    let step = [m as u32, base as u32, 0, 0];
    run_kernel_step(ctx, op, format, inputs, op_params, step, workgroups, read).await
}

/// [`run_kernel`] with the whole step uniform given: `[m, base, k, 0]` (`k`: entries per row
/// for the top-k kernel; other kernels ignore it).
#[allow(clippy::too_many_arguments)]
pub async fn run_kernel_step(
    ctx: &GpuContext,
    op: Op,
    format: Option<GgmlType>,
    inputs: &[Input],
    op_params: &[u32],
    step: [u32; 4],
    workgroups: (u32, u32, u32),
    read: usize,
) -> Result<Vec<u8>, GpuError> {
    let device = &ctx.device;
    let (pipeline, bind_group, buffers) = prepare(ctx, op, format, inputs, op_params, step);
    let size = buffers[read].size();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(workgroups.0, workgroups.1, workgroups.2);
    }
    encoder.copy_buffer_to_buffer(&buffers[read], 0, &staging, 0, size);
    ctx.queue.submit([encoder.finish()]);
    readback::read_bytes(ctx, &staging, size).await
}

fn prepare(
    ctx: &GpuContext,
    op: Op,
    format: Option<GgmlType>,
    inputs: &[Input],
    op_params: &[u32],
    step: [u32; 4],
) -> (wgpu::ComputePipeline, wgpu::BindGroup, Vec<wgpu::Buffer>) {
    let device = &ctx.device;
    let variant = crate::kernels::variant(op, op_params, step[0] as usize);
    let pipeline = ctx.pipeline(op, format, variant);
    let init = |contents: &[u8], usage| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents,
            usage,
        })
    };
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    let mut buffers: Vec<wgpu::Buffer> = inputs
        .iter()
        .map(|i| match i {
            Input::F32(v) => init(bytemuck::cast_slice(v), storage),
            Input::U32(v) => init(bytemuck::cast_slice(v), storage),
            Input::Bytes(b) => {
                let mut b = b.clone();
                b.resize(b.len().div_ceil(4).max(1) * 4, 0);
                init(&b, storage)
            }
        })
        .collect();
    // The uniforms go before the op's last `bindings_after_step` inputs.
    let after = buffers.split_off(buffers.len() - op.bindings_after_step());
    buffers.push(init(
        bytemuck::cast_slice(&params(op_params)),
        wgpu::BufferUsages::UNIFORM,
    ));
    buffers.push(init(
        bytemuck::cast_slice(&step),
        wgpu::BufferUsages::UNIFORM,
    ));
    buffers.extend(after);
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    (pipeline, bind_group, buffers)
}

/// Seconds per dispatch of `op` (as [`run_kernel`] would run it), over `reps` dispatches in
/// one submit after a warm-up; native only (polls the device).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
pub fn time_kernel(
    ctx: &GpuContext,
    op: Op,
    format: Option<GgmlType>,
    inputs: &[Input],
    op_params: &[u32],
    (m, base): (usize, usize),
    workgroups: (u32, u32, u32),
    reps: usize,
) -> Result<f64, GpuError> {
    let step = [m as u32, base as u32, 0, 0];
    let (pipeline, bind_group, _buffers) = prepare(ctx, op, format, inputs, op_params, step);
    let mut last = 0.0;
    for n in [1, reps.max(1)] {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            for _ in 0..n {
                pass.dispatch_workgroups(workgroups.0, workgroups.1, workgroups.2);
            }
        }
        let t = std::time::Instant::now();
        ctx.queue.submit([encoder.finish()]);
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        last = t.elapsed().as_secs_f64() / n as f64;
    }
    Ok(last)
}

/// Little-endian f32s of `bytes`.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

/// Little-endian u32s of `bytes`.
pub fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(bytes)
}
