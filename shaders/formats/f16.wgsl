// F16: unit u is elements 32u..32u+32, 2 bytes each.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 64u;
    var v: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        v[j] = f16_at(b + 2u * j);
    }
    return v;
}
