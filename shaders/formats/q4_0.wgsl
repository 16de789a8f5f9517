// Q4_0: 32 elements in 18 bytes { d: f16, qs: [u8; 16] }; element j < 16 is the low nibble of
// qs[j], element j + 16 the high nibble; x = (q - 8) * d. Unit u = block u.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 18u;
    let d = f16_at(b);
    var v: array<f32, 32>;
    for (var w = 0u; w < 4u; w++) {
        let word = u32_at(b + 2u + 4u * w);
        for (var k = 0u; k < 4u; k++) {
            let q = (word >> (8u * k)) & 0xffu;
            let j = 4u * w + k;
            v[j] = (f32(q & 15u) - 8.0) * d;
            v[j + 16u] = (f32(q >> 4u) - 8.0) * d;
        }
    }
    return v;
}
