//! The weights as the GPU engine reads them from the file: matrices checked for their shape
//! and uploaded (stacked where a layer's products write side by side), and f32 vectors. Every
//! byte goes through [`Uploads`], at once or as the file streams in.

use runahead_gguf::{widen_to_q8_0, widens_to_q8_0, GgmlType, Gguf, TensorData, TensorInfo};
use runahead_model::{ModelError, Plan, Result, Tensor};

use super::fill::Uploads;
use crate::{GpuContext, GpuMatrix};

/// The tensor `name`, checked to be a `rows x cols` matrix.
pub(super) fn matrix_info<'f>(
    header: &'f Gguf,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<&'f TensorInfo> {
    let info = header
        .tensor(name)
        .ok_or_else(|| runahead_gguf::GgufError::MissingTensor(name.to_owned()))?;
    if info.shape != [cols as u64, rows as u64] {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: vec![cols as u64, rows as u64],
            found: info.shape.clone(),
        });
    }
    Ok(info)
}

/// Matrices `parts` (name, rows), each `cols` wide, whose products a layer writes side by side
/// into one output row: each run of neighbours that share a block format stacked by rows into
/// one matrix (one dispatch), with the first output column of each. Each output value is its
/// row's product either way (the kernels reduce every row alone).
pub(super) fn stacked(
    ctx: &GpuContext,
    up: &mut Uploads,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<Vec<(GpuMatrix, usize)>> {
    let header = up.header();
    let infos = parts
        .iter()
        .map(|(name, rows)| matrix_info(header, name, *rows, cols))
        .collect::<Result<Vec<_>>>()?;
    if widens(&infos) {
        let rows = parts.iter().map(|(_, r)| r).sum();
        let w = GpuMatrix::allocate(ctx, &parts[0].0, GgmlType::Q8_0, rows, cols)?;
        assemble(up, &w, &infos, true)?;
        return Ok(vec![(w, 0)]);
    }
    let mut out = Vec::new();
    let (mut first, mut col0) = (0, 0);
    while first < parts.len() {
        let ty = infos[first].ty;
        let end = (first..parts.len())
            .find(|&i| infos[i].ty != ty)
            .unwrap_or(parts.len());
        let rows: usize = parts[first..end].iter().map(|(_, r)| r).sum();
        let w = GpuMatrix::allocate(ctx, &parts[first].0, ty, rows, cols)?;
        fill(up, &w, &infos[first..end])?;
        out.push((w, col0));
        col0 += rows;
        first = end;
    }
    Ok(out)
}

/// Writes `parts` (matrices of `w`'s block format and width, stacked by rows) into `w`'s
/// pieces: straight from the file where every part starts on a word of its piece, else joined
/// on the host ([`assemble`]).
fn fill(up: &mut Uploads, w: &GpuMatrix, parts: &[&TensorInfo]) -> Result<()> {
    let rb = w.row_bytes;
    let mut segments = Vec::new();
    let mut row0 = 0;
    for info in parts {
        let rows = info.shape.get(1).copied().unwrap_or(0) as usize;
        for piece in &w.pieces {
            let lo = row0.max(piece.row_start);
            let hi = (row0 + rows).min(piece.row_start + piece.rows);
            if lo < hi {
                let at = ((lo - piece.row_start) * rb) as u64;
                let within = ((lo - row0) * rb) as u64..((hi - row0) * rb) as u64;
                segments.push((&piece.buffer, at, *info, within));
            }
        }
        row0 += rows;
    }
    if segments.iter().any(|(_, at, _, _)| !at.is_multiple_of(4)) {
        return assemble(up, w, parts, false);
    }
    for (buffer, at, info, within) in segments {
        up.copy(buffer, at, info, within)?;
    }
    Ok(())
}

/// Writes `parts` into `w`'s pieces from whole tensors, re-encoded as Q8_0 with `widen`.
fn assemble(up: &mut Uploads, w: &GpuMatrix, parts: &[&TensorInfo], widen: bool) -> Result<()> {
    let names: Vec<String> = parts.iter().map(|i| i.name.clone()).collect();
    for piece in &w.pieces {
        let bytes = piece.row_start * w.row_bytes..(piece.row_start + piece.rows) * w.row_bytes;
        let names_here = names.clone();
        let make = move |data: &dyn TensorData| -> Result<Vec<u8>> {
            let mut all = Vec::new();
            for name in &names_here {
                let info = data.info(name)?;
                match widen {
                    true => all.extend(widen_to_q8_0(info.ty, data.bytes_of(info))?),
                    false => all.extend_from_slice(data.bytes_of(info)),
                }
            }
            all.get(bytes.clone()).map(<[u8]>::to_vec).ok_or_else(|| {
                ModelError::Config(format!(
                    "tensors {names_here:?}: {} bytes where {} rows need {}",
                    all.len(),
                    bytes.len(),
                    bytes.end
                ))
            })
        };
        up.make(&piece.buffer, names.clone(), Box::new(make))?;
    }
    Ok(())
}

/// The matrices (name, rows) layer `l` stacks into its q/k/v product ([`stacked`]): one fused
/// `attn_qkv`, whose rows are already that stack, or `attn_q`, `attn_k`, `attn_v`.
pub(super) fn qkv_parts(plan: &Plan, l: usize) -> Vec<(String, usize)> {
    let c = &plan.config;
    match plan.fused_qkv {
        true => vec![(Tensor::AttnQkv.at(l), c.q_dim() + 2 * c.kv_dim())],
        false => vec![
            (Tensor::AttnQ.at(l), c.q_dim()),
            (Tensor::AttnK.at(l), c.kv_dim()),
            (Tensor::AttnV.at(l), c.kv_dim()),
        ],
    }
}

/// The matrices layer `l` stacks into its gate/up product: a fused `ffn_up` of twice the rows
/// (gate first), or `ffn_gate` and `ffn_up`.
pub(super) fn gate_up_parts(plan: &Plan, l: usize) -> Vec<(String, usize)> {
    let ff = plan.config.n_ff;
    match plan.fused_gate_up {
        true => vec![(Tensor::FfnUp.at(l), 2 * ff)],
        false => vec![(Tensor::FfnGate.at(l), ff), (Tensor::FfnUp.at(l), ff)],
    }
}

/// Whether matrices stacked into one product mix block formats that all re-encode as Q8_0
/// value for value (Q4_0, Q5_0, Q8_0: `runahead_gguf::widen_to_q8_0`): then they go up as one
/// Q8_0 matrix, one dispatch instead of one per format, with the same values.
pub(super) fn widens(infos: &[&runahead_gguf::TensorInfo]) -> bool {
    infos.windows(2).any(|w| w[0].ty != w[1].ty) && infos.iter().all(|i| widens_to_q8_0(i.ty))
}

/// Bytes the Q8_0 re-encoding of [`widens`] adds to the weights as stored in the file, over
/// every layer's q/k/v and gate/up (the memory plan counts weights by their file size).
pub(super) fn widening_growth(header: &Gguf, plan: &Plan) -> Result<u64> {
    let mut growth = 0u64;
    for l in 0..plan.config.n_layers {
        for group in [qkv_parts(plan, l), gate_up_parts(plan, l)] {
            let infos = group
                .iter()
                .map(|(name, _)| {
                    header
                        .tensor(name)
                        .ok_or_else(|| runahead_gguf::GgufError::MissingTensor(name.clone()))
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            if widens(&infos) {
                for info in infos {
                    let elements: u64 = info.shape.iter().product();
                    let wide = GgmlType::Q8_0.bytes_for(elements).unwrap_or(u64::MAX);
                    growth = growth.saturating_add(wide.saturating_sub(info.size));
                }
            }
        }
    }
    Ok(growth)
}

/// The matrix `name`, `rows x cols`, uploaded as stored.
pub(super) fn matrix(
    ctx: &GpuContext,
    up: &mut Uploads,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<GpuMatrix> {
    let info = matrix_info(up.header(), name, rows, cols)?;
    let w = GpuMatrix::allocate(ctx, name, info.ty, rows, cols)?;
    fill(up, &w, &[info])?;
    Ok(w)
}

/// The vector `name` of `len` values, decoded to f32.
pub(super) fn vector(data: &dyn TensorData, name: &str, len: usize) -> Result<Vec<f32>> {
    let info = data.info(name)?;
    if info.shape != [len as u64] {
        return Err(ModelError::TensorShape {
            name: name.to_owned(),
            expected: vec![len as u64],
            found: info.shape.clone(),
        });
    }
    if !info.ty.is_supported() {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_owned(),
            ty: info.ty,
        });
    }
    Ok(data.decoded(name)?)
}
