// BF16: the top half of an f32.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 64u;
    var v: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        let word = weights[(b + 2u * j) >> 2u];
        let bits = select(word & 0xffffu, word >> 16u, ((b + 2u * j) & 2u) != 0u);
        v[j] = bitcast<f32>(bits << 16u);
    }
    return v;
}
