// Q4_1: 32 elements in 20 bytes { d: f16, m: f16, qs: [u8; 16] }; x = q * d + m.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 20u;
    let d = f16_at(b);
    let m = f16_at(b + 2u);
    var v: array<f32, 32>;
    for (var w = 0u; w < 4u; w++) {
        let word = u32_at(b + 4u + 4u * w);
        for (var k = 0u; k < 4u; k++) {
            let q = (word >> (8u * k)) & 0xffu;
            let j = 4u * w + k;
            v[j] = f32(q & 15u) * d + m;
            v[j + 16u] = f32(q >> 4u) * d + m;
        }
    }
    return v;
}
