// F32 (rows are 4-byte aligned). Head: a = first word of the unit.
fn unit_head(row: u32, u: u32) -> Head {
    return Head((row + u * 128u) >> 2u, 0u, 0u, 0.0, 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let a = h.a + 4u * i;
    return bitcast<vec4<f32>>(vec4<u32>(weights[a], weights[a + 1u], weights[a + 2u], weights[a + 3u]));
}
