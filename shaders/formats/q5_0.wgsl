// Q5_0: 32 elements in 22 bytes { d: f16, qh: u32, qs: [u8; 16] }; bit j of qh is the fifth
// bit of element j; x = (q - 16) * d. Head: a = block byte offset (2-byte aligned), s = qh, d.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + u * 22u;
    return Head(b, 0u, u32_at(b + 2u), f16_at(b), 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let lo = nibbles4(u32_at(h.a + 6u + 4u * (i % 4u)), i / 4u);
    let q = lo | (bits4(h.s, 4u * i) << vec4<u32>(4u));
    return (vec4<f32>(q) - 16.0) * h.d;
}
