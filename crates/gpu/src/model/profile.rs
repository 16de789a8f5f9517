//! Where a forward's time goes: each recorded dispatch run alone, natively (the device is
//! polled until idle after each), for the profiling test and kernel tuning.

use std::time::Instant;

use runahead_model::{Batch, ModelError, Result};

use super::{GpuModel, MAX_ROWS};
use crate::GpuError;

/// Seconds per run of one dispatch of the forward pass.
#[derive(Clone, Debug)]
pub struct DispatchTime {
    pub label: String,
    pub seconds: f64,
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
        let mut out = Vec::new();
        for d in self.dispatches.iter().chain([&self.argmax_dispatch]) {
            let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                for _ in 0..reps {
                    d.encode(&mut pass, m, slots);
                }
            }
            wait(&self.ctx)?;
            let t = Instant::now();
            self.ctx.queue.submit([encoder.finish()]);
            wait(&self.ctx)?;
            out.push(DispatchTime {
                label: d.label.clone(),
                seconds: t.elapsed().as_secs_f64() / reps.max(1) as f64,
            });
        }
        self.ctx.check()?;
        Ok(out)
    }
}
