//! Where a forward's time goes: each recorded dispatch run alone, natively (the device is
//! polled until idle after each), for the profiling test and kernel tuning. Timed by the host's
//! clock around the submit, and by the device's own timestamps where it has them
//! (`TIMESTAMP_QUERY`: real GPUs and lavapipe have them, a browser's WebGPU only behind a
//! flag), which leave out the submit and the poll: what the kernel itself took.

use std::time::Instant;

use runahead_model::{Batch, ModelError, Result};

use super::{GpuModel, MAX_ROWS};
use crate::GpuError;

/// Seconds per run of one dispatch of the forward pass.
#[derive(Clone, Debug)]
pub struct DispatchTime {
    pub label: String,
    /// Host clock, from the submit until the device is idle, per run.
    pub seconds: f64,
    /// Device timestamps at the pass's start and end, per run; `None` without
    /// `TIMESTAMP_QUERY`.
    pub device_seconds: Option<f64>,
}

/// A pair of timestamp queries around one compute pass, and the buffers that read them back.
struct PassTimer {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    read: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
}

impl PassTimer {
    /// `None` where the device was opened without timestamp queries.
    fn new(ctx: &crate::GpuContext) -> Option<Self> {
        if !ctx
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return None;
        }
        let buffer = |label, usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: 16,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        Some(PassTimer {
            queries: ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profile timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolved: buffer(
                "profile timestamps resolved",
                U::QUERY_RESOLVE | U::COPY_SRC,
            ),
            read: buffer("profile timestamps read", U::MAP_READ | U::COPY_DST),
            period: f64::from(ctx.queue.get_timestamp_period()),
        })
    }

    fn writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.queries, 0..2, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.read, 0, 16);
    }

    /// Seconds between the two timestamps of the last submitted pass.
    fn seconds(&self, ctx: &crate::GpuContext) -> Result<f64> {
        let readback = |e: String| GpuError::Readback(format!("timestamps: {e}"));
        let slice = self.read.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| readback(e.to_string()))?;
        rx.recv()
            .map_err(|e| readback(e.to_string()))?
            .map_err(|e| readback(e.to_string()))?;
        let bytes = slice
            .get_mapped_range()
            .map_err(|e| readback(e.to_string()))?
            .to_vec();
        self.read.unmap();
        let tick = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(word)
        };
        Ok(tick(1).saturating_sub(tick(0)) as f64 * self.period * 1e-9)
    }
}

impl GpuModel {
    /// Times every dispatch of a forward of `batch` alone, `reps` times in one submit each,
    /// without advancing the cache. Kernels that accumulate in place see their output grow;
    /// only the timings are meaningful.
    pub fn profile(&mut self, batch: &Batch, reps: usize) -> Result<Vec<DispatchTime>> {
        let c = &self.config;
        batch.validate(c.vocab_size, self.cache_len, self.capacity)?;
        if batch.len() > MAX_ROWS {
            return Err(ModelError::InvalidBatch(format!(
                "a block holds at most {MAX_ROWS} tokens"
            )));
        }
        let mut inputs = self.ctx.device.create_command_encoder(&Default::default());
        let slots = self.write_step(&mut inputs, batch, 0);
        self.ctx.queue.submit([inputs.finish()]);
        let m = batch.len();
        let wait = |ctx: &crate::GpuContext| {
            ctx.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(|e| GpuError::Readback(e.to_string()))
        };
        let timer = PassTimer::new(&self.ctx);
        let reps = reps.max(1);
        let mut out = Vec::new();
        for d in self.dispatches.iter().chain([&self.argmax_dispatch]) {
            let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&d.label),
                    timestamp_writes: timer.as_ref().map(PassTimer::writes),
                });
                for _ in 0..reps {
                    d.encode(&mut pass, m, slots);
                }
            }
            if let Some(timer) = &timer {
                timer.resolve(&mut encoder);
            }
            wait(&self.ctx)?;
            let t = Instant::now();
            self.ctx.queue.submit([encoder.finish()]);
            wait(&self.ctx)?;
            let seconds = t.elapsed().as_secs_f64() / reps as f64;
            let device_seconds = match &timer {
                Some(timer) => Some(timer.seconds(&self.ctx)? / reps as f64),
                None => None,
            };
            out.push(DispatchTime {
                label: d.label.clone(),
                seconds,
                device_seconds,
            });
        }
        self.ctx.check()?;
        Ok(out)
    }
}
