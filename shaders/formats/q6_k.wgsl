// Q6_K: 256 elements in 210 bytes { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }.
// Unit u is run r = c % 4 of half h = c / 4 (c = u % 8): low 4 bits from ql[h*64 + l + 32*(r%2)]
// (high nibble for r >= 2), 2 high bits from qh[h*32 + l] >> 2r, scale
// scales[h*8 + 2r + l/16]; x = d * scale * (q - 32).
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + (u / 8u) * 210u;
    let c = u % 8u;
    let h = c / 4u;
    let r = c % 4u;
    let d = f16_at(b + 208u);
    let ql = b + h * 64u + (r % 2u) * 32u;
    let qh = b + 128u + h * 32u;
    let sc = b + 192u + h * 8u + 2u * r;
    let shift = select(0u, 4u, r >= 2u);
    var v: array<f32, 32>;
    for (var l = 0u; l < 32u; l++) {
        let q = ((byte_at(ql + l) >> shift) & 15u) | (((byte_at(qh + l) >> (2u * r)) & 3u) << 4u);
        v[l] = d * i8_at(sc + l / 16u) * (f32(q) - 32.0);
    }
    return v;
}
