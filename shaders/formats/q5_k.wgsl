// Q5_K: 256 elements in 176 bytes { d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32],
// qs: [u8; 128] }: Q4_K plus a fifth bit per element, bit c of qh[l] for sub-block c.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + (u / 8u) * 176u;
    let c = u % 8u;
    let sm = k_scale_min(c, b + 4u);
    let d = f16_at(b) * sm.x;
    let m = f16_at(b + 2u) * sm.y;
    let qs = b + 48u + (c / 2u) * 32u;
    let shift = (c % 2u) * 4u;
    var v: array<f32, 32>;
    for (var l = 0u; l < 32u; l++) {
        let q = ((byte_at(qs + l) >> shift) & 15u) | (((byte_at(b + 16u + l) >> c) & 1u) << 4u);
        v[l] = d * f32(q) - m;
    }
    return v;
}
