//! A forward's inputs (step uniform, tokens, positions, visibility lists) reach the device
//! through one upload buffer created at load and reused: written while mapped, copied into the
//! input buffers at the head of the forward's encoder, and mapped again when that submit is
//! done (`map_buffer_on_submit`). `Queue::write_buffer` would create a staging buffer per call,
//! four per forward. If the buffer is not mapped again yet when the next forward starts (on the
//! web its map resolves from the event loop), that forward falls back to `write_buffer` and the
//! engine counts it ([`super::GpuStats::staging_writes`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::MAX_ROWS;

/// Byte offsets of the inputs in the upload buffer.
const STEP: u64 = 0;
const TOKENS: u64 = 16;
const POSITIONS: u64 = TOKENS + 4 * MAX_ROWS as u64;
const VISIBLE: u64 = POSITIONS + 4 * MAX_ROWS as u64;

/// Bytes of the upload buffer.
pub(super) const UPLOAD_BYTES: u64 = VISIBLE + 4 * (MAX_ROWS * (1 + MAX_ROWS)) as u64;

/// Where each input goes on the device.
pub(super) struct InputBuffers<'a> {
    pub step: &'a wgpu::Buffer,
    pub tokens: &'a wgpu::Buffer,
    pub positions: &'a wgpu::Buffer,
    pub visible: &'a wgpu::Buffer,
}

/// One forward's inputs, as words.
pub(super) struct Inputs<'a> {
    pub step: [u32; 4],
    pub tokens: &'a [u32],
    pub positions: &'a [u32],
    /// `[rows, 1 + MAX_ROWS]`: count, then block indices.
    pub visible: &'a [u32],
}

pub(super) struct Upload {
    buffer: wgpu::Buffer,
    /// Set by the map callback; cleared when the buffer is handed to a submit.
    mapped: Arc<AtomicBool>,
}

impl Upload {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("upload"),
            size: UPLOAD_BYTES,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        Upload {
            buffer,
            mapped: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Records the copies of `inputs` into `to` at the head of `encoder` (or, when the upload
    /// buffer is still in flight, writes them through the queue). Returns whether it had to
    /// fall back to the queue.
    pub(super) fn write(
        &mut self,
        queue: &wgpu::Queue,
        encoder: &mut wgpu::CommandEncoder,
        to: InputBuffers,
        inputs: Inputs,
    ) -> bool {
        let pieces: [(u64, &wgpu::Buffer, &[u8]); 4] = [
            (STEP, to.step, bytemuck::cast_slice(&inputs.step)),
            (TOKENS, to.tokens, bytemuck::cast_slice(inputs.tokens)),
            (
                POSITIONS,
                to.positions,
                bytemuck::cast_slice(inputs.positions),
            ),
            (VISIBLE, to.visible, bytemuck::cast_slice(inputs.visible)),
        ];
        let view = match self.mapped.load(Ordering::Acquire) {
            true => self.buffer.slice(..).get_mapped_range_mut().ok(),
            false => None,
        };
        let Some(mut view) = view else {
            for (_, target, bytes) in pieces {
                queue.write_buffer(target, 0, bytes);
            }
            return true;
        };
        for (offset, _, bytes) in pieces {
            let start = offset as usize;
            view.slice(start..start + bytes.len())
                .copy_from_slice(bytes);
        }
        drop(view);
        self.buffer.unmap();
        for (offset, target, bytes) in pieces {
            if !bytes.is_empty() {
                encoder.copy_buffer_to_buffer(&self.buffer, offset, target, 0, bytes.len() as u64);
            }
        }
        self.mapped.store(false, Ordering::Release);
        let mapped = self.mapped.clone();
        encoder.map_buffer_on_submit(&self.buffer, wgpu::MapMode::Write, .., move |r| {
            // A failed map leaves the flag down: later forwards write through the queue.
            if r.is_ok() {
                mapped.store(true, Ordering::Release);
            }
        });
        false
    }
}
