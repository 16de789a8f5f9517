// BF16: the top half of an f32 (rows are whole units, so 4-byte aligned). Head: a = first
// word of the unit.
fn unit_head(row: u32, u: u32) -> Head {
    return Head((row + u * 64u) >> 2u, 0u, 0u, 0.0, 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let a = weights[h.a + 2u * i];
    let b = weights[h.a + 2u * i + 1u];
    return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xffff0000u, b << 16u, b & 0xffff0000u));
}
