// Q8_0: 32 elements in 34 bytes { d: f16, qs: [i8; 32] }; x = q * d.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 34u;
    let d = f16_at(b);
    var v: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        v[j] = i8_at(b + 2u + j) * d;
    }
    return v;
}
