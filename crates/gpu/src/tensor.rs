//! Weight tensors on the GPU, still in their GGUF block formats. A matrix larger than the
//! device's storage-binding limit is split by rows into pieces that each fit one binding.

use runahead_gguf::GgmlType;

use crate::{kernels, GpuContext, GpuError};

/// A contiguous range of rows of a matrix in its own buffer.
pub struct Piece {
    /// Raw blocks of rows `row_start..row_start + rows`, zero-padded to a multiple of 4 bytes.
    pub buffer: wgpu::Buffer,
    pub row_start: usize,
    pub rows: usize,
}

/// A quantized matrix: `rows` rows of `cols` elements (one row per output feature).
pub struct GpuMatrix {
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub row_bytes: usize,
    pub pieces: Vec<Piece>,
}

impl GpuMatrix {
    /// Uploads `bytes` (the tensor's raw GGUF data) as is.
    pub fn upload(
        ctx: &GpuContext,
        name: &str,
        ty: GgmlType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self, GpuError> {
        let w = Self::allocate(ctx, name, ty, rows, cols)?;
        if w.row_bytes * rows != bytes.len() {
            return Err(GpuError::Validation(format!(
                "tensor '{name}': {} bytes for {rows} x {cols} {ty}",
                bytes.len()
            )));
        }
        for piece in &w.pieces {
            let rows = piece.row_start..piece.row_start + piece.rows;
            let data = &bytes[rows.start * w.row_bytes..rows.end * w.row_bytes];
            write_words(&ctx.queue, &piece.buffer, 0, data);
        }
        Ok(w)
    }

    /// A matrix's buffers, split into pieces that each fit one binding, not written yet.
    pub fn allocate(
        ctx: &GpuContext,
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
    ) -> Result<Self, GpuError> {
        if kernels::format_source(ty).is_none() {
            return Err(GpuError::UnsupportedType {
                name: name.to_owned(),
                ty,
            });
        }
        if !cols.is_multiple_of(32) {
            return Err(GpuError::Validation(format!(
                "tensor '{name}': rows of {cols} elements are not whole units of 32"
            )));
        }
        let row_bytes = ty.bytes_for(cols as u64).unwrap_or(0) as usize;
        // Byte offsets inside a kernel are u32: keep every piece below 2 GiB.
        let limit = ctx.max_binding_size.min(1 << 31) as usize;
        let rows_per_piece = limit.saturating_sub(3) / row_bytes.max(1);
        if rows_per_piece == 0 {
            return Err(GpuError::LimitTooSmall {
                limit: "maxStorageBufferBindingSize",
                needed: row_bytes as u64 + 3,
                available: ctx.max_binding_size,
            });
        }
        let mut pieces = Vec::new();
        let mut row_start = 0;
        while row_start < rows {
            let n = rows_per_piece.min(rows - row_start);
            let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(name),
                size: ((n * row_bytes).div_ceil(4) * 4).max(4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            pieces.push(Piece {
                buffer,
                row_start,
                rows: n,
            });
            row_start += n;
        }
        Ok(GpuMatrix {
            name: name.to_owned(),
            ty,
            rows,
            cols,
            row_bytes,
            pieces,
        })
    }
}

/// Writes `data` to `buffer` at `at` (a multiple of 4), its last partial word padded with
/// zeros: straight from the caller's bytes (in a page, a view of WebAssembly memory), with no
/// copy but of that last word.
pub(crate) fn write_words(queue: &wgpu::Queue, buffer: &wgpu::Buffer, at: u64, data: &[u8]) {
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        queue.write_buffer(buffer, at, &data[..whole]);
    }
    if whole < data.len() {
        let mut tail = [0u8; 4];
        tail[..data.len() - whole].copy_from_slice(&data[whole..]);
        queue.write_buffer(buffer, at + whole as u64, &tail);
    }
}
