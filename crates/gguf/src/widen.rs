//! Re-encoding Q4_0 and Q5_0 blocks as Q8_0 blocks, value for value: their integers (`q - 8`,
//! `q - 16`) fit Q8_0's `i8` under the same f16 scale, so every element dequantizes to the same
//! f32, bit for bit. The GPU engine uses it where a file mixes these formats among matrices it
//! multiplies as one (Qwen2.5 files keep `attn_v` in Q8_0 beside Q5_0 `attn_q`/`attn_k` in half
//! their layers): one product, one dispatch, the same values.

use crate::{GgmlType, GgufError, Result};

/// Whether [`widen_to_q8_0`] takes blocks of `ty`.
pub fn widens_to_q8_0(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0)
}

/// `bytes` (whole blocks of `ty`) as Q8_0 blocks of the same values.
pub fn widen_to_q8_0(ty: GgmlType, bytes: &[u8]) -> Result<Vec<u8>> {
    if !widens_to_q8_0(ty) {
        return Err(GgufError::UnsupportedType(ty));
    }
    let bb = ty.block_bytes() as usize;
    if !bytes.len().is_multiple_of(bb) {
        return Err(GgufError::Io(format!(
            "cannot re-encode {} bytes of {ty} as Q8_0: not whole blocks",
            bytes.len()
        )));
    }
    if ty == GgmlType::Q8_0 {
        return Ok(bytes.to_vec());
    }
    let mut out = Vec::with_capacity(bytes.len() / bb * GgmlType::Q8_0.block_bytes() as usize);
    for b in bytes.chunks_exact(bb) {
        let mut q = [0i8; 32];
        match ty {
            // Element j: low nibble of qs[j] (j < 16), high nibble of qs[j - 16], minus 8.
            GgmlType::Q4_0 => {
                for j in 0..16 {
                    q[j] = (b[2 + j] & 0xf) as i8 - 8;
                    q[j + 16] = (b[2 + j] >> 4) as i8 - 8;
                }
            }
            // As Q4_0 with bit j of qh as element j's fifth bit, minus 16.
            _ => {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                for j in 0..16 {
                    let h0 = (((qh >> j) & 1) << 4) as u8;
                    let h1 = (((qh >> (j + 16)) & 1) << 4) as u8;
                    q[j] = ((b[6 + j] & 0xf) | h0) as i8 - 16;
                    q[j + 16] = ((b[6 + j] >> 4) | h1) as i8 - 16;
                }
            }
        }
        out.extend_from_slice(&b[..2]); // the scale, unchanged
        out.extend(q.iter().map(|&v| v as u8));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dequantize;

    #[test]
    fn widened_blocks_dequantize_to_the_same_bits() {
        // Every byte value in every position, under a spread of finite scales.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for ty in [GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0] {
            let bb = ty.block_bytes() as usize;
            let blocks = 301;
            let mut bytes: Vec<u8> = (0..blocks * bb).map(|_| next() as u8).collect();
            for (i, b) in bytes.chunks_exact_mut(bb).enumerate() {
                let d = half::f16::from_f32((i as f32 - 150.0) * 0.013);
                b[..2].copy_from_slice(&d.to_le_bytes());
            }
            let wide = widen_to_q8_0(ty, &bytes).unwrap();
            assert_eq!(wide.len(), blocks * 34);
            let (mut a, mut b) = (vec![0f32; blocks * 32], vec![0f32; blocks * 32]);
            dequantize(ty, &bytes, &mut a).unwrap();
            dequantize(GgmlType::Q8_0, &wide, &mut b).unwrap();
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{ty}: element {i}: {x} vs {y}");
            }
        }
        assert!(widen_to_q8_0(GgmlType::Q4_1, &[0; 20]).is_err());
        assert!(widen_to_q8_0(GgmlType::Q5_0, &[0; 23]).is_err());
    }
}
