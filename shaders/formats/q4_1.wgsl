// Q4_1: 32 elements in 20 bytes { d: f16, m: f16, qs: [u8; 16] }; x = q * d + m.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 20u;
    let d = f16_at(b);
    let m = f16_at(b + 2u);
    var v: array<f32, 32>;
    for (var j = 0u; j < 16u; j++) {
        let q = byte_at(b + 4u + j);
        v[j] = f32(q & 15u) * d + m;
        v[j + 16u] = f32(q >> 4u) * d + m;
    }
    return v;
}
