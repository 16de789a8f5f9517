//! Dequantization of hand-built blocks with known values.
#![allow(clippy::needless_range_loop)] // index loops mirror the block layouts

use half::{bf16, f16};
use runahead_gguf::{dequantize, GgmlType};

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn decode(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / ty.block_bytes() as usize * ty.block_size() as usize;
    let mut out = vec![f32::NAN; n];
    dequantize(ty, bytes, &mut out).unwrap();
    out
}

#[test]
fn plain_types() {
    let f32s: Vec<u8> = [1.5f32, -2.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(decode(GgmlType::F32, &f32s), vec![1.5, -2.25]);
    let f16s: Vec<u8> = [h(0.5), h(-3.0)].concat();
    assert_eq!(decode(GgmlType::F16, &f16s), vec![0.5, -3.0]);
    let bf16s: Vec<u8> = [
        bf16::from_f32(7.0).to_le_bytes(),
        bf16::from_f32(-0.125).to_le_bytes(),
    ]
    .concat();
    assert_eq!(decode(GgmlType::BF16, &bf16s), vec![7.0, -0.125]);
}

#[test]
fn q4_0_nibble_order() {
    // qs[j] = j (low nibble) | (15 - j) << 4 (high nibble)
    let mut b = h(0.5).to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let out = decode(GgmlType::Q4_0, &b);
    for j in 0..16 {
        assert_eq!(out[j], (j as f32 - 8.0) * 0.5, "low {j}");
        assert_eq!(out[j + 16], ((15 - j) as f32 - 8.0) * 0.5, "high {j}");
    }
}

#[test]
fn q4_1_scale_and_min() {
    let mut b = [h(0.25), h(-1.0)].concat();
    b.extend((0..16u8).map(|j| j | (3 << 4)));
    let out = decode(GgmlType::Q4_1, &b);
    for j in 0..16 {
        assert_eq!(out[j], j as f32 * 0.25 - 1.0);
        assert_eq!(out[j + 16], 3.0 * 0.25 - 1.0);
    }
}

#[test]
fn q5_0_fifth_bit() {
    // Fifth bit set for even elements of the first half and for element 16+1 of the second.
    let qh: u32 = 0x5555 | (1 << 17);
    let mut b = h(2.0).to_vec();
    b.extend(qh.to_le_bytes());
    b.extend((0..16u8).map(|j| (j & 0xf) | (1 << 4)));
    let out = decode(GgmlType::Q5_0, &b);
    for j in 0..16 {
        let q = j as i32 + if j % 2 == 0 { 16 } else { 0 };
        assert_eq!(out[j], (q - 16) as f32 * 2.0, "low {j}");
        let q2 = 1 + if j == 1 { 16 } else { 0 };
        assert_eq!(out[j + 16], (q2 - 16) as f32 * 2.0, "high {j}");
    }
}

#[test]
fn q5_1_fifth_bit_and_min() {
    let qh: u32 = 0xffff_0000;
    let mut b = [h(1.0), h(0.5)].concat();
    b.extend(qh.to_le_bytes());
    b.extend((0..16u8).map(|j| j | (j << 4)));
    let out = decode(GgmlType::Q5_1, &b);
    for j in 0..16 {
        assert_eq!(out[j], j as f32 + 0.5);
        assert_eq!(out[j + 16], (j + 16) as f32 + 0.5);
    }
}

#[test]
fn q8_0_signed() {
    let mut b = h(0.125).to_vec();
    b.extend((0..32i8).map(|j| (j * 4 - 64) as u8));
    let out = decode(GgmlType::Q8_0, &b);
    for j in 0..32 {
        assert_eq!(out[j], (j as f32 * 4.0 - 64.0) * 0.125);
    }
}

/// Packs eight 6-bit (scale, min) pairs the way ggml's Q4_K/Q5_K do.
fn pack_k_scales(sc: [u8; 8], m: [u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4);
    }
    s
}

const K_SC: [u8; 8] = [1, 2, 3, 63, 17, 33, 48, 60];
const K_M: [u8; 8] = [0, 5, 63, 7, 40, 1, 31, 62];

#[test]
fn q4_k_sub_blocks() {
    let (d, dmin) = (0.5f32, 0.25f32);
    let mut b = [h(d), h(dmin)].concat();
    b.extend(pack_k_scales(K_SC, K_M));
    // Byte l of chunk c: low nibble (l + c) % 16, high nibble (l * 3 + c) % 16.
    for c in 0..4 {
        b.extend((0..32).map(|l| (((l + c) % 16) | (((l * 3 + c) % 16) << 4)) as u8));
    }
    assert_eq!(b.len(), 144);
    let out = decode(GgmlType::Q4_K, &b);
    for c in 0..4 {
        for l in 0..32 {
            let (s0, m0) = (K_SC[2 * c] as f32, K_M[2 * c] as f32);
            let (s1, m1) = (K_SC[2 * c + 1] as f32, K_M[2 * c + 1] as f32);
            let lo = ((l + c) % 16) as f32;
            let hi = ((l * 3 + c) % 16) as f32;
            assert_eq!(
                out[c * 64 + l],
                d * s0 * lo - dmin * m0,
                "chunk {c} low {l}"
            );
            assert_eq!(
                out[c * 64 + 32 + l],
                d * s1 * hi - dmin * m1,
                "chunk {c} high {l}"
            );
        }
    }
}

#[test]
fn q5_k_sub_blocks() {
    let (d, dmin) = (0.25f32, 0.5f32);
    let mut b = [h(d), h(dmin)].concat();
    b.extend(pack_k_scales(K_SC, K_M));
    // qh[l] bit (2c) = l is even, bit (2c+1) = l % 3 == 0, for every chunk c.
    b.extend((0..32).map(|l| {
        let lo = if l % 2 == 0 { 0x55 } else { 0 };
        let hi = if l % 3 == 0 { 0xaa } else { 0 };
        (lo | hi) as u8
    }));
    for c in 0..4 {
        b.extend((0..32).map(|l| (((l + c) % 16) | ((15 - (l % 16)) << 4)) as u8));
    }
    assert_eq!(b.len(), 176);
    let out = decode(GgmlType::Q5_K, &b);
    for c in 0..4 {
        for l in 0..32 {
            let (s0, m0) = (K_SC[2 * c] as f32, K_M[2 * c] as f32);
            let (s1, m1) = (K_SC[2 * c + 1] as f32, K_M[2 * c + 1] as f32);
            let lo = ((l + c) % 16 + if l % 2 == 0 { 16 } else { 0 }) as f32;
            let hi = ((15 - l % 16) + if l % 3 == 0 { 16 } else { 0 }) as f32;
            assert_eq!(
                out[c * 64 + l],
                d * s0 * lo - dmin * m0,
                "chunk {c} low {l}"
            );
            assert_eq!(
                out[c * 64 + 32 + l],
                d * s1 * hi - dmin * m1,
                "chunk {c} high {l}"
            );
        }
    }
}

#[test]
fn q6_k_layout() {
    // Element e (0..256) gets the 6-bit value q(e) = (e * 7) % 64; scales are 16 signed values.
    let q = |e: usize| ((e * 7) % 64) as u8;
    let scales: [i8; 16] = [
        1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 9, 10, -11, 12, 13, -14,
    ];
    let d = 0.5f32;
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for half in 0..2 {
        for l in 0..32 {
            let base = half * 128;
            let (q1, q2, q3, q4) = (
                q(base + l),
                q(base + l + 32),
                q(base + l + 64),
                q(base + l + 96),
            );
            ql[half * 64 + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
            ql[half * 64 + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
            qh[half * 32 + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    let mut b = ql.to_vec();
    b.extend(qh);
    b.extend(scales.iter().map(|&s| s as u8));
    b.extend(h(d));
    assert_eq!(b.len(), 210);
    let out = decode(GgmlType::Q6_K, &b);
    for e in 0..256 {
        let scale = scales[e / 16] as f32;
        assert_eq!(out[e], d * scale * (q(e) as f32 - 32.0), "element {e}");
    }
}

#[test]
fn wrong_sizes_and_unsupported_types_are_errors() {
    let mut out = vec![0f32; 32];
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 17], &mut out).is_err());
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 36], &mut out).is_err());
    let mut out = vec![0f32; 256];
    let err = dequantize(GgmlType::Q2_K, &[0u8; 84], &mut out).unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}

#[test]
fn dequantize_row_checks_every_index() {
    use runahead_gguf::dequantize_row;
    let bytes: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut out = [0f32; 2];
    dequantize_row(GgmlType::F32, &bytes, 2, 1, &mut out).unwrap();
    assert_eq!(out, [3.0, 4.0]);
    // Past the end, an index whose byte offset overflows, and an output too short: errors.
    assert!(dequantize_row(GgmlType::F32, &bytes, 2, 2, &mut out).is_err());
    assert!(dequantize_row(GgmlType::F32, &bytes, 2, usize::MAX, &mut out).is_err());
    assert!(dequantize_row(GgmlType::F32, &bytes, 4, 0, &mut out).is_err());
    assert!(dequantize_row(GgmlType::Q4_0, &bytes, 31, 0, &mut out).is_err());
}
