// Q4_1: 32 elements in 20 bytes { d: f16, m: f16, qs: [u8; 16] }; x = q * d + m.
// Head: a = first word of the block (blocks are 4-byte aligned), d, m.
fn unit_head(row: u32, u: u32) -> Head {
    let w = (row + u * 20u) >> 2u;
    let dm = weights[w];
    return Head(w, 0u, 0u, f16_to_f32(dm & 0xffffu), f16_to_f32(dm >> 16u));
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let w = weights[h.a + 1u + i % 4u];
    return vec4<f32>(nibbles4(w, i / 4u)) * h.d + h.m;
}
