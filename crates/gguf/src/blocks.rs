//! CPU dequantization of the GGML block formats (the reference the GPU kernels are tested
//! against). Layouts follow ggml's `block_*` structs; all multi-byte fields are little-endian.

use half::{bf16, f16};

use crate::{GgmlType, GgufError, Result};

/// Decodes `bytes` (a whole number of blocks of `ty`) into `out`, which must hold exactly the
/// number of elements those blocks encode.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let expected = ty.bytes_for(out.len() as u64);
    if expected != Some(bytes.len() as u64) {
        return Err(GgufError::Io(format!(
            "dequantize {ty}: {} bytes do not encode {} elements",
            bytes.len(),
            out.len()
        )));
    }
    let bs = ty.block_size() as usize;
    let bb = ty.block_bytes() as usize;
    let blocks = bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bs));
    match ty {
        GgmlType::F32 => {
            for (b, o) in blocks {
                o[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => blocks.for_each(|(b, o)| o[0] = f16_at(b, 0)),
        GgmlType::BF16 => {
            blocks.for_each(|(b, o)| o[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32())
        }
        GgmlType::Q4_0 => blocks.for_each(|(b, o)| q4_0(b, o)),
        GgmlType::Q4_1 => blocks.for_each(|(b, o)| q4_1(b, o)),
        GgmlType::Q5_0 => blocks.for_each(|(b, o)| q5_0(b, o)),
        GgmlType::Q5_1 => blocks.for_each(|(b, o)| q5_1(b, o)),
        GgmlType::Q8_0 => blocks.for_each(|(b, o)| q8_0(b, o)),
        GgmlType::Q4_K => blocks.for_each(|(b, o)| q4_k(b, o)),
        GgmlType::Q5_K => blocks.for_each(|(b, o)| q5_k(b, o)),
        GgmlType::Q6_K => blocks.for_each(|(b, o)| q6_k(b, o)),
        other => return Err(GgufError::UnsupportedType(other)),
    }
    Ok(())
}

/// Decodes row `row` of a matrix of `ty` whose rows hold `row_len` elements.
pub fn dequantize_row(
    ty: GgmlType,
    bytes: &[u8],
    row_len: usize,
    row: usize,
    out: &mut [f32],
) -> Result<()> {
    let row_bytes = ty
        .bytes_for(row_len as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| GgufError::Io(format!("{ty}: row length {row_len} is not whole blocks")))?;
    // Checked: on wasm32 a row index times a row size can pass 32 bits.
    let slice = row
        .checked_mul(row_bytes)
        .and_then(|start| bytes.get(start..start.checked_add(row_bytes)?))
        .ok_or_else(|| GgufError::Io(format!("row {row} is past the end of the tensor")))?;
    let out_len = out.len();
    let out = out.get_mut(..row_len).ok_or_else(|| {
        GgufError::Io(format!("output of {out_len} values for a row of {row_len}"))
    })?;
    dequantize(ty, slice, out)
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

// block_q4_0 { d: f16, qs: [u8; 16] }: element j is the low nibble of qs[j] for j < 16 and the
// high nibble of qs[j - 16] otherwise, offset by -8.
fn q4_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        o[j] = ((q & 0xf) as i32 - 8) as f32 * d;
        o[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

// block_q4_1 { d: f16, m: f16, qs: [u8; 16] }: x = q * d + m.
fn q4_1(b: &[u8], o: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for j in 0..16 {
        let q = b[4 + j];
        o[j] = (q & 0xf) as f32 * d + m;
        o[j + 16] = (q >> 4) as f32 * d + m;
    }
}

// block_q5_0 { d: f16, qh: u32 (fifth bits), qs: [u8; 16] }: bit j of qh is the fifth bit of
// element j; offset by -16.
fn q5_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let q = b[6 + j];
        let h0 = ((qh >> j) & 1) << 4;
        let h1 = ((qh >> (j + 16)) & 1) << 4;
        o[j] = (((q & 0xf) as u32 | h0) as i32 - 16) as f32 * d;
        o[j + 16] = (((q >> 4) as u32 | h1) as i32 - 16) as f32 * d;
    }
}

// block_q5_1 { d: f16, m: f16, qh: u32, qs: [u8; 16] }: x = q * d + m.
fn q5_1(b: &[u8], o: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let q = b[8 + j];
        let h0 = ((qh >> j) & 1) << 4;
        let h1 = ((qh >> (j + 16)) & 1) << 4;
        o[j] = ((q & 0xf) as u32 | h0) as f32 * d + m;
        o[j + 16] = ((q >> 4) as u32 | h1) as f32 * d + m;
    }
}

// block_q8_0 { d: f16, qs: [i8; 32] }.
fn q8_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        o[j] = (b[2 + j] as i8) as f32 * d;
    }
}

/// The 6-bit scale and min of sub-block `j` (0..8) from the 12 packed bytes of a Q4_K/Q5_K
/// block: sub-blocks 0..4 keep theirs in the low 6 bits of bytes 0..8; sub-blocks 4..8 split
/// theirs between the nibbles of bytes 8..12 and the top 2 bits of bytes 0..8.
pub(crate) fn k_scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

// block_q4_K { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }: 8 sub-blocks of 32;
// each 32 bytes of qs hold two sub-blocks (low nibbles first); x = d*sc*q - dmin*m.
fn q4_k(b: &[u8], o: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    for chunk in 0..4 {
        let (sc0, m0) = k_scale_min(2 * chunk, scales);
        let (sc1, m1) = k_scale_min(2 * chunk + 1, scales);
        let (d0, min0) = (d * sc0 as f32, dmin * m0 as f32);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        let q = &qs[chunk * 32..chunk * 32 + 32];
        let out = &mut o[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            out[l] = d0 * (q[l] & 0xf) as f32 - min0;
            out[l + 32] = d1 * (q[l] >> 4) as f32 - min1;
        }
    }
}

// block_q5_K { d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] }: like Q4_K
// with a fifth bit per element: bit (2*chunk) of qh[l] for the low half, bit (2*chunk+1) for
// the high half.
fn q5_k(b: &[u8], o: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for chunk in 0..4 {
        let (sc0, m0) = k_scale_min(2 * chunk, scales);
        let (sc1, m1) = k_scale_min(2 * chunk + 1, scales);
        let (d0, min0) = (d * sc0 as f32, dmin * m0 as f32);
        let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
        let q = &qs[chunk * 32..chunk * 32 + 32];
        let out = &mut o[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            let h0 = ((qh[l] >> (2 * chunk)) & 1) << 4;
            let h1 = ((qh[l] >> (2 * chunk + 1)) & 1) << 4;
            out[l] = d0 * ((q[l] & 0xf) | h0) as f32 - min0;
            out[l + 32] = d1 * ((q[l] >> 4) | h1) as f32 - min1;
        }
    }
}

// block_q6_K { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }: two halves of 128;
// in each, 64 bytes of ql (low 4 bits) and 32 of qh (2 high bits each) give four runs of 32,
// and each run of 16 has its own signed 8-bit scale; offset by -32.
fn q6_k(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 208);
    for half in 0..2 {
        let ql = &b[half * 64..half * 64 + 64];
        let qh = &b[128 + half * 32..128 + half * 32 + 32];
        let sc = &b[192 + half * 8..192 + half * 8 + 8];
        let out = &mut o[half * 128..half * 128 + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            out[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            out[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            out[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            out[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}
