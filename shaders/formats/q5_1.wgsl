// Q5_1: 32 elements in 24 bytes { d: f16, m: f16, qh: u32, qs: [u8; 16] }; x = q * d + m.
// Head: a = first word of the block (blocks are 4-byte aligned), s = qh, d, m.
fn unit_head(row: u32, u: u32) -> Head {
    let w = (row + u * 24u) >> 2u;
    let dm = weights[w];
    return Head(w, 0u, weights[w + 1u], f16_to_f32(dm & 0xffffu), f16_to_f32(dm >> 16u));
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let lo = nibbles4(weights[h.a + 2u + i % 4u], i / 4u);
    let q = lo | (bits4(h.s, 4u * i) << vec4<u32>(4u));
    return vec4<f32>(q) * h.d + h.m;
}
