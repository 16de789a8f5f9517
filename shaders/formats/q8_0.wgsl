// Q8_0: 32 elements in 34 bytes { d: f16, qs: [i8; 32] }; x = q * d.
// Head: a = block byte offset (2-byte aligned), d.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + u * 34u;
    return Head(b, 0u, 0u, f16_at(b), 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let w = u32_at(h.a + 2u + 4u * i);
    // Sign-extend each byte.
    let q = bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
    return vec4<f32>(q) * h.d;
}
