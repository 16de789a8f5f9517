// F16: unit u is elements 32u..32u+32, 2 bytes each (rows are whole units, so 4-byte aligned).
// Head: a = first word of the unit.
fn unit_head(row: u32, u: u32) -> Head {
    return Head((row + u * 64u) >> 2u, 0u, 0u, 0.0, 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let a = weights[h.a + 2u * i];
    let b = weights[h.a + 2u * i + 1u];
    return vec4<f32>(f16_to_f32(a & 0xffffu), f16_to_f32(a >> 16u), f16_to_f32(b & 0xffffu), f16_to_f32(b >> 16u));
}
