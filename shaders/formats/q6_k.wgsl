// Q6_K: 256 elements in 210 bytes { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }.
// Unit u is run r = c % 4 of half h = c / 4 (c = u % 8): low 4 bits from ql[h*64 + l + 32*(r%2)]
// (high nibble for r >= 2), 2 high bits from qh[h*32 + l] >> 2r, scale
// scales[h*8 + 2r + l/16]; x = d * scale * (q - 32). Superblocks are only 2-byte aligned.
// Head: a = byte of the unit's ql, b = byte of its qh, s = r, d and m = d * scale for
// elements 0..16 and 16..32.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + (u / 8u) * 210u;
    let c = u % 8u;
    let h = c / 4u;
    let r = c % 4u;
    let d = f16_at(b + 208u);
    let sc = b + 192u + h * 8u + 2u * r;
    return Head(b + h * 64u + (r % 2u) * 32u, b + 128u + h * 32u, r, d * i8_at(sc), d * i8_at(sc + 1u));
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    let lo = nibbles4(u32_at(h.a + 4u * i), h.s / 2u);
    let hi = ((bytes4(u32_at(h.b + 4u * i)) >> vec4<u32>(2u * h.s)) & vec4<u32>(3u)) << vec4<u32>(4u);
    return select(h.d, h.m, i >= 4u) * (vec4<f32>(lo | hi) - 32.0);
}
