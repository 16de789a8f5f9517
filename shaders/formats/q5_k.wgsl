// Q5_K: 256 elements in 176 bytes { d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32],
// qs: [u8; 128] }: Q4_K plus a fifth bit per element, bit c of qh[l] for sub-block c.
// Superblocks are 4-byte aligned. Head: a = first word of the unit's qs, b = first word of
// qh, s = c, d = d * sc, m = dmin * m.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + (u / 8u) * 176u;
    let c = u % 8u;
    let sm = k_scale_min(c, b + 4u);
    return Head((b + 48u + (c / 2u) * 32u) >> 2u, (b + 16u) >> 2u, c, f16_at(b) * sm.x, f16_at(b + 2u) * sm.y);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let lo = nibbles4(weights[h.a + i], h.s % 2u);
    let hi = ((bytes4(weights[h.b + i]) >> vec4<u32>(h.s)) & vec4<u32>(1u)) << vec4<u32>(4u);
    return h.d * vec4<f32>(lo | hi) - h.m;
}
