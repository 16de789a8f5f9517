// F32 (rows are 4-byte aligned).
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let w = (row + u * 128u) >> 2u;
    var v: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        v[j] = bitcast<f32>(weights[w + j]);
    }
    return v;
}
