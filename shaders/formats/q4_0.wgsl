// Q4_0: 32 elements in 18 bytes { d: f16, qs: [u8; 16] }; element j < 16 is the low nibble of
// qs[j], element j + 16 the high nibble; x = (q - 8) * d. Unit u = block u.
// Head: a = block byte offset (2-byte aligned), d.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + u * 18u;
    return Head(b, 0u, 0u, f16_at(b), 0.0);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let w = u32_at(h.a + 2u + 4u * (i % 4u));
    return (vec4<f32>(nibbles4(w, i / 4u)) - 8.0) * h.d;
}
