// Q8_0: 32 elements in 34 bytes { d: f16, qs: [i8; 32] }; x = q * d.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 34u;
    let d = f16_at(b);
    var v: array<f32, 32>;
    for (var w = 0u; w < 8u; w++) {
        let word = u32_at(b + 2u + 4u * w);
        for (var k = 0u; k < 4u; k++) {
            // Sign-extend byte k.
            v[4u * w + k] = f32(bitcast<i32>(word << (24u - 8u * k)) >> 24u) * d;
        }
    }
    return v;
}
