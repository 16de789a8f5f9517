// Q4_K: 256 elements in 144 bytes { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }.
// Unit u is sub-block u % 8 of superblock u / 8; sub-blocks 2p and 2p+1 share 32 bytes of qs
// (low and high nibbles); x = d * sc * q - dmin * m.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + (u / 8u) * 144u;
    let c = u % 8u;
    let sm = k_scale_min(c, b + 4u);
    let d = f16_at(b) * sm.x;
    let m = f16_at(b + 2u) * sm.y;
    let qs = b + 16u + (c / 2u) * 32u;
    let shift = (c % 2u) * 4u;
    var v: array<f32, 32>;
    for (var l = 0u; l < 32u; l++) {
        v[l] = d * f32((byte_at(qs + l) >> shift) & 15u) - m;
    }
    return v;
}
