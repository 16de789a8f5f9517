//! The weights as the GPU engine reads them from the file: matrices checked for their shape
//! and uploaded (stacked where a layer's products write side by side), and f32 vectors.

use runahead_gguf::{widen_to_q8_0, widens_to_q8_0, GgmlType, GgufFile};
use runahead_model::{ModelError, Plan, Result, Tensor};

use crate::{GpuContext, GpuMatrix};

/// The tensor `name`, checked to be a `rows x cols` matrix.
pub(super) fn matrix_info<'f>(
    file: &'f GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<&'f runahead_gguf::TensorInfo> {
    let info = file.tensor_info(name)?;
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
    file: &GgufFile,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<Vec<(GpuMatrix, usize)>> {
    let infos = parts
        .iter()
        .map(|(name, rows)| matrix_info(file, name, *rows, cols))
        .collect::<Result<Vec<_>>>()?;
    if widens(&infos) {
        let mut bytes = Vec::new();
        for info in &infos {
            bytes.extend(widen_to_q8_0(info.ty, file.tensor_bytes(info))?);
        }
        let rows = parts.iter().map(|(_, r)| r).sum();
        let w = GpuMatrix::upload(ctx, &parts[0].0, GgmlType::Q8_0, &bytes, rows, cols)?;
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
        let w = match end - first {
            1 => matrix(ctx, file, &parts[first].0, rows, cols)?,
            _ => {
                let bytes: Vec<u8> = infos[first..end]
                    .iter()
                    .flat_map(|i| file.tensor_bytes(i).iter().copied())
                    .collect();
                GpuMatrix::upload(ctx, &parts[first].0, ty, &bytes, rows, cols)?
            }
        };
        out.push((w, col0));
        col0 += rows;
        first = end;
    }
    Ok(out)
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
pub(super) fn widening_growth(file: &GgufFile, plan: &Plan) -> Result<u64> {
    let mut growth = 0u64;
    for l in 0..plan.config.n_layers {
        for group in [qkv_parts(plan, l), gate_up_parts(plan, l)] {
            let infos = group
                .iter()
                .map(|(name, _)| file.tensor_info(name))
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

pub(super) fn matrix(
    ctx: &GpuContext,
    file: &GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<GpuMatrix> {
    let info = matrix_info(file, name, rows, cols)?;
    Ok(GpuMatrix::upload(
        ctx,
        name,
        info.ty,
        file.tensor_bytes(info),
        rows,
        cols,
    )?)
}

pub(super) fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let info = file.tensor_info(name)?;
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
    Ok(file.tensor_f32(name)?)
}
