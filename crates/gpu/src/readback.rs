//! Reading a buffer back without blocking: on the web the map callback runs from the event
//! loop, so the future must be awaited; natively the device is polled until the map is done.

use crate::{GpuContext, GpuError};

/// Maps `buffer` (MAP_READ) and returns its first `len` bytes.
pub async fn read_bytes(
    ctx: &GpuContext,
    buffer: &wgpu::Buffer,
    len: u64,
) -> Result<Vec<u8>, GpuError> {
    let slice = buffer.slice(..len);
    let (tx, rx) = futures_channel::oneshot::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    #[cfg(not(target_arch = "wasm32"))]
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    let mapped = rx
        .await
        .map_err(|_| GpuError::Readback("map callback dropped".into()))?;
    ctx.check()?;
    mapped.map_err(|e| GpuError::Readback(e.to_string()))?;
    let bytes = slice
        .get_mapped_range()
        .map_err(|e| GpuError::Readback(e.to_string()))?
        .to_vec();
    buffer.unmap();
    Ok(bytes)
}
